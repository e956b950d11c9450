import { StorageError, StorageUnsupportedError, type MissingPrecondition } from '../errors.ts';
import { backendOf, type ObjectInfo, type ObjectStore } from './object-store.ts';

/** Where probes write, under the deployment's key prefix and never under `sessions/`. */
export const PROBE_PREFIX = '.tailgate/probe/';

const CONFORMING_STORES = 'tailgate needs conditional writes (R2, AWS S3, MinIO, Ceph RGW)';

const SEEN: Record<MissingPrecondition, string> = {
  'If-None-Match': 'a create-only put overwrote an existing object',
  'If-Match': 'a put with a wrong ETag overwrote the object',
};

/**
 * The verdict per store object, for the life of the process (a Worker isolate, a server),
 * kept under the backend: wrappers that delegate every call to `inner` (CountingStore,
 * FaultyStore) share the verdict of the store they wrap.
 */
const verdicts = new WeakMap<ObjectStore, Promise<void>>();

export interface WriteProbeOptions {
  /** The deployment's KEY_PREFIX; the scratch key is `<keyPrefix>.tailgate/probe/<random>`. */
  keyPrefix?: string;
}

/**
 * Resolves when the store honours create-only puts (If-None-Match: *) and conditional puts
 * (If-Match), and throws StorageUnsupportedError when it ignores either. The first call for
 * a store probes it (three puts and a delete on a scratch key); later calls, and calls made
 * while the probe runs, share that verdict and touch no storage. A probe that fails for
 * another reason (a StorageError: network, 5xx) is forgotten, so the next call probes again.
 */
export function requireConditionalWrites(store: ObjectStore, options: WriteProbeOptions = {}): Promise<void> {
  const backend = backendOf(store);
  let verdict = verdicts.get(backend);
  if (!verdict) {
    verdict = probe(store, `${options.keyPrefix ?? ''}${PROBE_PREFIX}${crypto.randomUUID()}`).then((missing) => {
      if (missing.length > 0) throw unsupported(missing);
    });
    verdicts.set(backend, verdict);
    verdict.catch((error: unknown) => {
      if (!(error instanceof StorageUnsupportedError) && verdicts.get(backend) === verdict) verdicts.delete(backend);
    });
  }
  return verdict;
}

/** What the store ignored, from writes to `key`, which is deleted again whatever happens. */
async function probe(store: ObjectStore, key: string): Promise<MissingPrecondition[]> {
  let missing: MissingPrecondition[];
  try {
    const created = await store.put(key, 'tailgate write probe: first', { onlyIfAbsent: true });
    if (!created) throw new StorageError(`the store refused to create the new object ${key}`, { key });
    // Every S3 API, R2 and the file store give a put's ETag; a web page or a console port does not.
    if (created.etag === '') {
      throw new StorageError(`the store answered the put of ${key} without an ETag: is its endpoint an S3 API?`, {
        key,
      });
    }
    const overwritten = await store.put(key, 'tailgate write probe: second', { onlyIfAbsent: true });
    const current = overwritten ?? created;
    const replaced = await store.put(key, 'tailgate write probe: third', { ifMatch: otherEtag(current) });
    missing = [...(overwritten ? ['If-None-Match' as const] : []), ...(replaced ? ['If-Match' as const] : [])];
  } catch (error) {
    const cleanup = store.delete(key).catch(() => {});
    // A store that did not answer in time would hold the verdict as long again for the delete.
    if (!timedOut(error)) await cleanup;
    throw error;
  }
  await store.delete(key);
  return missing;
}

/** A storage error of a request the store never answered (the S3 client's idle timeout). */
function timedOut(error: unknown): boolean {
  if (!(error instanceof StorageError)) return false;
  const details = error.details as { name?: unknown } | undefined;
  return details?.name === 'TimeoutError';
}

/** An etag in the same shape as the current one that cannot equal it (every hex digit changed). */
function otherEtag(current: ObjectInfo): string {
  const changed = current.etag.replace(/[0-9a-f]/gi, (digit) => (digit === '0' ? '1' : '0'));
  return changed === current.etag ? `${current.etag}-probe` : changed;
}

function unsupported(missing: MissingPrecondition[]): StorageUnsupportedError {
  const seen = missing.map((name) => `the store ignores ${name}: ${SEEN[name]}`).join('; ');
  return new StorageUnsupportedError(`${seen}; ${CONFORMING_STORES}`, missing);
}
