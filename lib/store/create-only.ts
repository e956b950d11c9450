import {
  decodeUtf8,
  type Body,
  type ObjectInfo,
  type ObjectStore,
  type PutOptions,
  type StoredObject,
} from './object-store.ts';

/**
 * A create-only put that counts a write whose answer was lost. A put refused, or failed, may
 * still have landed (an adapter's retry meeting its own first attempt gets 412; a timeout
 * after the write): then the object at `key` is ours, which `ours` tells from something only
 * this write carries (a random id in its body or metadata). True when the object is ours.
 * A failure that did not land is rethrown.
 */
export async function putCreateOnly(...put: Parameters<typeof putCreateOnlyInfo>): Promise<boolean> {
  return (await putCreateOnlyInfo(...put)) !== null;
}

/** {@link putCreateOnly} that answers with the object written (its etag), or null when it is not ours. */
export async function putCreateOnlyInfo(
  store: ObjectStore,
  key: string,
  body: Body,
  options: Omit<PutOptions, 'onlyIfAbsent' | 'ifMatch'>,
  ours: (object: StoredObject) => boolean,
): Promise<ObjectInfo | null> {
  let failure: { error: unknown } | null = null;
  try {
    const written = await store.put(key, body, { ...options, onlyIfAbsent: true });
    if (written) return written;
  } catch (error) {
    failure = { error };
  }
  const object = await store.get(key);
  if (object && ours(object)) return object;
  if (failure) throw failure.error;
  return null;
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

/**
 * Whether this caller is the first to create `key` (create-only, a random body): of callers
 * racing for one thing, the one to go on. An if-match rewrite does not decide such a race on S3
 * and R2 when the rewrite keeps the body (its etag is the body's MD5), so both would land. A
 * refused create (or one whose answer was lost) reads whose the object is; `found` is the
 * object there when it is another's (null: gone since the refusal). Given `name`, the body is
 * `<name>:<random>`, so a caller refused can tell who went on.
 */
export async function firstToCreate(
  store: ObjectStore,
  key: string,
  name?: string,
): Promise<{ first: true } | { first: false; found: StoredObject | null }> {
  const mine = name === undefined ? crypto.randomUUID() : `${name}:${crypto.randomUUID()}`;
  let found: StoredObject | null = null;
  const created = await putCreateOnly(store, key, mine, {}, (object) => {
    found = object;
    return decodeUtf8(object.body) === mine;
  });
  return created ? { first: true } : { first: false, found };
}
