import {
  createServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { S3Store } from '../../lib/store/s3.ts';
import { cursorGroup, GROUP_END } from '../../lib/store/object-store.ts';
import { KeyIndex } from './s3-key-index.ts';

/**
 * fauxqs (2.4.1) implements ranges, listing and batch deletes, but its PutObject ignores
 * `If-None-Match` and `If-Match`: a create-only put silently overwrites. S3 and R2 honour
 * both. So the S3 tests talk to fauxqs through this small loopback gateway, which evaluates
 * the two preconditions the way S3 documents them (412 PreconditionFailed, 404 NoSuchKey for
 * If-Match on a missing key), atomically per key.
 *
 * fauxqs also sorts listings with `localeCompare` ("_" and "~" before digits, "a" next to
 * "A") while S3 lists in UTF-8 byte order, and pages by code-unit comparison, so mixed-case
 * keys can be skipped or repeated across pages; and it filters and sorts the whole bucket for
 * every page. The gateway therefore answers ListObjectsV2 in byte order, paged by key: with
 * `keyIndex` (it is the bucket's only writer) from the keys it has written, a page costing its
 * own keys; otherwise from fauxqs's own listing of the prefix, fetched whole and re-sorted for
 * each page. Everything else is forwarded untouched (writes one at a time per key), and the
 * adapter speaks the real S3 wire protocol end to end.
 *
 * fauxqs refuses a request body over 11 MiB (its HTTP server's limit; S3 takes 5 GiB in one
 * PutObject, R2 about as much). The gateway stores a larger object PUT through fauxqs's
 * multipart upload API instead (parts of PART_BYTES), after its preconditions, and answers it
 * as a PutObject: the client still sends one PutObject.
 *
 * `conflict` lets a test answer chosen conditional PUTs with 409 ConditionalRequestConflict,
 * as S3 does for writes that race each other, to exercise the adapter's retry.
 */
export interface ConditionalGateway {
  endpoint: string;
  /** Headers of every PUT seen, in order. */
  readonly puts: IncomingHttpHeaders[];
  conflict: ((key: string, headers: IncomingHttpHeaders) => boolean) | undefined;
  close(): Promise<void>;
}

/** Past this many bytes, a PUT goes to fauxqs as a multipart upload of parts this large (S3's minimum is 5 MiB). */
const PART_BYTES = 8 * 1024 * 1024;

export interface GatewayOptions {
  /**
   * The gateway is the only writer of the buckets it serves since they were created empty (the
   * test run's global setup, the benches' own fauxqs). It then keeps each bucket's keys, sizes
   * and etags from the writes it forwards (./s3-key-index.ts) and answers ListObjectsV2 from
   * them: a page costs its own keys, where fauxqs filters and sorts the whole bucket for each
   * of its pages and a listing of a prefix takes all of them. Without it (a gateway in front of
   * another one, which other writers share), listings go to the upstream.
   */
  keyIndex?: boolean;
}

export async function startConditionalGateway(
  upstream: string,
  options: GatewayOptions = {},
): Promise<ConditionalGateway> {
  const target = new URL(upstream);
  const locks = new Map<string, Promise<void>>();
  const puts: IncomingHttpHeaders[] = [];
  const indexes = new Map<string, KeyIndex>();
  /** The bucket's index, made empty when the gateway first finds the bucket (none for a missing one). */
  async function indexOf(bucket: string): Promise<KeyIndex | undefined> {
    if (!options.keyIndex || bucket === '' || indexes.has(bucket)) return indexes.get(bucket);
    const found = await forward('HEAD', `/${bucket}`, {}, Buffer.alloc(0));
    if (found.status === 200 && !indexes.has(bucket)) indexes.set(bucket, new KeyIndex());
    return indexes.get(bucket);
  }

  const gateway: ConditionalGateway = { endpoint: '', puts, conflict: undefined, close: async () => {} };

  const server = createServer((incoming, outgoing) => {
    void handle(incoming, outgoing).catch((error: unknown) => {
      outgoing.statusCode = 502;
      outgoing.end(String(error));
    });
  });

  async function handle(incoming: IncomingMessage, outgoing: ServerResponse): Promise<void> {
    const body = await readAll(incoming);
    const method = incoming.method ?? 'GET';
    const url = new URL(incoming.url ?? '/', 'http://gateway');
    // The path as sent (URL would resolve "." and ".." segments, which are a key's own).
    const path = (incoming.url ?? '/').split('?')[0]!;
    const bucket = path.split('/')[1] ?? '';
    const key = path.length > bucket.length + 2 ? decodeURIComponent(path.slice(bucket.length + 2)) : undefined;
    const index = await indexOf(bucket);
    const has = (...names: string[]) => names.some((name) => url.searchParams.has(name));
    if (method === 'PUT') puts.push({ ...incoming.headers });
    if (method === 'GET' && key === undefined && url.searchParams.get('list-type') === '2') {
      return reply(outgoing, index ? listFromIndex(index, url) : await listInByteOrder(url, incoming.headers));
    }
    const passThrough =
      method === 'GET' ||
      method === 'HEAD' ||
      // Parts of a multipart upload, its creation and its abort list nothing.
      (method === 'PUT' && has('uploadId') && has('partNumber')) ||
      (method === 'POST' && has('uploads')) ||
      (method === 'DELETE' && has('uploadId'));
    if (passThrough) return reply(outgoing, await forward(method, incoming.url ?? '/', incoming.headers, body));
    if (key === undefined) {
      if (method === 'POST' && has('delete'))
        return reply(outgoing, await deleteObjects(index, bucket, incoming, body));
      if (method === 'POST' && index) {
        // A browser form upload (PostObject) names its key in the form: not parsed, so refused.
        return reply(outgoing, s3Error(501, 'NotImplemented', 'The gateway with a key index takes no PostObject.'));
      }
      const answer = await forward(method, incoming.url ?? '/', incoming.headers, body);
      // A bucket deleted was empty; found again, it is.
      if (method === 'DELETE' && answer.status < 300) indexes.delete(bucket);
      return reply(outgoing, answer);
    }
    const isObjectPut = method === 'PUT' && !has('uploadId', 'partNumber', 'renameObject', 'tagging', 'acl');
    const conditional = ['if-none-match', 'if-match'].some((name) => header(incoming.headers, name) !== undefined);
    if (isObjectPut && conditional && gateway.conflict?.(decodeURIComponent(path), incoming.headers)) {
      return reply(outgoing, s3Error(409, 'ConditionalRequestConflict', 'A conflicting operation occurred.'));
    }
    // Every write holds its key's lock, so that the preconditions hold atomically and the index
    // follows the writes of a key in the order they landed.
    await withLock(`${bucket}/${key}`, async () => {
      if (!isObjectPut) {
        const answer = await forward(method, incoming.url ?? '/', incoming.headers, body);
        if (method === 'DELETE' && answer.status < 300) index?.delete(key);
        // Anything else (a completed multipart upload, tags): the key as the upstream has it now. (A
        // RenameObject would change its source too, but fauxqs does those only in directory buckets.)
        else if (index) await refresh(index, bucket, key, path);
        return reply(outgoing, answer);
      }
      const refused = await preconditionFailure(path, incoming.headers);
      if (refused) return reply(outgoing, refused);
      const answer = await putObject(path, incoming.url ?? '/', incoming.headers, body);
      if (answer.status === 200 && index) {
        const fromBody =
          header(incoming.headers, 'x-amz-copy-source') === undefined &&
          header(incoming.headers, 'x-amz-decoded-content-length') === undefined;
        if (!fromBody) await refresh(index, bucket, key, path);
        else {
          const etag = header(answer.headers, 'etag') ?? '';
          index.set({ key, size: body.length, etag, lastModified: new Date() });
        }
      }
      reply(outgoing, answer);
    });
  }

  /** What S3 answers a conditional PUT whose precondition does not hold; undefined when they all hold. */
  async function preconditionFailure(path: string, headers: IncomingHttpHeaders): Promise<Forwarded | undefined> {
    const ifNoneMatch = header(headers, 'if-none-match');
    const ifMatch = header(headers, 'if-match');
    if (ifNoneMatch === undefined && ifMatch === undefined) return undefined;
    const current = await forward('HEAD', path, withoutBody(headers), Buffer.alloc(0));
    const exists = current.status === 200;
    const failed = s3Error(412, 'PreconditionFailed', 'At least one of the pre-conditions you specified did not hold');
    if (ifNoneMatch === '*' && exists) return failed;
    if (ifMatch !== undefined && !exists) return s3Error(404, 'NoSuchKey', 'The specified key does not exist.');
    if (ifMatch !== undefined && header(current.headers, 'etag') !== ifMatch) return failed;
    return undefined;
  }

  /** A DeleteObjects, its keys locked; the index then drops them, or learns again those that failed. */
  async function deleteObjects(
    index: KeyIndex | undefined,
    bucket: string,
    incoming: IncomingMessage,
    body: Buffer,
  ): Promise<Forwarded> {
    const keys = [...body.toString('utf8').matchAll(/<Key>([\s\S]*?)<\/Key>/g)].map((match) => unescapeXml(match[1]!));
    return withLocks(
      keys.map((key) => `${bucket}/${key}`),
      async () => {
        const answer = await forward('POST', incoming.url ?? '/', incoming.headers, body);
        if (!index) return answer;
        const xml = answer.body.toString('utf8');
        const failed = new Set(
          answer.status !== 200
            ? keys
            : [...xml.matchAll(/<Error>[\s\S]*?<Key>([\s\S]*?)<\/Key>/g)].map((match) => unescapeXml(match[1]!)),
        );
        for (const key of keys) {
          if (failed.has(key)) await refresh(index, bucket, key, `/${bucket}/${encodeKey(key)}`);
          else index.delete(key);
        }
        return answer;
      },
    );
  }

  /** Sets `key`'s entry in the index from a HEAD of it upstream (or removes it). */
  async function refresh(index: KeyIndex, bucket: string, key: string, path: string): Promise<void> {
    const current = await forward('HEAD', path, {}, Buffer.alloc(0));
    if (current.status === 404) return index.delete(key);
    if (current.status !== 200) throw new Error(`gateway: HEAD ${bucket}/${key} answered ${current.status}`);
    index.set({
      key,
      size: Number(header(current.headers, 'content-length') ?? 0),
      etag: header(current.headers, 'etag') ?? '',
      lastModified: new Date(header(current.headers, 'last-modified') ?? Date.now()),
    });
  }

  function listFromIndex(index: KeyIndex, url: URL): Forwarded {
    const parameters = url.searchParams;
    const maxKeys = maxKeysOf(parameters);
    const page = index.list({
      prefix: parameters.get('prefix') ?? '',
      delimiter: parameters.get('delimiter'),
      maxKeys,
      startAfter: parameters.get('start-after'),
      continuationToken: parameters.get('continuation-token'),
    });
    const contents = page.objects.map(
      (object) =>
        `<Contents><Key>${escapeXml(object.key)}</Key><LastModified>${object.lastModified.toISOString()}` +
        `</LastModified><ETag>${escapeXml(object.etag)}</ETag><Size>${object.size}</Size>` +
        '<StorageClass>STANDARD</StorageClass></Contents>',
    );
    const prefixes = page.prefixes.map(
      (prefix) => `<CommonPrefixes><Prefix>${escapeXml(prefix)}</Prefix></CommonPrefixes>`,
    );
    const echoed = ['delimiter', 'start-after', 'continuation-token'].flatMap((name) => {
      const value = parameters.get(name);
      const element = name.replace(/(^|-)(\w)/g, (_, _dash, letter: string) => letter.toUpperCase());
      return value === null ? [] : [`<${element}>${escapeXml(value)}</${element}>`];
    });
    return xmlAnswer(
      [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">',
        `<Name>${escapeXml(url.pathname.split('/')[1] ?? '')}</Name>`,
        `<Prefix>${escapeXml(parameters.get('prefix') ?? '')}</Prefix>`,
        ...echoed,
        `<KeyCount>${contents.length + prefixes.length}</KeyCount><MaxKeys>${maxKeys}</MaxKeys>`,
        `<IsTruncated>${page.truncated}</IsTruncated>`,
        page.next === undefined ? '' : `<NextContinuationToken>${page.next}</NextContinuationToken>`,
        ...contents,
        ...prefixes,
        '</ListBucketResult>',
      ].join(''),
    );
  }

  /** A PutObject of `body` to `path`, as one PUT or, past fauxqs's body limit, a multipart upload. */
  async function putObject(path: string, url: string, headers: IncomingHttpHeaders, body: Buffer): Promise<Forwarded> {
    if (body.length <= PART_BYTES) return forward('PUT', url, headers, body);
    // The object's headers (content type, metadata) go with the upload's creation.
    const objectHeaders = Object.fromEntries(
      Object.entries(headers).filter(([name]) => name === 'content-type' || name.startsWith('x-amz-meta-')),
    );
    const created = await forward('POST', `${path}?uploads`, objectHeaders, Buffer.alloc(0));
    if (created.status !== 200) return created;
    const uploadId = unescapeXml(/<UploadId>([^<]*)<\/UploadId>/.exec(created.body.toString())?.[1] ?? '');
    const parts: string[] = [];
    for (let offset = 0; offset < body.length; offset += PART_BYTES) {
      const number = parts.length + 1;
      const part = body.subarray(offset, offset + PART_BYTES);
      const query = `partNumber=${number}&uploadId=${encodeURIComponent(uploadId)}`;
      const uploaded = await forward('PUT', `${path}?${query}`, { 'content-length': String(part.length) }, part);
      if (uploaded.status !== 200) return uploaded;
      parts.push(`<Part><PartNumber>${number}</PartNumber><ETag>${header(uploaded.headers, 'etag')}</ETag></Part>`);
    }
    const list = Buffer.from(`<CompleteMultipartUpload>${parts.join('')}</CompleteMultipartUpload>`);
    const query = `uploadId=${encodeURIComponent(uploadId)}`;
    const xml = { 'content-type': 'application/xml', 'content-length': String(list.length) };
    const completed = await forward('POST', `${path}?${query}`, xml, list);
    if (completed.status !== 200) return completed;
    const etag = unescapeXml(/<ETag>([^<]*)<\/ETag>/.exec(completed.body.toString())?.[1] ?? '');
    return { status: 200, headers: { etag, 'content-length': '0' }, body: Buffer.alloc(0) };
  }

  async function withLock<T>(key: string, work: () => Promise<T>): Promise<T> {
    const previous = locks.get(key) ?? Promise.resolve();
    const current = previous.then(work, work);
    const settled = current.then(
      () => {},
      () => {},
    );
    locks.set(key, settled);
    try {
      return await current;
    } finally {
      if (locks.get(key) === settled) locks.delete(key);
    }
  }

  /** `work` holding the locks of all `keys`, taken in one order so that no two writes wait on each other. */
  function withLocks<T>(keys: string[], work: () => Promise<T>): Promise<T> {
    const [first, ...rest] = [...new Set(keys)].sort();
    return first === undefined ? work() : withLock(first, () => withLocks(rest, work));
  }

  async function listInByteOrder(url: URL, headers: IncomingHttpHeaders): Promise<Forwarded> {
    const prefix = url.searchParams.get('prefix') ?? '';
    // Every upstream page of the prefix, sorted here. fauxqs orders a page by localeCompare but
    // pages on from its last key by code units, so paging is sound only where the two orders
    // agree (as for the service's own keys past 1,000 under one prefix); a page out of code-unit
    // order is refused rather than merged with gaps.
    const entries: { key: string; bytes: Buffer; xml: string }[] = [];
    for (let startAfter: string | undefined; ; ) {
      const upstreamPath =
        `${url.pathname}?list-type=2&max-keys=1000&prefix=${encodeURIComponent(prefix)}` +
        (startAfter === undefined ? '' : `&start-after=${encodeURIComponent(startAfter)}`);
      const upstreamList = await forward('GET', upstreamPath, headers, Buffer.alloc(0));
      if (upstreamList.status !== 200) return upstreamList;
      const xml = upstreamList.body.toString('utf8');
      const page = [...xml.matchAll(/<Contents>[\s\S]*?<\/Contents>/g)].map((match) => {
        const key = unescapeXml(/<Key>([\s\S]*?)<\/Key>/.exec(match[0])![1]!);
        return { key, bytes: Buffer.from(key, 'utf8'), xml: match[0] };
      });
      const truncated = xml.includes('<IsTruncated>true</IsTruncated>');
      if (truncated || startAfter !== undefined)
        for (const [index, entry] of page.entries()) {
          const previous = index === 0 ? startAfter : page[index - 1]!.key;
          if (previous !== undefined && !(previous < entry.key))
            throw new Error(`gateway: keys under ${prefix} sort differently by locale and by code unit: cannot page`);
        }
      entries.push(...page);
      if (!truncated || page.length === 0) break;
      startAfter = page.at(-1)!.key;
    }
    entries.sort((left, right) => Buffer.compare(left.bytes, right.bytes));
    const token = url.searchParams.get('continuation-token');
    const after = token === null ? url.searchParams.get('start-after') : Buffer.from(token, 'base64').toString('utf8');
    const afterBytes = after === null ? undefined : Buffer.from(after, 'utf8');
    const maxKeys = maxKeysOf(url.searchParams);
    // With a delimiter (as S3 does): keys holding it after the prefix are rolled up into one
    // CommonPrefixes entry each, which counts once against max-keys.
    const delimiter = url.searchParams.get('delimiter');
    // A token past a group skips the group's keys that sort after it (as S3's opaque tokens do).
    const listed = token === null ? undefined : cursorGroup(after ?? undefined, prefix, delimiter ?? undefined);
    const remaining = (
      afterBytes ? entries.filter((entry) => Buffer.compare(entry.bytes, afterBytes) > 0) : entries
    ).filter((entry) => listed === undefined || !entry.key.startsWith(listed));
    const rows: { key: string; xml: string }[] = [];
    for (const entry of remaining) {
      const at = delimiter ? entry.key.indexOf(delimiter, prefix.length) : -1;
      if (at < 0) rows.push(entry);
      else {
        const group = entry.key.slice(0, at + delimiter!.length);
        if (rows.at(-1)?.key !== group)
          rows.push({ key: group, xml: `<CommonPrefixes><Prefix>${escapeXml(group)}</Prefix></CommonPrefixes>` });
      }
    }
    const page = rows.slice(0, maxKeys);
    const truncated = rows.length > page.length;
    return xmlAnswer(
      [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">',
        `<Name>${url.pathname.split('/').filter(Boolean)[0]}</Name><Prefix>${escapeXml(prefix)}</Prefix>`,
        `<KeyCount>${page.length}</KeyCount><MaxKeys>${maxKeys}</MaxKeys><IsTruncated>${truncated}</IsTruncated>`,
        truncated
          ? `<NextContinuationToken>${Buffer.from(nextAfter(page.at(-1)!.key, delimiter), 'utf8').toString('base64')}` +
            '</NextContinuationToken>'
          : '',
        ...page.map((entry) => entry.xml),
        '</ListBucketResult>',
      ].join(''),
    );
  }

  function forward(method: string, path: string, headers: IncomingHttpHeaders, body: Buffer): Promise<Forwarded> {
    return new Promise((resolve, reject) => {
      const outgoingHeaders = { ...headers, host: target.host };
      const upstreamRequest = httpRequest(
        { host: target.hostname, port: target.port, method, path, headers: outgoingHeaders },
        (response) => {
          readAll(response).then(
            (responseBody) =>
              resolve({ status: response.statusCode ?? 502, headers: response.headers, body: responseBody }),
            reject,
          );
        },
      );
      upstreamRequest.on('error', reject);
      upstreamRequest.end(body);
    });
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  gateway.endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  gateway.close = () => new Promise((resolve) => server.close(() => resolve()));
  return gateway;
}

/** Where the next page starts: after the last key, or after every key under the last group. */
function nextAfter(last: string, delimiter: string | null): string {
  return delimiter !== null && last.endsWith(delimiter) ? `${last}${GROUP_END}` : last;
}

interface Forwarded {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

function reply(outgoing: ServerResponse, response: Forwarded): void {
  outgoing.statusCode = response.status;
  for (const [name, value] of Object.entries(response.headers)) {
    if (value !== undefined && name !== 'connection' && name !== 'transfer-encoding') outgoing.setHeader(name, value);
  }
  outgoing.end(response.body);
}

/** ListObjectsV2's `max-keys`: 1,000 unless given, and at most that. */
function maxKeysOf(parameters: URLSearchParams): number {
  const given = Number.parseInt(parameters.get('max-keys') ?? '', 10);
  return Number.isNaN(given) ? 1000 : Math.min(given, 1000);
}

function xmlAnswer(xml: string): Forwarded {
  const body = Buffer.from(xml);
  return { status: 200, headers: { 'content-type': 'application/xml', 'content-length': String(body.length) }, body };
}

/** A key as a path: each segment percent-encoded, as the AWS SDK sends it. */
function encodeKey(key: string): string {
  return key.split('/').map(encodeURIComponent).join('/');
}

function s3Error(status: number, code: string, message: string): Forwarded {
  const body = Buffer.from(
    `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message></Error>`,
  );
  return { status, headers: { 'content-type': 'application/xml', 'content-length': String(body.length) }, body };
}

function escapeXml(text: string): string {
  return text
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;')
    .replaceAll("'", '&apos;');
}

function unescapeXml(text: string): string {
  return text
    .replaceAll('&lt;', '<')
    .replaceAll('&gt;', '>')
    .replaceAll('&quot;', '"')
    .replaceAll('&apos;', "'")
    .replaceAll('&amp;', '&');
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function withoutBody(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const {
    'content-length': _length,
    'content-type': _type,
    'if-none-match': _none,
    'if-match': _match,
    ...rest
  } = headers;
  return rest;
}

async function readAll(stream: AsyncIterable<Buffer | string>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks);
}

/** An S3Store for tests, against the given endpoint (fauxqs, or a gateway in front of it). */
export function createTestS3Store(endpoint: string, bucket: string): S3Store {
  return new S3Store({
    bucket,
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
}
