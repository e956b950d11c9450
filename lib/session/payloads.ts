import { CorruptObjectError } from '../errors.ts';
import { md5Hex, sha256Hex } from '../hash.ts';
import { PREVIEW_CHARS, type PayloadRef, type PromptItem } from '../items.ts';
import { decodeUtf8, toBytes, type ObjectStore } from '../store/object-store.ts';

/**
 * Out-of-line payloads: a function_call_output whose output is larger than the threshold
 * (UTF-8 bytes) is stored once under `blob/<sha256>`, and the record keeps a preview
 * (`output_ref`: length, hashes, head, tail) from which strategies can compact it unread.
 */

/** The preview of `text` kept in a record in place of the text. */
export function payloadRef(text: string): PayloadRef {
  return {
    sha256: sha256Hex(text),
    md5: md5Hex(text),
    length: text.length,
    head: text.slice(0, PREVIEW_CHARS),
    tail: text.length > PREVIEW_CHARS ? text.slice(-PREVIEW_CHARS) : text,
  };
}

/**
 * Moves large outputs of `items` out of line: writes each blob create-only (a taken key holds
 * the same bytes: the key is their hash) and returns the items with `output_ref` in place of
 * the output. `blobKeyOf` maps a SHA-256 to its key. `lines`: each item's JSON line where the
 * caller has it (UTF-8): an output takes no more bytes than the JSON of the item holding it.
 */
export async function externalizePayloads<Item extends PromptItem>(
  store: ObjectStore,
  items: readonly Item[],
  threshold: number,
  blobKeyOf: (sha256: string) => string,
  written: Set<string> = new Set(),
  lines?: readonly (Uint8Array | undefined)[],
): Promise<Item[]> {
  const result: Item[] = [];
  const puts: Promise<unknown>[] = [];
  for (let index = 0; index < items.length; index++) {
    const item = items[index]!;
    if (
      item.type !== 'function_call_output' ||
      item.output_ref ||
      typeof item.output !== 'string' ||
      // At most 3 UTF-8 bytes a UTF-16 unit: a short output is not encoded to be measured.
      item.output.length * 3 <= threshold ||
      (lines?.[index]?.length ?? Infinity) <= threshold ||
      toBytes(item.output).length <= threshold
    ) {
      result.push(item);
      continue;
    }
    const ref = payloadRef(item.output);
    const key = blobKeyOf(ref.sha256);
    if (!written.has(key)) {
      written.add(key);
      puts.push(store.put(key, item.output, { onlyIfAbsent: true, contentType: 'text/plain; charset=utf-8' }));
    }
    result.push({ ...item, output: '', output_ref: ref });
  }
  await Promise.all(puts);
  return result;
}

/** Reads a blob back and checks it against its hash (a mismatch is a CorruptObjectError). */
export async function readPayload(store: ObjectStore, key: string, ref: PayloadRef): Promise<string> {
  const object = await store.get(key);
  if (!object) throw new CorruptObjectError(key, 'referenced payload is missing');
  let text: string;
  try {
    text = decodeUtf8(object.body);
  } catch {
    throw new CorruptObjectError(key, 'payload is not UTF-8');
  }
  if (sha256Hex(text) !== ref.sha256) throw new CorruptObjectError(key, 'payload does not match its SHA-256');
  return text;
}
