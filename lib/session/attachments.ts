import { type Content, type ContentPart, mediaParts } from '../content.ts';
import { CorruptObjectError, InvalidRequestError, PayloadTooLargeError } from '../errors.ts';
import { sha256Hex } from '../hash.ts';
import type { Item, PromptItem } from '../items.ts';
import {
  decodeBase64,
  encodeBase64,
  FILE_MEDIA_TYPES,
  IMAGE_MEDIA_TYPES,
  imageSize,
  isWholeImage,
  parseDataUrl,
  sniffMediaType as sniff,
} from '../media.ts';
import { mapLimit, type ObjectStore } from '../store/object-store.ts';

/**
 * Images and files in items (lib/content.ts): a `data:` URL or `file_data` is checked (size,
 * media type read from the bytes) and stored once as a content-addressed blob, the same
 * `blob/<generation>/<sha256>` objects that hold large outputs (lib/session/payloads.ts); the
 * item keeps a reference. https URLs stay as given and are never fetched.
 */

export interface AttachmentLimits {
  maxImageBytes: number;
  maxFileBytes: number;
  /**
   * An import's: an image is restored as its export holds it, whole or not (one cut short was
   * stored before images were checked whole; a request sending it is refused).
   */
  restoring?: boolean;
}

interface Decoded {
  bytes: Uint8Array;
  mediaType: string;
}

/**
 * `url` with its scheme in lower case when it is an https:// URL (in any case) that parses, else
 * undefined: a model call turns it into a `URL` (lib/models/media-parts.ts), so one that does not
 * parse would fail every later turn.
 */
function httpsUrl(url: string | undefined): string | undefined {
  if (!/^https:\/\//i.test(url ?? '')) return undefined;
  const lowered = `https${url!.slice(5)}`;
  try {
    return new URL(lowered).protocol === 'https:' ? lowered : undefined;
  } catch {
    return undefined;
  }
}

const isDataUrl = (url: string) => /^data:/i.test(url);

/** What a stored image or file part holds in place of its payload. */
const REFERENCE_KEYS = new Set(['blob', 'media_type', 'bytes', 'width', 'height']);

/**
 * A JSON.stringify replacer that measures an item as MAX_ITEM_BYTES counts it: its image and
 * file parts without their payloads (a `data:` image_url, file_data) or the references stored in
 * their place, so an item measures the same sent, stored and exported: an import of an export
 * takes every item that was accepted.
 */
export function withoutMedia(this: unknown, key: string, value: unknown): unknown {
  const type = (this as { type?: unknown }).type;
  if (type !== 'input_image' && type !== 'input_file') return value;
  if (key === 'file_data' || REFERENCE_KEYS.has(key)) return undefined;
  return key === 'image_url' && typeof value === 'string' && isDataUrl(value) ? undefined : value;
}

/**
 * Whether any item holds a part to check: a payload to store (a `data:` image, `file_data`), a
 * blob reference, which only the service writes, or anything but a valid https:// URL (refused:
 * a `javascript:` link would be stored and shown as one; `HTTPS://` is stored as `https://`).
 */
export function hasInlineMedia(items: readonly Item[]): boolean {
  return items.some((item) =>
    mediaParts(contentOf(item)).some((part) => {
      if (part.blob !== undefined || part.media_type !== undefined || part.bytes !== undefined) return true;
      const url = part.type === 'input_image' ? part.image_url : part.file_data === undefined ? part.file_url : '';
      return httpsUrl(url) !== url;
    }),
  );
}

/**
 * Checks every image and file part of `items` (throws a 4xx naming the part, before anything
 * is written), stores each payload once (create-only: a taken key holds the same bytes) and
 * returns the items with references in place of the payloads.
 */
export async function storeAttachments(
  store: ObjectStore,
  items: readonly Item[],
  limits: AttachmentLimits,
  blobKeyOf: (sha256: string) => string,
  where: (index: number) => string = (index) => `items[${index}]`,
): Promise<Item[]> {
  const checked = checkAttachments(items, limits, where);
  await checked.store(store, blobKeyOf);
  return checked.items;
}

/**
 * {@link storeAttachments} in two steps: the items checked now (throws a 4xx naming the part),
 * with references in place of the payloads, `store`, which writes the payloads later, and
 * `bytesOf`, the decoded bytes of each payload by its SHA-256 (a turn's prompt reads none back).
 */
export function checkAttachments(
  items: readonly Item[],
  limits: AttachmentLimits,
  where: (index: number) => string = (index) => `items[${index}]`,
): {
  items: Item[];
  store: (store: ObjectStore, blobKeyOf: (sha256: string) => string) => Promise<void>;
  bytesOf: (sha256: string) => Uint8Array | undefined;
} {
  const { result, blobs } = decodeAttachments(items, limits, where);
  const store = async (to: ObjectStore, blobKeyOf: (sha256: string) => string) => {
    await Promise.all(
      [...blobs].map(([sha256, blob]) =>
        to.put(blobKeyOf(sha256), blob.bytes, { onlyIfAbsent: true, contentType: blob.mediaType }),
      ),
    );
  };
  return { items: result, store, bytesOf: (sha256) => blobs.get(sha256)?.bytes };
}

/**
 * The same check for a call that stores nothing (`store: false`, chat completions): the items
 * with references in place of payloads and the decoded bytes in `data`, as a turn's prompt
 * has them once read.
 */
export function inlineAttachments(items: readonly Item[], limits: AttachmentLimits): PromptItem[] {
  const { result, blobs } = decodeAttachments(items, limits, (index) => `items[${index}]`);
  return blobs.size === 0 ? result : withBytes(result, (sha256) => blobs.get(sha256)?.bytes);
}

/**
 * Which referenced parts of an item a prompt sends as such, so whose blobs are read: none
 * (false), all (true), or those the predicate it answers names (the others go as their description).
 */
export type NeedsBytes = (
  item: PromptItem,
) => boolean | ((part: Exclude<ContentPart, { type: 'input_text' }>) => boolean);

/** The items with each referenced part's bytes in `data` (the parts `needsBytes` names). */
function withBytes(
  items: PromptItem[],
  bytesOf: (sha256: string) => Uint8Array | undefined,
  needsBytes: NeedsBytes = () => true,
): PromptItem[] {
  return items.map((item) => {
    const needs = needsBytes(item);
    if (!needs) return item;
    return mapParts(item, (part) =>
      part.type !== 'input_text' && part.blob && (needs === true || needs(part))
        ? { ...part, data: bytesOf(part.blob) }
        : part,
    );
  });
}

/** The item with each part of its content (or output) mapped by `map`. */
function mapParts<Each extends Item | PromptItem>(
  item: Each,
  map: (part: ContentPart, at: number) => ContentPart,
): Each {
  if (item.type === 'message' && typeof item.content !== 'string') return { ...item, content: item.content.map(map) };
  if (item.type === 'function_call_output' && typeof item.output !== 'string')
    return { ...item, output: item.output.map(map) };
  return item;
}

function decodeAttachments(items: readonly Item[], limits: AttachmentLimits, where: (index: number) => string) {
  const blobs = new Map<string, Decoded>();
  const result = items.map((item, index) => {
    const field = item.type === 'message' ? 'content' : 'output';
    return mapParts(item, (part, at) => storedPart(part, `${where(index)}.${field}[${at}]`, limits, blobs));
  });
  return { result, blobs };
}

/** A refused part's details: its name as the message writes it, and as every check's `field`, dotted. */
function named(name: string): { part: string; field: string } {
  return { part: name, field: name.replaceAll(/\[(\d+)\]/g, '.$1') };
}

function storedPart(part: ContentPart, name: string, limits: AttachmentLimits, blobs: Map<string, Decoded>) {
  if (part.type === 'input_text') return part;
  if (part.blob !== undefined || part.media_type !== undefined || part.bytes !== undefined)
    throw new InvalidRequestError(
      `${name}: blob, media_type and bytes are written by the service; send the image or file itself`,
      named(name),
    );
  if (part.type === 'input_image') {
    const url = part.image_url ?? '';
    const https = httpsUrl(url);
    if (https) return https === url ? part : { ...part, image_url: https };
    if (!isDataUrl(url))
      throw new InvalidRequestError(`${name}: image_url must be an https:// or data: URL`, named(name));
    const decoded = parseDataUrl(url);
    if (!decoded) throw new InvalidRequestError(`${name}: image_url is not a base64 data: URL`, named(name));
    const { image_url: _url, ...rest } = part;
    return {
      ...rest,
      ...blobRef(
        decoded.bytes,
        decoded.mediaType,
        name,
        IMAGE_MEDIA_TYPES,
        { bytes: limits.maxImageBytes, setting: 'MAX_IMAGE_BYTES' },
        blobs,
        !limits.restoring,
      ),
    };
  }
  if (part.file_url !== undefined) {
    const https = httpsUrl(part.file_url);
    if (https) return https === part.file_url ? part : { ...part, file_url: https };
    throw new InvalidRequestError(`${name}: file_url must be an https:// URL`, named(name));
  }
  if (!part.filename) throw new InvalidRequestError(`${name}: file_data needs a filename`, named(name));
  const data = part.file_data ?? '';
  const decoded = isDataUrl(data) ? parseDataUrl(data) : undefined;
  const bytes = decoded?.bytes ?? decodeBase64(data);
  if (!bytes) throw new InvalidRequestError(`${name}: file_data is not base64`, named(name));
  const { file_data: _data, ...rest } = part;
  return {
    ...rest,
    ...blobRef(
      bytes,
      decoded?.mediaType ?? '',
      name,
      FILE_MEDIA_TYPES,
      { bytes: limits.maxFileBytes, setting: 'MAX_FILE_BYTES' },
      blobs,
      true,
    ),
  };
}

function blobRef(
  bytes: Uint8Array,
  declared: string,
  name: string,
  accepted: readonly string[],
  /** The most bytes a payload may hold, and the setting that raises it (named in the 413). */
  { bytes: limit, setting }: { bytes: number; setting: 'MAX_IMAGE_BYTES' | 'MAX_FILE_BYTES' },
  blobs: Map<string, Decoded>,
  whole: boolean,
) {
  if (bytes.length > limit)
    throw new PayloadTooLargeError(
      `${name} is ${bytes.length} bytes; at most ${limit} are accepted (${setting} raises it)`,
      { ...named(name), size: bytes.length, limit },
    );
  const mediaType = sniff(bytes);
  if (!mediaType || !accepted.includes(mediaType))
    throw new InvalidRequestError(`${name}: the bytes are not one of ${accepted.join(', ')}`, {
      ...named(name),
      accepted,
    });
  // `image/jpg` and `image/pjpeg` are common names of JPEG that agree with its bytes.
  if (declared && declared !== mediaType && !(mediaType === 'image/jpeg' && /^image\/p?jpe?g$/.test(declared)))
    throw new InvalidRequestError(`${name}: declared ${declared} but the bytes are ${mediaType}`, named(name));
  if (whole && !isWholeImage(bytes, mediaType))
    throw new InvalidRequestError(`${name}: the bytes are not a whole ${mediaType} (cut short?)`, named(name));
  const sha256 = sha256Hex(bytes);
  blobs.set(sha256, { bytes, mediaType });
  return { blob: sha256, media_type: mediaType, bytes: bytes.length, ...imageSize(bytes) };
}

/**
 * Reads the blob of every referenced image and file part in `items` (a prompt about to be
 * sent) and puts its bytes in `data`, checked against its SHA-256; only the parts `needsBytes`
 * names (the others go as their description). A blob whose bytes `known` holds (a turn's own
 * input, decoded and hashed from its request) is not read.
 */
export async function hydrateMedia(
  store: ObjectStore,
  items: PromptItem[],
  blobKeyOf: (sha256: string) => string | Promise<string>,
  parallel: number,
  needsBytes: NeedsBytes = () => true,
  known: (sha256: string) => Uint8Array | undefined = () => undefined,
): Promise<PromptItem[]> {
  const wanted = new Set<string>();
  const read = new Map<string, Uint8Array>();
  for (const item of items) {
    const parts = mediaParts(contentOf(item));
    // Indexed: a loop of every item of a prompt, most without media, makes no iterator.
    const needs = parts.length === 0 ? false : needsBytes(item);
    if (!needs) continue;
    for (let index = 0; index < parts.length; index++) {
      const part = parts[index]!;
      if (!part.blob || part.data || (needs !== true && !needs(part))) continue;
      const bytes = known(part.blob);
      if (bytes) read.set(part.blob, bytes);
      else wanted.add(part.blob);
    }
  }
  if (wanted.size === 0 && read.size === 0) return items;
  await mapLimit([...wanted], parallel, async (sha256) => {
    const key = await blobKeyOf(sha256);
    const object = await store.get(key);
    if (!object) throw new CorruptObjectError(key, 'referenced blob is missing');
    if (sha256Hex(object.body) !== sha256) throw new CorruptObjectError(key, 'blob does not match its SHA-256');
    read.set(sha256, object.body);
  });
  return withBytes(items, (sha256) => read.get(sha256), needsBytes);
}

/** A message's content or an output's parts ('' for a function_call). */
export function contentOf(item: Item | PromptItem): Content {
  if (item.type === 'message') return item.content;
  if (item.type === 'function_call_output') return item.output;
  return '';
}

/**
 * Items as an export writes them: each referenced image or file read back and written as the
 * client sent it (`image_url` as a base64 data: URL, `file_data` as base64), so an import
 * stores it again under the new session's generation.
 */
export async function exportMedia(
  store: ObjectStore,
  items: PromptItem[],
  blobKeyOf: (sha256: string) => string | Promise<string>,
  parallel: number,
): Promise<PromptItem[]> {
  const read = await hydrateMedia(store, items, blobKeyOf, parallel);
  return read.map((item) => mapParts(item, asSent));
}

function asSent(part: ContentPart): ContentPart {
  if (part.type === 'input_text' || !part.data) return part;
  const base64 = encodeBase64(part.data);
  if (part.type === 'input_image') {
    const detail = part.detail ? { detail: part.detail } : {};
    return { type: 'input_image', image_url: `data:${part.media_type};base64,${base64}`, ...detail };
  }
  return { type: 'input_file', ...(part.filename ? { filename: part.filename } : {}), file_data: base64 };
}
