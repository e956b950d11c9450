/**
 * Whether a JSON text is already in the canonical form of a call's arguments
 * (lib/strategies/aggregates.ts `canonicalArguments`: parsed, object keys sorted at every level,
 * stringified): then that form is the text itself, and neither a parse nor a stringify is needed.
 * Checked by one pass over the text, conservatively: true only for texts of no whitespace, whose
 * objects' keys strictly ascend (UTF-16 order, as a sort orders them), none of them an array
 * index (JSON.stringify writes those first) nor `__proto__`, nor holding an escape; whose strings
 * hold no escape but `\"`, `\\`, `\b`, `\f`, `\n`, `\r` and `\t` (as JSON.stringify writes them)
 * and no unpaired surrogate; whose numbers are integers of at most 15 digits, not `-0`; and whose
 * containers nest at most 64 deep.
 * Anything else gives false, and the caller takes the whole way.
 */
export function isCanonicalJson(text: string): boolean {
  // Per open container: its last key (an object), or null (an array); undefined: no key yet.
  const keys: (string | null | undefined)[] = [];
  let at = 0;
  for (;;) {
    // A value starts at `at`.
    const code = text.charCodeAt(at);
    if (code === OPEN_OBJECT) {
      if (text.charCodeAt(at + 1) === CLOSE_OBJECT) at += 2;
      else {
        if (keys.length === MAX_DEPTH) return false;
        keys.push(undefined);
        at = memberKey(text, at + 1, keys);
        if (at < 0) return false;
        continue;
      }
    } else if (code === OPEN_ARRAY) {
      if (text.charCodeAt(at + 1) === CLOSE_ARRAY) at += 2;
      else {
        if (keys.length === MAX_DEPTH) return false;
        keys.push(null);
        at += 1;
        continue;
      }
    } else if (code === QUOTE) {
      at = stringEnd(text, at, false);
    } else if (code === MINUS || (code >= ZERO && code <= NINE)) {
      at = numberEnd(text, at);
    } else {
      const literal = code === T ? 'true' : code === F ? 'false' : code === N ? 'null' : '';
      if (literal === '' || !text.startsWith(literal, at)) return false;
      at += literal.length;
    }
    if (at < 0) return false;
    // After a value: the containers it closes, then a comma or the end.
    for (;;) {
      if (keys.length === 0) return at === text.length;
      const key = keys[keys.length - 1];
      const code = text.charCodeAt(at);
      if (code === (key === null ? CLOSE_ARRAY : CLOSE_OBJECT)) {
        keys.pop();
        at += 1;
        continue;
      }
      if (code !== COMMA) return false;
      at = key === null ? at + 1 : memberKey(text, at + 1, keys);
      if (at < 0) return false;
      break;
    }
  }
}

const [OPEN_OBJECT, CLOSE_OBJECT, OPEN_ARRAY, CLOSE_ARRAY] = [0x7b, 0x7d, 0x5b, 0x5d];
const [QUOTE, BACKSLASH, COMMA, COLON, MINUS, ZERO, ONE, NINE] = [0x22, 0x5c, 0x2c, 0x3a, 0x2d, 0x30, 0x31, 0x39];
const [T, F, N] = [0x74, 0x66, 0x6e];
/** The escapes JSON.stringify writes as two characters: `"`, `\`, b, f, n, r, t. */
const SHORT_ESCAPES = new Set([0x22, 0x5c, 0x62, 0x66, 0x6e, 0x72, 0x74]);
/**
 * Open containers a text may nest (the empty ones aside): deeper ones take the whole way, where
 * sorting the keys may run out of stack and make the text `raw:` as it always did.
 */
const MAX_DEPTH = 64;
/** Digits an integer may have for JSON.stringify to write it as it is (below 2^53). */
const MAX_DIGITS = 15;

/**
 * Reads an object member's key and colon at `at` (after `{` or a comma), checked against the
 * object's last key (the top of `keys`, which it replaces); returns where its value starts, or -1.
 */
function memberKey(text: string, at: number, keys: (string | null | undefined)[]): number {
  if (text.charCodeAt(at) !== QUOTE) return -1;
  const end = stringEnd(text, at, true);
  if (end < 0 || text.charCodeAt(end) !== COLON) return -1;
  const key = text.slice(at + 1, end - 1);
  const first = key.charCodeAt(0);
  const last = keys[keys.length - 1];
  if ((first >= ZERO && first <= NINE) || key === '__proto__' || (last !== undefined && !(last! < key))) return -1;
  keys[keys.length - 1] = key;
  return end + 1;
}

/** Where the string starting at `at` ends (after its closing quote), or -1. A key may hold no escape. */
function stringEnd(text: string, at: number, key: boolean): number {
  for (let index = at + 1; index < text.length; ) {
    const code = text.charCodeAt(index);
    if (code === QUOTE) return index + 1;
    if (code === BACKSLASH) {
      if (key || !SHORT_ESCAPES.has(text.charCodeAt(index + 1))) return -1;
      index += 2;
    } else if (code < 0x20) {
      return -1;
    } else if (code >= 0xd800 && code <= 0xdfff) {
      const next = text.charCodeAt(index + 1);
      if (code > 0xdbff || !(next >= 0xdc00 && next <= 0xdfff)) return -1;
      index += 2;
    } else {
      index += 1;
    }
  }
  return -1;
}

/** Where the integer starting at `at` ends, or -1 (see isCanonicalJson). */
function numberEnd(text: string, at: number): number {
  let index = text.charCodeAt(at) === MINUS ? at + 1 : at;
  const first = text.charCodeAt(index);
  if (first === ZERO) return index === at ? at + 1 : -1;
  if (!(first >= ONE && first <= NINE)) return -1;
  const start = index;
  while (index < text.length && text.charCodeAt(index) >= ZERO && text.charCodeAt(index) <= NINE) index += 1;
  return index - start > MAX_DIGITS ? -1 : index;
}
