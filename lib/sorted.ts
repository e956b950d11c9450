/**
 * First index in ascending `values` holding a value >= `target` (`values.length` when none does).
 * Strings compare by code unit, as `<` does. [`low`, `high`): where it is known to be.
 */
export function lowerBound<T extends number | string>(
  values: ArrayLike<T>,
  target: T,
  low = 0,
  high = values.length,
): number {
  while (low < high) {
    const middle = (low + high) >> 1;
    if (values[middle]! < target) low = middle + 1;
    else high = middle;
  }
  return low;
}

/**
 * The values of `a` and `b` once each, ascending: a merge when both are ascending (a long
 * history's pinned seqs are tens of thousands, and come sorted), else a sort.
 */
export function sortedUnion(a: readonly number[], b: readonly number[]): number[] {
  if (!ascending(a) || !ascending(b)) return [...new Set([...a, ...b])].sort((x, y) => x - y);
  const union: number[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    const next = j >= b.length || (i < a.length && a[i]! <= b[j]!) ? a[i++]! : b[j++]!;
    if (union.length === 0 || union[union.length - 1] !== next) union.push(next);
  }
  return union;
}

function ascending(values: readonly number[]): boolean {
  for (let index = 1; index < values.length; index++) if (values[index - 1]! > values[index]!) return false;
  return true;
}
