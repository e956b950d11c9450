import { lowerBound } from '../../lib/sorted.ts';

/** What a listing shows of an object. */
export interface IndexedObject {
  key: string;
  size: number;
  etag: string;
  lastModified: Date;
}

export interface IndexPage {
  objects: IndexedObject[];
  /** With a delimiter: the groups of keys holding it after the prefix, each once. */
  prefixes: string[];
  truncated: boolean;
  /** When truncated: where the next page starts (a ListObjectsV2 continuation token). */
  next?: string;
}

export interface IndexListing {
  prefix: string;
  delimiter?: string | null | undefined;
  maxKeys: number;
  /** List only keys after this one (ListObjectsV2 `start-after`)... */
  startAfter?: string | null | undefined;
  /** ... or from where the page that returned this token ended (it wins over `startAfter`). */
  continuationToken?: string | null | undefined;
}

/**
 * The keys of one bucket in S3's listing order (UTF-8 byte order), with what a listing shows of
 * each, kept by the conditional gateway of ./s3-store.ts from the writes it forwards. A page
 * costs a binary search and its own keys, whatever the prefix holds; a group under a delimiter
 * is stepped over with one search. Pages resume from a position, not a count: keys put or
 * deleted between two pages show (or are gone) if they sort after where the last page ended,
 * as on S3.
 *
 * Keys are held as the Latin-1 string of their UTF-8 bytes, whose code-unit order (JavaScript's
 * `<`) is the byte order (the key's own UTF-16 order differs past U+FFFF).
 */
export class KeyIndex {
  readonly #sorted: string[] = [];
  readonly #objects = new Map<string, IndexedObject>();

  set(object: IndexedObject): void {
    const bytes = bytesOf(object.key);
    if (!this.#objects.has(bytes)) this.#sorted.splice(lowerBound(this.#sorted, bytes), 0, bytes);
    this.#objects.set(bytes, object);
  }

  delete(key: string): void {
    const bytes = bytesOf(key);
    if (this.#objects.delete(bytes)) this.#sorted.splice(lowerBound(this.#sorted, bytes), 1);
  }

  list(listing: IndexListing): IndexPage {
    const prefix = bytesOf(listing.prefix);
    const delimiter = listing.delimiter ? bytesOf(listing.delimiter) : undefined;
    // Keys from `from` on (inclusive): the token is that position, start-after the key's successor.
    const { continuationToken: token, startAfter } = listing;
    const from =
      token !== null && token !== undefined
        ? Buffer.from(token, 'base64').toString('latin1')
        : startAfter
          ? `${bytesOf(startAfter)}\0`
          : '';
    const page: IndexPage = { objects: [], prefixes: [], truncated: false };
    if (listing.maxKeys <= 0) return page;
    // From the prefix's first key, or from the start position if later (strings: not Math.max).
    let index = lowerBound(this.#sorted, prefix);
    if (from > prefix) index = lowerBound(this.#sorted, from);
    let resume = '';
    for (let count = 0; count < listing.maxKeys; count++) {
      const bytes = this.#sorted[index];
      if (bytes === undefined || !bytes.startsWith(prefix)) return page;
      const at = delimiter === undefined ? -1 : bytes.indexOf(delimiter, prefix.length);
      if (at < 0) {
        page.objects.push(this.#objects.get(bytes)!);
        resume = `${bytes}\0`;
        index += 1;
      } else {
        const group = bytes.slice(0, at + delimiter!.length);
        page.prefixes.push(textOf(group));
        // Just past every key that starts with the group: its last byte, one more (a UTF-8
        // delimiter never ends in 0xFF).
        resume = group.slice(0, -1) + String.fromCharCode(group.charCodeAt(group.length - 1) + 1);
        index = lowerBound(this.#sorted, resume);
      }
    }
    if (this.#sorted[index]?.startsWith(prefix)) {
      page.truncated = true;
      page.next = Buffer.from(resume, 'latin1').toString('base64');
    }
    return page;
  }
}

function bytesOf(text: string): string {
  return Buffer.from(text, 'utf8').toString('latin1');
}

function textOf(bytes: string): string {
  return Buffer.from(bytes, 'latin1').toString('utf8');
}
