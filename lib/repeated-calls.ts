/**
 * `repeated` of a history's aggregates (lib/history.ts): for every call key seen at least twice,
 * the seq of its newest call, keyed by the call key's first characters. A long history's map has
 * tens of thousands of entries (31,000 at 1,000,000 items of a coding agent's calls), and a plain
 * object that large is a dictionary whose copy, freeze or serialization costs about 0.3 to 0.6 µs
 * an entry: every view packing writes used to copy it whole for a handful of new repeats. So the
 * map is immutable and extending it (`with`) costs what changes:
 * - its entries are a plain object (`base`: as read back from JSON, or built by a flattening)
 *   and the changes on top of it, in the order they were first made;
 * - once the changes outnumber an eighth of the base (and FLATTEN_MIN), the next map is
 *   flattened into a new base, so each change costs a constant share of the copies;
 * - its JSON (`json`) is the base's JSON, made once per base, with the changed values spliced in
 *   and the new keys appended: the text `JSON.stringify(toJSON())` gives, entry for entry in the
 *   order a copy of the base updated in place would have (changes of base keys where they stand,
 *   new keys after them), for keys that are not array indices, which a plain object puts first
 *   (a call key's 12 hex characters never are one).
 * A base object handed to `of` is owned by the map from then on: nothing may change it.
 */
export class RepeatedCalls {
  static readonly EMPTY = new RepeatedCalls({}, new Map(), 0);

  readonly #base: Readonly<Record<string, number>>;
  readonly #changes: ReadonlyMap<string, number>;
  /** The number of entries. */
  readonly size: number;
  #seqs: readonly number[] | undefined;
  #json: string | undefined;

  private constructor(base: Readonly<Record<string, number>>, changes: ReadonlyMap<string, number>, size: number) {
    this.#base = base;
    this.#changes = changes;
    this.size = size;
  }

  /**
   * The map of `entries`, taken as they are (not copied), or null unless they are a plain object
   * (as JSON.parse makes one) each of whose own keys maps to a positive safe integer, none of them
   * `__proto__` (which a copy by a schema would leave out). One pass: an object that large,
   * parsed from JSON, is in dictionary mode, where `for...in` costs a third of `Object.values`.
   */
  static checked(entries: unknown): RepeatedCalls | null {
    if (typeof entries !== 'object' || entries === null || Object.getPrototypeOf(entries) !== Object.prototype)
      return null;
    return RepeatedCalls.#walked(entries);
  }

  /** The map of `entries`, which are known to be one (a schema's output, a map's own). */
  static of(entries: Readonly<Record<string, number>>): RepeatedCalls {
    const map = RepeatedCalls.#walked(entries);
    if (!map) throw new TypeError('not a map of call keys to seqs');
    return map;
  }

  /** `checked` but for the prototype: the map, with its seqs, or null. */
  static #walked(entries: object): RepeatedCalls | null {
    const values: number[] = [];
    for (const key in entries) {
      const seq = (entries as Record<string, unknown>)[key];
      if (key === '__proto__' || !Object.hasOwn(entries, key) || !Number.isSafeInteger(seq) || (seq as number) < 1)
        return null;
      values.push(seq as number);
    }
    const map = new RepeatedCalls(entries as Record<string, number>, new Map(), values.length);
    map.#seqs = ascendingUnique(values);
    return map;
  }

  /** The changes it keeps on top of its base: past max(FLATTEN_MIN, an eighth of the base), it is flattened. */
  get unflattened(): number {
    return this.#changes.size;
  }

  /** The seq of the newest call of `key`'s calls, when seen twice. */
  get(key: string): number | undefined {
    return this.#lookup(this.#changes, key);
  }

  /**
   * This map with `changes` made in order (a key's later change wins). `newer`: every seq they
   * set is larger than every seq of this map (a history's new repeats), so the seqs of the new
   * map are derived from this one's, if known, without a walk of its entries.
   */
  with(changes: Iterable<readonly [string, number]>, newer = false): RepeatedCalls {
    // Copied at the first change: a history's items bring none most of the time.
    let next: Map<string, number> | undefined;
    const replaced = new Set<number>();
    const added: number[] = [];
    let size = this.size;
    for (const [key, seq] of changes) {
      // A map read back refuses it (`checked`), as a copy by a schema would leave it out.
      if (key === '__proto__') throw new TypeError('__proto__ is no call key');
      next ??= new Map(this.#changes);
      const older = this.#lookup(next, key);
      if (older === undefined) size += 1;
      else replaced.add(older);
      next.set(key, seq);
      added.push(seq);
    }
    if (!next) return this;
    const base = next.size > Math.max(FLATTEN_MIN, this.size / 8) ? flattened(this.#base, next) : undefined;
    const map = base ? new RepeatedCalls(base, new Map(), size) : new RepeatedCalls(this.#base, next, size);
    // Derived only while no two entries share a seq (a history's never do: a seq is one call).
    if (newer && this.#seqs?.length === this.size) {
      const kept = replaced.size === 0 ? [...this.#seqs] : this.#seqs.filter((seq) => !replaced.has(seq));
      for (const seq of added) if (!replaced.has(seq) && kept[kept.length - 1] !== seq) kept.push(seq);
      if (kept.length === size) map.#seqs = kept;
    }
    return map;
  }

  #lookup(changes: ReadonlyMap<string, number>, key: string): number | undefined {
    return changes.get(key) ?? (Object.hasOwn(this.#base, key) ? this.#base[key] : undefined);
  }

  /** The entries, in the order of the map's JSON. */
  *entries(): IterableIterator<[string, number]> {
    for (const key in this.#base) yield [key, this.#changes.get(key) ?? this.#base[key]!];
    for (const [key, seq] of this.#changes) if (!Object.hasOwn(this.#base, key)) yield [key, seq];
  }

  /** The seqs of the entries, ascending, without duplicates. */
  seqs(): readonly number[] {
    if (!this.#seqs) {
      const values: number[] = [];
      for (const [, seq] of this.entries()) values.push(seq);
      this.#seqs = ascendingUnique(values);
    }
    return this.#seqs;
  }

  /** The entries as a new plain object (the map's own base is never handed out: nothing may change it). */
  toJSON(): Record<string, number> {
    return flattened(this.#base, this.#changes);
  }

  /** `JSON.stringify(this.toJSON())`, made from the base's JSON (made once per base). */
  json(): string {
    if (this.#json === undefined) this.#json = splicedJson(this.#base, this.#changes);
    return this.#json;
  }
}

function ascendingUnique(values: number[]): number[] {
  // A typed array sorts numbers without a comparator call per pair.
  const sorted = Float64Array.from(values).sort();
  const seqs: number[] = [];
  for (const seq of sorted) if (seqs.length === 0 || seqs[seqs.length - 1] !== seq) seqs.push(seq);
  return seqs;
}

/** Changes a map keeps on top of its base before the next map is flattened (beside an eighth of the base). */
const FLATTEN_MIN = 256;

/** A new plain object of `base` with `changes` made: base keys where they stand, new keys after them. */
function flattened(
  base: Readonly<Record<string, number>>,
  changes: ReadonlyMap<string, number>,
): Record<string, number> {
  // No key is `__proto__` (`checked`, `with`).
  const entries: Record<string, number> = {};
  for (const key in base) entries[key] = changes.get(key) ?? base[key]!;
  for (const [key, seq] of changes) if (!Object.hasOwn(base, key)) entries[key] = seq;
  return entries;
}

/** A base's JSON, and where each of its values starts in it. */
interface BaseJson {
  text: string;
  valueAt: Map<string, number>;
}
const baseJson = new WeakMap<object, BaseJson>();

function jsonOf(base: Readonly<Record<string, number>>): BaseJson {
  let known = baseJson.get(base);
  if (!known) {
    const valueAt = new Map<string, number>();
    let text = '{';
    for (const key in base) {
      if (text.length > 1) text += ',';
      text += `${JSON.stringify(key)}:`;
      valueAt.set(key, text.length);
      text += String(base[key]);
    }
    text += '}';
    // Grown by `+=`, the text is a rope of a node per piece (four times its flat size at 31,000
    // entries), which V8 keeps as it is, though encoded, until something slices it: sliced once
    // here, it is flat for as long as the base lives.
    text.slice(0, 1);
    known = { text, valueAt };
    baseJson.set(base, known);
  }
  return known;
}

function splicedJson(base: Readonly<Record<string, number>>, changes: ReadonlyMap<string, number>): string {
  const { text, valueAt } = jsonOf(base);
  if (changes.size === 0) return text;
  const replaced: [number, string, number][] = [];
  let appended = '';
  for (const [key, seq] of changes) {
    const at = valueAt.get(key);
    if (at === undefined) appended += `,${JSON.stringify(key)}:${seq}`;
    else replaced.push([at, String(seq), String(base[key]).length]);
  }
  replaced.sort((a, b) => a[0] - b[0]);
  let result = '';
  let from = 0;
  for (const [at, value, length] of replaced) {
    result += text.slice(from, at) + value;
    from = at + length;
  }
  result += text.slice(from, -1);
  // The base's text ends in `}`; an empty base has no entry before the first appended one.
  result += `${text.length === 2 ? appended.slice(1) : appended}}`;
  // Flat, as the base's text (jsonOf): a map keeps its JSON for as long as it lives.
  result.slice(0, 1);
  return result;
}
