/**
 * `T` with every property and array readonly, all the way down: what a value shared between
 * requests (a cached record, lib/session/log/record-cache.ts) is typed as, so that code
 * changing it in place fails to typecheck.
 */
export type DeepReadonly<T> = T extends (...args: never[]) => unknown
  ? T
  : T extends readonly (infer Element)[]
    ? readonly DeepReadonly<Element>[]
    : T extends object
      ? { readonly [Key in keyof T]: DeepReadonly<T[Key]> }
      : T;

/** Freezes `value` and everything it holds (what is frozen already is taken as frozen through). */
export function deepFreeze<T>(value: T): DeepReadonly<T> {
  freeze(value);
  return value as DeepReadonly<T>;
}

function freeze(value: unknown): void {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return;
  Object.freeze(value);
  for (const child of Object.values(value)) freeze(child);
}
