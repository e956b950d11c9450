import {
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  type GetObjectCommandOutput,
  type PutObjectCommandInput,
} from '@aws-sdk/client-s3';
import { StorageError } from '../errors.ts';
import { randomHex } from '../hash.ts';
import { canonicalEtag, ServiceEtags } from './etag.ts';
import { isNotFound, nameOf, statusOf, storageError } from './s3-errors.ts';
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

/** DeleteObjects takes at most this many keys per request. */
const DELETE_BATCH_SIZE = 1000;
const MAX_LIST_LIMIT = 1000;
/** Attempts for a conditional put that S3 answers with 409 ConditionalRequestConflict. */
const CONFLICT_ATTEMPTS = 4;
const CONFLICT_BACKOFF_MS = 20;

export interface S3StoreOptions {
  bucket: string;
  /** A ready client. When given, endpoint/region/credentials/forcePathStyle are ignored. */
  client?: S3Client;
  endpoint?: string;
  region?: string;
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  forcePathStyle?: boolean;
  /**
   * How long a connection may take to open, and a request may go without a byte sent or
   * received, before it fails (and the SDK retries it): a store that takes connections and
   * never answers fails its operations as StorageErrors instead of holding them for ever.
   * Default 10000.
   */
  idleTimeoutMs?: number;
}

/** The default `idleTimeoutMs`: far above any S3 latency, well below a client's patience. */
export const S3_IDLE_TIMEOUT_MS = 10_000;

/**
 * Builds the S3 client the store uses when none is given. Checksums are calculated and
 * validated only when an operation requires them: R2's S3 endpoint rejects the SDK's default
 * flexible checksums (and aws-chunked uploads), and both are needless over TLS.
 */
export function createS3Client(options: Omit<S3StoreOptions, 'bucket' | 'client'> = {}): S3Client {
  return new S3Client({
    region: options.region ?? 'auto',
    ...(options.endpoint === undefined ? {} : { endpoint: options.endpoint }),
    ...(options.credentials === undefined ? {} : { credentials: options.credentials }),
    ...(options.forcePathStyle === undefined ? {} : { forcePathStyle: options.forcePathStyle }),
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    // Node's HTTP client has no deadline of its own (the fetch handler of Workers ignores these).
    requestHandler: {
      connectionTimeout: options.idleTimeoutMs ?? S3_IDLE_TIMEOUT_MS,
      socketTimeout: options.idleTimeoutMs ?? S3_IDLE_TIMEOUT_MS,
    },
  });
}

/**
 * An ObjectStore over any S3 wire-protocol service (AWS S3, R2's S3 endpoint, MinIO...)
 * through @aws-sdk/client-s3. Runs on Node, Deno and Workers (no node: imports).
 *
 * - Create-only put is `If-None-Match: *`; 412 means the key is taken (null). A 409
 *   ConditionalRequestConflict (a racing write) is retried with a short backoff, then
 *   settled by looking at the key: taken means null.
 * - If-Match put is `If-Match: <etag>`; 412 (or a missing key) means null.
 * - Etags are canonical (./etag.ts): a listing's match a get's in whatever form the service
 *   writes each; an If-Match goes out in the form of the service's own answers.
 * - `list` returns `metadata: {}`: ListObjectsV2 carries no user metadata, and a HEAD per
 *   listed object would make listing cost grow with the page. Call `head` when needed.
 * - `put` reports `uploaded` from the local clock (S3 does not return the time of a PUT).
 * - S3 lowercases metadata keys and allows only ASCII in metadata values.
 *
 * @example
 * const store = new S3Store({ bucket: 'tailgate', endpoint: 'https://<account>.r2.cloudflarestorage.com',
 *   credentials: { accessKeyId, secretAccessKey } });
 */
export class S3Store implements ObjectStore {
  readonly client: S3Client;
  readonly bucket: string;
  readonly #etags = new ServiceEtags();

  constructor(options: S3StoreOptions) {
    this.bucket = options.bucket;
    this.client = options.client ?? createS3Client(options);
  }

  async get(key: string, options: GetOptions = {}): Promise<StoredObject | null> {
    const { range } = options;
    if (range && isEmptyRange(range)) return this.#emptyBody(key);
    let response: GetObjectCommandOutput;
    try {
      response = await this.client.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: key, ...(range ? { Range: rangeHeader(range) } : {}) }),
      );
    } catch (error) {
      if (isNotFound(error)) return null;
      if (range && statusOf(error) === 416) {
        // A suffix longer than the object means the whole object (RFC 9110), but some
        // S3-compatible servers answer 416 instead; the whole object is the right answer.
        if ('suffix' in range) return this.get(key);
        // The range starts at or past the end (or the object is empty): no bytes.
        return this.#emptyBody(key);
      }
      throw storageError('get', key, error);
    }
    let body: Uint8Array;
    try {
      body = response.Body ? await response.Body.transformToByteArray() : new Uint8Array(0);
    } catch (error) {
      throw storageError('get', key, error);
    }
    return {
      key,
      size: totalSize(response.ContentRange) ?? response.ContentLength ?? body.length,
      etag: this.#etags.answered(response.ETag),
      uploaded: response.LastModified ?? new Date(0),
      metadata: ownMetadata(response.Metadata),
      body,
    };
  }

  async head(key: string): Promise<ObjectInfo | null> {
    const response = await this.#headObject(key);
    if (!response) return null;
    return {
      key,
      size: response.ContentLength ?? 0,
      etag: this.#etags.answered(response.ETag),
      uploaded: response.LastModified ?? new Date(0),
      metadata: ownMetadata(response.Metadata),
    };
  }

  /** The object's HEAD as S3 answers it (its metadata with a conditional put's mark); null: none. */
  async #headObject(key: string) {
    try {
      return await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
    } catch (error) {
      if (!isNotFound(error)) throw storageError('head', key, error);
      // A HEAD's 404 has no body, so S3 cannot tell NoSuchBucket from a missing key there.
      if (nameOf(error) !== 'NoSuchKey') await this.#checkBucket('head', key);
      return null;
    }
  }

  /** When a HeadBucket last found the bucket (ms; see #checkBucket). */
  #bucketFoundAt = Number.NEGATIVE_INFINITY;
  /** The HeadBucket in flight, which concurrent callers share (see #headBucket). */
  #bucketCheck: Promise<{ error: unknown } | null> | undefined;

  /**
   * Throws a StorageError when the bucket does not exist: asked after a bodiless 404, with
   * HeadBucket, whose 404 can only mean the bucket. 403 is a bucket these credentials may not
   * inspect, and 405 or 501 a service without HeadBucket: none says the bucket is missing.
   */
  async #checkBucket(operation: string, key: string): Promise<void> {
    // Asked at most once a minute: a HEAD of an absent key (a notice's, a claim's) costs one
    // request, not two, while the bucket is known to be there. Callers while one is asked
    // wait for its answer; a failure is not kept (the next caller asks again).
    if (Date.now() - this.#bucketFoundAt < BUCKET_CHECK_MS) return;
    this.#bucketCheck ??= this.#headBucket().finally(() => {
      this.#bucketCheck = undefined;
    });
    const failed = await this.#bucketCheck;
    if (failed === null) return;
    const { error } = failed;
    const status = statusOf(error);
    if (status !== 404) throw storageError(operation, key, error);
    throw new StorageError(`S3 ${operation} ${key} failed: bucket ${this.bucket} does not exist`, {
      operation,
      key,
      status,
      name: 'NoSuchBucket',
    });
  }

  /** One HeadBucket: null when it found the bucket (or cannot say it is missing), else its error. */
  async #headBucket(): Promise<{ error: unknown } | null> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }));
    } catch (error) {
      const status = statusOf(error);
      if (status !== 403 && status !== 405 && status !== 501) return { error };
    }
    this.#bucketFoundAt = Date.now();
    return null;
  }

  async put(key: string, body: Body, options: PutOptions = {}): Promise<ObjectInfo | null> {
    // Both conditions: the object must be absent and match an etag. No object does.
    if (options.onlyIfAbsent && options.ifMatch !== undefined) return null;
    const bytes = bodyBytes(body);
    const metadata = { ...(options.metadata ?? {}) };
    const conditional = options.onlyIfAbsent === true || options.ifMatch !== undefined;
    // A conditional put carries a mark of its own, which tells its write from another's.
    const mark = conditional ? randomHex(8) : undefined;
    const input: PutObjectCommandInput = {
      Bucket: this.bucket,
      Key: key,
      Body: bytes,
      ContentLength: bytes.length,
      Metadata: mark ? { ...metadata, [PUT_MARK]: mark } : metadata,
      ...(options.contentType ? { ContentType: options.contentType } : {}),
      ...(options.onlyIfAbsent ? { IfNoneMatch: '*' } : {}),
      ...(!options.onlyIfAbsent && options.ifMatch !== undefined
        ? { IfMatch: this.#etags.condition(options.ifMatch) }
        : {}),
    };
    let resent = false;
    for (let attempt = 1; ; attempt++) {
      try {
        const response = await this.client.send(new PutObjectCommand(input));
        return { key, size: bytes.length, etag: this.#etags.answered(response.ETag), uploaded: new Date(), metadata };
      } catch (error) {
        const status = statusOf(error);
        if (mark && status === 412) {
          const own = await this.#ownRetry(key, bytes.length, metadata, mark, error);
          // Refused perhaps for the form of its If-Match alone (./etag.ts): sent again once in the service's.
          const sent: string | undefined = own || resent ? undefined : input.IfMatch;
          const again: string | null =
            sent === undefined
              ? null
              : await this.#etags.resent(options.ifMatch!, sent, () => this.head(key).catch(() => null));
          if (!again) return own;
          [input.IfMatch, resent] = [again, true];
          continue;
        }
        // If-Match on a missing key: some services answer 404 rather than 412.
        if (input.IfMatch !== undefined && isNotFound(error)) return null;
        if (!conditional || status !== 409) throw storageError('put', key, error);
        if (attempt < CONFLICT_ATTEMPTS) {
          await sleep(CONFLICT_BACKOFF_MS * 2 ** (attempt - 1) * (0.5 + Math.random()));
          continue;
        }
        // Still conflicting: a racing write is in flight. If it has landed, we lost.
        const current = await this.head(key);
        if (input.IfNoneMatch !== undefined && current) return null;
        if (input.IfMatch !== undefined && current?.etag !== canonicalEtag(input.IfMatch)) return null;
        throw storageError('put', key, error);
      }
    }
  }

  /**
   * A conditional put refused (412) after the SDK sent it again: the attempt before may have
   * landed and been answered with an error, its retry then meeting its own write. Ours when the
   * object carries this put's mark; else refused (null).
   */
  async #ownRetry(key: string, size: number, metadata: Record<string, string>, mark: string, error: unknown) {
    const attempts = (error as { $metadata?: { attempts?: number } }).$metadata?.attempts ?? 1;
    if (attempts <= 1) return null;
    const current = await this.#headObject(key);
    if (current?.Metadata?.[PUT_MARK] !== mark) return null;
    const etag = this.#etags.answered(current.ETag);
    return { key, size, etag, uploaded: current.LastModified ?? new Date(), metadata };
  }

  async list(prefix: string, options: ListOptions = {}): Promise<ListResult> {
    try {
      const response = await this.client.send(
        new ListObjectsV2Command({
          Bucket: this.bucket,
          Prefix: prefix,
          MaxKeys: Math.max(1, Math.min(options.limit ?? MAX_LIST_LIMIT, MAX_LIST_LIMIT)),
          ...(options.cursor === undefined ? {} : { ContinuationToken: options.cursor }),
          ...(options.startAfter === undefined ? {} : { StartAfter: options.startAfter }),
          ...(options.delimiter === undefined ? {} : { Delimiter: options.delimiter }),
        }),
      );
      const objects: ObjectInfo[] = (response.Contents ?? []).map((object) => ({
        key: object.Key ?? '',
        size: object.Size ?? 0,
        etag: this.#etags.listed(object.ETag),
        uploaded: object.LastModified ?? new Date(0),
        metadata: {},
      }));
      const prefixes =
        options.delimiter === undefined
          ? {}
          : { prefixes: (response.CommonPrefixes ?? []).flatMap((entry) => (entry.Prefix ? [entry.Prefix] : [])) };
      return response.IsTruncated && response.NextContinuationToken
        ? { objects, truncated: true, cursor: response.NextContinuationToken, ...prefixes }
        : { objects, truncated: false, ...prefixes };
    } catch (error) {
      throw storageError('list', prefix, error);
    }
  }

  async delete(keys: string | string[]): Promise<void> {
    const all = Array.isArray(keys) ? keys : [keys];
    if (all.length === 1) return this.#deleteOne(all[0]!);
    for (let start = 0; start < all.length; start += DELETE_BATCH_SIZE) {
      const batch = all.slice(start, start + DELETE_BATCH_SIZE);
      let failed: string[];
      try {
        const response = await this.client.send(
          new DeleteObjectsCommand({
            Bucket: this.bucket,
            Delete: { Objects: batch.map((key) => ({ Key: key })), Quiet: true },
          }),
        );
        failed = (response.Errors ?? []).filter((entry) => entry.Code !== 'NoSuchKey').map((entry) => entry.Key ?? '');
      } catch (error) {
        // Some S3-compatible services lack DeleteObjects; one DeleteObject per key still works.
        if (statusOf(error) !== 501 && nameOf(error) !== 'NotImplemented')
          throw storageError('delete', batch[0]!, error);
        failed = batch;
      }
      for (const key of failed) await this.#deleteOne(key);
    }
  }

  async #deleteOne(key: string): Promise<void> {
    try {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
    } catch (error) {
      if (isNotFound(error)) return;
      throw storageError('delete', key, error);
    }
  }

  async #emptyBody(key: string): Promise<StoredObject | null> {
    const info = await this.head(key);
    return info ? { ...info, body: new Uint8Array(0) } : null;
  }
}

/** Same as `new S3Store(options)`, for callers that prefer a factory. */
export function createS3Store(options: S3StoreOptions): S3Store {
  return new S3Store(options);
}

function rangeHeader(range: ByteRange): string {
  if ('suffix' in range) return `bytes=-${range.suffix}`;
  return range.length === undefined
    ? `bytes=${range.offset}-`
    : `bytes=${range.offset}-${range.offset + range.length - 1}`;
}

function isEmptyRange(range: ByteRange): boolean {
  return 'suffix' in range ? range.suffix === 0 : range.length === 0;
}

/** The object's total size from a `Content-Range: bytes a-b/total` header. */
function totalSize(contentRange: string | undefined): number | undefined {
  const match = contentRange?.match(/\/(\d+)\s*$/);
  return match ? Number(match[1]) : undefined;
}

/** How long a bucket HeadBucket found is taken to be there (ms): a missing one is found within it. */
const BUCKET_CHECK_MS = 60_000;

/** The metadata key of a conditional put's own mark (S3 lower-cases metadata keys). */
const PUT_MARK = 'tailgate-put';

/** An object's metadata as its writer gave it: without a conditional put's mark. */
function ownMetadata(stored: Record<string, string> | undefined): Record<string, string> {
  const { [PUT_MARK]: _mark, ...metadata } = stored ?? {};
  return metadata;
}

function sleep(milliseconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, milliseconds));
}
