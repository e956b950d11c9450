/**
 * The one form of an etag above lib/store/. S3-compatible services write an object's ETag in
 * several forms, and not always the same one in a listing as in a put's or get's answer: with or
 * without the surrounding double quotes, sometimes with a `W/` weak marker, hex digits in either
 * case. Every store answers its etags in the canonical form ({@link canonicalEtag}), so callers
 * compare them as plain strings (the record cache takes a record on a listing's etag); a store
 * takes an `ifMatch` in any form and sends the service the form it answers with
 * ({@link ServiceEtags}).
 */

/** An MD5 (or a multipart `<md5>-<parts>`) or other hex etag: its case carries nothing. */
const HEX = /^[0-9a-f]+(?:-[0-9]+)?$/i;

/**
 * The canonical form of an etag as a service wrote it: without a `W/` marker, surrounding
 * whitespace or double quotes, its hex digits lower case (an etag that is not hex keeps its
 * case). Idempotent; an absent or empty etag is '' (some services list none).
 *
 * @example canonicalEtag('W/"9A0364B9E99BB480DD25E1F0284C8555"') // '9a0364b9e99bb480dd25e1f0284c8555'
 */
export function canonicalEtag(raw: string | undefined): string {
  if (!raw) return '';
  let etag = raw.trim();
  if (etag.startsWith('W/')) etag = etag.slice(2);
  if (etag.length >= 2 && etag.startsWith('"') && etag.endsWith('"')) etag = etag.slice(1, -1);
  return HEX.test(etag) ? etag.toLowerCase() : etag;
}

/**
 * A service's etags, per store: reads each etag of an answer into the canonical form, and writes
 * an `If-Match` the way the service's own answers to puts, gets and heads wrote their last etag
 * (quoted or not, hex in its case): the form its condition is compared with. A listing's form
 * teaches nothing (some services list another one). Until an answer showed one, the quoted,
 * lower-case form of HTTP and AWS S3.
 */
export class ServiceEtags {
  #quoted = true;
  #upper = false;
  /** Whether an answer showed the service's form yet. */
  #shown = false;

  /** The canonical form of an etag a put, get or head answered with; learns the service's form. */
  answered(raw: string | undefined): string {
    const etag = canonicalEtag(raw);
    if (etag === '') return etag;
    const plain = raw!.trim().replace(/^W\//, '');
    this.#quoted = plain.startsWith('"');
    this.#upper = HEX.test(etag) && plain !== plain.toLowerCase();
    this.#shown = true;
    return etag;
  }

  /** The canonical form of an etag a listing gave. */
  listed(raw: string | undefined): string {
    return canonicalEtag(raw);
  }

  /**
   * The If-Match to send again a put if-match on `etag` with, refused (412) when sent as `sent`, if
   * `sent` may not have been in the service's form; else null, the refusal standing. Before
   * any answer showed the form (a store's first request, or one after listings only), `head`
   * (the store's, which shows it) must find the key holding `etag`; an answer that showed another
   * form since the put was sent is enough.
   */
  async resent(etag: string, sent: string, head: () => Promise<{ etag: string } | null>): Promise<string | null> {
    if (!this.#shown && (await head())?.etag !== canonicalEtag(etag)) return null;
    const condition = this.condition(etag);
    return condition === sent ? null : condition;
  }

  /** `etag` (any form) as the service's If-Match compares it. */
  condition(etag: string): string {
    const canonical = canonicalEtag(etag);
    const cased = this.#upper && HEX.test(canonical) ? canonical.toUpperCase() : canonical;
    return this.#quoted ? `"${cased}"` : cased;
  }
}
