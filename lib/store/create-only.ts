import { decodeUtf8, type Body, type ObjectStore, type PutOptions, type StoredObject } from './object-store.ts';

/**
 * A create-only put that counts a write whose answer was lost. A put refused, or failed, may
 * still have landed (an adapter's retry meeting its own first attempt gets 412; a timeout
 * after the write): then the object at `key` is ours, which `ours` tells from something only
 * this write carries (a random id in its body or metadata). True when the object is ours.
 * A failure that did not land is rethrown.
 */
export async function putCreateOnly(
  store: ObjectStore,
  key: string,
  body: Body,
  options: Omit<PutOptions, 'onlyIfAbsent' | 'ifMatch'>,
  ours: (object: StoredObject) => boolean,
): Promise<boolean> {
  let failure: { error: unknown } | null = null;
  try {
    if (await store.put(key, body, { ...options, onlyIfAbsent: true })) return true;
  } catch (error) {
    failure = { error };
  }
  const object = await store.get(key);
  if (object && ours(object)) return true;
  if (failure) throw failure.error;
  return false;
}

/**
 * {@link putCreateOnly} of a JSON object that carries `mark` (its random `"writer":"<id>"`, say):
 * the object found holding that text is ours.
 */
export async function putJsonCreateOnly(
  store: ObjectStore,
  key: string,
  value: object,
  mark: string,
): Promise<boolean> {
  return putCreateOnly(store, key, JSON.stringify(value), { contentType: 'application/json' }, (object) =>
    decodeUtf8(object.body).includes(mark),
  );
}
