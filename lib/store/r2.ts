import { NotConfiguredError, StorageError } from '../errors.ts';
import {
  bodyBytes,
  type Body,
  type ByteRange,
  type GetOptions,
  type ListOptions,
  type ListResult,
  type ObjectInfo,
  type ObjectStore,
  type PutOptions,
  type StoredObject,
} from './object-store.ts';
import { canonicalEtag } from './etag.ts';

/** The R2 binding accepts at most this many keys in one delete call. */
const DELETE_BATCH_SIZE = 1000;
const MAX_LIST_LIMIT = 1000;

/**
 * An ObjectStore over a Cloudflare R2 bucket binding (`env.BUCKET`).
 *
 * Etags are canonical (./etag.ts), as R2's plain `etag` (unquoted) is, the form
 * `onlyIf.etagMatches` compares against; an `ifMatch` in another form is sent in that one. Metadata is R2 custom
 * metadata; `list` asks R2 to include it, so list results carry metadata here (the port only
 * promises it from `head`/`get`).
 *
 * @example
 * const store = new R2Store(env.BUCKET);
 * await store.put('sessions/a/session.json', json, { onlyIfAbsent: true });
 */
export class R2Store implements ObjectStore {
  readonly #bucket: R2Bucket;

  constructor(bucket: R2Bucket) {
    this.#bucket = bucket;
  }

  async get(key: string, options: GetOptions = {}): Promise<StoredObject | null> {
    const { range } = options;
    if (range && isEmptyRange(range)) return this.#emptyBody(key);
    return retryRead(async () => {
      let object: R2ObjectBody | null;
      try {
        object = range ? await this.#bucket.get(key, { range }) : await this.#bucket.get(key);
      } catch (error) {
        // R2 rejects a range that starts at or past the end; the port answers it with no bytes.
        // (The local bucket sometimes says only "Unspecified error (0)": the size tells.)
        if (range && isRangeNotSatisfiable(error)) return this.#emptyBody(key);
        if (range && 'offset' in range && /unspecified error/i.test(String(error))) {
          const info = await this.#bucket.head(key).catch(() => null);
          if (info && range.offset >= info.size) return { ...toInfo(info), body: new Uint8Array(0) };
        }
        throw storageError('get', key, error);
      }
      if (!object) return null;
      try {
        const body = new Uint8Array(await object.arrayBuffer());
        return { ...toInfo(object), body };
      } catch (error) {
        throw storageError('get', key, error);
      }
    });
  }

  async head(key: string): Promise<ObjectInfo | null> {
    return retryRead(async () => {
      try {
        const object = await this.#bucket.head(key);
        return object ? toInfo(object) : null;
      } catch (error) {
        throw storageError('head', key, error);
      }
    });
  }

  async put(key: string, body: Body, options: PutOptions = {}): Promise<ObjectInfo | null> {
    // Both conditions: the object must be absent and match an etag. No object does.
    if (options.onlyIfAbsent && options.ifMatch !== undefined) return null;
    const onlyIf: R2Conditional | undefined = options.onlyIfAbsent
      ? { etagDoesNotMatch: '*' }
      : options.ifMatch !== undefined
        ? { etagMatches: canonicalEtag(options.ifMatch) }
        : undefined;
    const putOptions: R2PutOptions = { customMetadata: { ...(options.metadata ?? {}) } };
    if (onlyIf) putOptions.onlyIf = onlyIf;
    if (options.contentType) putOptions.httpMetadata = { contentType: options.contentType };
    try {
      // With `onlyIf`, R2 resolves to null when the precondition fails.
      const object = await this.#bucket.put(key, bodyBytes(body), putOptions);
      return object ? toInfo(object) : null;
    } catch (error) {
      throw storageError('put', key, error);
    }
  }

  async list(prefix: string, options: ListOptions = {}): Promise<ListResult> {
    const listOptions: R2ListOptions = {
      prefix,
      limit: Math.max(1, Math.min(options.limit ?? MAX_LIST_LIMIT, MAX_LIST_LIMIT)),
      include: ['customMetadata'],
    };
    if (options.cursor !== undefined) listOptions.cursor = options.cursor;
    if (options.startAfter !== undefined) listOptions.startAfter = options.startAfter;
    if (options.delimiter !== undefined) listOptions.delimiter = options.delimiter;
    return retryRead(async () => {
      try {
        const listed = await this.#bucket.list(listOptions);
        const objects = listed.objects.map(toInfo);
        const prefixes = options.delimiter !== undefined ? { prefixes: listed.delimitedPrefixes } : {};
        return listed.truncated
          ? { objects, truncated: true, cursor: listed.cursor, ...prefixes }
          : { objects, truncated: false, ...prefixes };
      } catch (error) {
        throw storageError('list', prefix, error);
      }
    });
  }

  async delete(keys: string | string[]): Promise<void> {
    const all = Array.isArray(keys) ? keys : [keys];
    for (let start = 0; start < all.length; start += DELETE_BATCH_SIZE) {
      const batch = all.slice(start, start + DELETE_BATCH_SIZE);
      try {
        await this.#bucket.delete(batch);
      } catch (error) {
        throw storageError('delete', batch[0] ?? '', error);
      }
    }
  }

  async #emptyBody(key: string): Promise<StoredObject | null> {
    const info = await this.head(key);
    return info ? { ...info, body: new Uint8Array(0) } : null;
  }
}

function toInfo(object: R2Object): ObjectInfo {
  return {
    key: object.key,
    size: object.size,
    etag: canonicalEtag(object.etag),
    uploaded: new Date(object.uploaded),
    metadata: { ...(object.customMetadata ?? {}) },
  };
}

function isEmptyRange(range: ByteRange): boolean {
  return 'suffix' in range ? range.suffix === 0 : range.length === 0;
}

/** The binding reports R2 error codes only in the message: 10039 is "range not satisfiable". */
function isRangeNotSatisfiable(error: unknown): boolean {
  const message = error instanceof Error ? error.message : String(error);
  return message.includes('(10039)') || /range is not satisfiable/i.test(message);
}

/** Reads are tried this many times in all: R2 answers some with a transient internal error. */
const READ_ATTEMPTS = 3;

/**
 * Runs a read (get, head, list: they change nothing, so a repeat is safe) again after a short
 * pause when it fails, as the S3 client does for every request. Writes are not retried here:
 * a create-only put whose answer was lost is the session log's to resolve.
 */
async function retryRead<Result>(read: () => Promise<Result>): Promise<Result> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await read();
    } catch (error) {
      if (attempt >= READ_ATTEMPTS) throw error;
      // Long enough for a busy local bucket (miniflare) to answer again, short for a request.
      await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
    }
  }
}

function storageError(operation: string, key: string, error: unknown): StorageError {
  const message = error instanceof Error ? error.message : String(error);
  return new StorageError(`R2 ${operation} ${key} failed: ${message}`, { operation, key });
}

const storesByBucket = new WeakMap<R2Bucket, R2Store>();

/**
 * The one R2Store of a bucket binding for the isolate's life. A binding is the same object
 * on every request, and the write probe's verdict (./write-probe.ts) is kept per store, so
 * a store per request would probe on every request. Without the binding (a Worker whose
 * wrangler environment binds no bucket as BUCKET) it is the 503 not_configured naming it.
 */
export function r2StoreFor(bucket: R2Bucket | undefined): R2Store {
  if (typeof bucket !== 'object' || bucket === null)
    throw new NotConfiguredError(
      'no R2 bucket is bound as BUCKET; bind one in wrangler.toml ([[r2_buckets]] binding = "BUCKET", ' +
        'in each [env.<name>] deployed, which does not inherit it)',
      { variable: 'BUCKET' },
    );
  let store = storesByBucket.get(bucket);
  if (!store) {
    store = new R2Store(bucket);
    storesByBucket.set(bucket, store);
  }
  return store;
}
