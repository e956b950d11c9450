/**
 * A fast MD5 of the UTF-8 bytes of a string, hex. Same result as md5Hex in lib/hash.ts,
 * several times faster on long texts: compacting a prompt stamps up to a few hundred
 * outputs of several KiB each, and the strategies' CPU budget is a few milliseconds.
 * Pure and synchronous (TextEncoder, typed arrays), so it runs on every runtime.
 */
const encoder = new TextEncoder();
const littleEndian = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

export function md5HexFast(text: string): string {
  // UTF-8 needs at most 3 bytes per UTF-16 code unit; 72 leaves room for the padding.
  const capacity = (Math.ceil((text.length * 3 + 72) / 64) * 64);
  const bytes = new Uint8Array(capacity);
  const { written } = encoder.encodeInto(text, bytes);
  const length = written;
  const blocks = ((length + 8) >>> 6) + 1;
  bytes[length] = 0x80;
  let words: Int32Array;
  if (littleEndian) {
    words = new Int32Array(bytes.buffer, 0, blocks * 16);
  } else {
    words = new Int32Array(blocks * 16);
    for (let index = 0; index <= length; index += 1) words[index >> 2]! |= bytes[index]! << ((index & 3) << 3);
  }
  words[blocks * 16 - 2] = (length << 3) | 0;
  words[blocks * 16 - 1] = Math.floor(length / 0x20000000) | 0;

  let a = 0x67452301;
  let b = 0xefcdab89 | 0;
  let c = 0x98badcfe | 0;
  let d = 0x10325476;
  for (let offset = 0; offset < blocks * 16; offset += 16) {
    const x0 = words[offset]!, x1 = words[offset + 1]!, x2 = words[offset + 2]!, x3 = words[offset + 3]!;
    const x4 = words[offset + 4]!, x5 = words[offset + 5]!, x6 = words[offset + 6]!, x7 = words[offset + 7]!;
    const x8 = words[offset + 8]!, x9 = words[offset + 9]!, x10 = words[offset + 10]!, x11 = words[offset + 11]!;
    const x12 = words[offset + 12]!, x13 = words[offset + 13]!, x14 = words[offset + 14]!, x15 = words[offset + 15]!;
    const aa = a, bb = b, cc = c, dd = d;
    // The 64 steps are written out: helper calls would exceed V8's inlining budget.

    a = a + ((b & c) | (~b & d)) + x0 + (-680876936) | 0; a = ((a << 7) | (a >>> 25)) + b | 0; d = d + ((a & b) | (~a & c)) + x1 + (-389564586) | 0; d = ((d << 12) | (d >>> 20)) + a | 0;
    c = c + ((d & a) | (~d & b)) + x2 + (606105819) | 0; c = ((c << 17) | (c >>> 15)) + d | 0; b = b + ((c & d) | (~c & a)) + x3 + (-1044525330) | 0; b = ((b << 22) | (b >>> 10)) + c | 0;
    a = a + ((b & c) | (~b & d)) + x4 + (-176418897) | 0; a = ((a << 7) | (a >>> 25)) + b | 0; d = d + ((a & b) | (~a & c)) + x5 + (1200080426) | 0; d = ((d << 12) | (d >>> 20)) + a | 0;
    c = c + ((d & a) | (~d & b)) + x6 + (-1473231341) | 0; c = ((c << 17) | (c >>> 15)) + d | 0; b = b + ((c & d) | (~c & a)) + x7 + (-45705983) | 0; b = ((b << 22) | (b >>> 10)) + c | 0;
    a = a + ((b & c) | (~b & d)) + x8 + (1770035416) | 0; a = ((a << 7) | (a >>> 25)) + b | 0; d = d + ((a & b) | (~a & c)) + x9 + (-1958414417) | 0; d = ((d << 12) | (d >>> 20)) + a | 0;
    c = c + ((d & a) | (~d & b)) + x10 + (-42063) | 0; c = ((c << 17) | (c >>> 15)) + d | 0; b = b + ((c & d) | (~c & a)) + x11 + (-1990404162) | 0; b = ((b << 22) | (b >>> 10)) + c | 0;
    a = a + ((b & c) | (~b & d)) + x12 + (1804603682) | 0; a = ((a << 7) | (a >>> 25)) + b | 0; d = d + ((a & b) | (~a & c)) + x13 + (-40341101) | 0; d = ((d << 12) | (d >>> 20)) + a | 0;
    c = c + ((d & a) | (~d & b)) + x14 + (-1502002290) | 0; c = ((c << 17) | (c >>> 15)) + d | 0; b = b + ((c & d) | (~c & a)) + x15 + (1236535329) | 0; b = ((b << 22) | (b >>> 10)) + c | 0;

    a = a + ((b & d) | (c & ~d)) + x1 + (-165796510) | 0; a = ((a << 5) | (a >>> 27)) + b | 0; d = d + ((a & c) | (b & ~c)) + x6 + (-1069501632) | 0; d = ((d << 9) | (d >>> 23)) + a | 0;
    c = c + ((d & b) | (a & ~b)) + x11 + (643717713) | 0; c = ((c << 14) | (c >>> 18)) + d | 0; b = b + ((c & a) | (d & ~a)) + x0 + (-373897302) | 0; b = ((b << 20) | (b >>> 12)) + c | 0;
    a = a + ((b & d) | (c & ~d)) + x5 + (-701558691) | 0; a = ((a << 5) | (a >>> 27)) + b | 0; d = d + ((a & c) | (b & ~c)) + x10 + (38016083) | 0; d = ((d << 9) | (d >>> 23)) + a | 0;
    c = c + ((d & b) | (a & ~b)) + x15 + (-660478335) | 0; c = ((c << 14) | (c >>> 18)) + d | 0; b = b + ((c & a) | (d & ~a)) + x4 + (-405537848) | 0; b = ((b << 20) | (b >>> 12)) + c | 0;
    a = a + ((b & d) | (c & ~d)) + x9 + (568446438) | 0; a = ((a << 5) | (a >>> 27)) + b | 0; d = d + ((a & c) | (b & ~c)) + x14 + (-1019803690) | 0; d = ((d << 9) | (d >>> 23)) + a | 0;
    c = c + ((d & b) | (a & ~b)) + x3 + (-187363961) | 0; c = ((c << 14) | (c >>> 18)) + d | 0; b = b + ((c & a) | (d & ~a)) + x8 + (1163531501) | 0; b = ((b << 20) | (b >>> 12)) + c | 0;
    a = a + ((b & d) | (c & ~d)) + x13 + (-1444681467) | 0; a = ((a << 5) | (a >>> 27)) + b | 0; d = d + ((a & c) | (b & ~c)) + x2 + (-51403784) | 0; d = ((d << 9) | (d >>> 23)) + a | 0;
    c = c + ((d & b) | (a & ~b)) + x7 + (1735328473) | 0; c = ((c << 14) | (c >>> 18)) + d | 0; b = b + ((c & a) | (d & ~a)) + x12 + (-1926607734) | 0; b = ((b << 20) | (b >>> 12)) + c | 0;

    a = a + (b ^ c ^ d) + x5 + (-378558) | 0; a = ((a << 4) | (a >>> 28)) + b | 0; d = d + (a ^ b ^ c) + x8 + (-2022574463) | 0; d = ((d << 11) | (d >>> 21)) + a | 0;
    c = c + (d ^ a ^ b) + x11 + (1839030562) | 0; c = ((c << 16) | (c >>> 16)) + d | 0; b = b + (c ^ d ^ a) + x14 + (-35309556) | 0; b = ((b << 23) | (b >>> 9)) + c | 0;
    a = a + (b ^ c ^ d) + x1 + (-1530992060) | 0; a = ((a << 4) | (a >>> 28)) + b | 0; d = d + (a ^ b ^ c) + x4 + (1272893353) | 0; d = ((d << 11) | (d >>> 21)) + a | 0;
    c = c + (d ^ a ^ b) + x7 + (-155497632) | 0; c = ((c << 16) | (c >>> 16)) + d | 0; b = b + (c ^ d ^ a) + x10 + (-1094730640) | 0; b = ((b << 23) | (b >>> 9)) + c | 0;
    a = a + (b ^ c ^ d) + x13 + (681279174) | 0; a = ((a << 4) | (a >>> 28)) + b | 0; d = d + (a ^ b ^ c) + x0 + (-358537222) | 0; d = ((d << 11) | (d >>> 21)) + a | 0;
    c = c + (d ^ a ^ b) + x3 + (-722521979) | 0; c = ((c << 16) | (c >>> 16)) + d | 0; b = b + (c ^ d ^ a) + x6 + (76029189) | 0; b = ((b << 23) | (b >>> 9)) + c | 0;
    a = a + (b ^ c ^ d) + x9 + (-640364487) | 0; a = ((a << 4) | (a >>> 28)) + b | 0; d = d + (a ^ b ^ c) + x12 + (-421815835) | 0; d = ((d << 11) | (d >>> 21)) + a | 0;
    c = c + (d ^ a ^ b) + x15 + (530742520) | 0; c = ((c << 16) | (c >>> 16)) + d | 0; b = b + (c ^ d ^ a) + x2 + (-995338651) | 0; b = ((b << 23) | (b >>> 9)) + c | 0;

    a = a + (c ^ (b | ~d)) + x0 + (-198630844) | 0; a = ((a << 6) | (a >>> 26)) + b | 0; d = d + (b ^ (a | ~c)) + x7 + (1126891415) | 0; d = ((d << 10) | (d >>> 22)) + a | 0;
    c = c + (a ^ (d | ~b)) + x14 + (-1416354905) | 0; c = ((c << 15) | (c >>> 17)) + d | 0; b = b + (d ^ (c | ~a)) + x5 + (-57434055) | 0; b = ((b << 21) | (b >>> 11)) + c | 0;
    a = a + (c ^ (b | ~d)) + x12 + (1700485571) | 0; a = ((a << 6) | (a >>> 26)) + b | 0; d = d + (b ^ (a | ~c)) + x3 + (-1894986606) | 0; d = ((d << 10) | (d >>> 22)) + a | 0;
    c = c + (a ^ (d | ~b)) + x10 + (-1051523) | 0; c = ((c << 15) | (c >>> 17)) + d | 0; b = b + (d ^ (c | ~a)) + x1 + (-2054922799) | 0; b = ((b << 21) | (b >>> 11)) + c | 0;
    a = a + (c ^ (b | ~d)) + x8 + (1873313359) | 0; a = ((a << 6) | (a >>> 26)) + b | 0; d = d + (b ^ (a | ~c)) + x15 + (-30611744) | 0; d = ((d << 10) | (d >>> 22)) + a | 0;
    c = c + (a ^ (d | ~b)) + x6 + (-1560198380) | 0; c = ((c << 15) | (c >>> 17)) + d | 0; b = b + (d ^ (c | ~a)) + x13 + (1309151649) | 0; b = ((b << 21) | (b >>> 11)) + c | 0;
    a = a + (c ^ (b | ~d)) + x4 + (-145523070) | 0; a = ((a << 6) | (a >>> 26)) + b | 0; d = d + (b ^ (a | ~c)) + x11 + (-1120210379) | 0; d = ((d << 10) | (d >>> 22)) + a | 0;
    c = c + (a ^ (d | ~b)) + x2 + (718787259) | 0; c = ((c << 15) | (c >>> 17)) + d | 0; b = b + (d ^ (c | ~a)) + x9 + (-343485551) | 0; b = ((b << 21) | (b >>> 11)) + c | 0;

    a = (a + aa) | 0;
    b = (b + bb) | 0;
    c = (c + cc) | 0;
    d = (d + dd) | 0;
  }
  return wordHex(a) + wordHex(b) + wordHex(c) + wordHex(d);
}

const hexDigits = '0123456789abcdef';

function wordHex(word: number): string {
  let hex = '';
  for (let byte = 0; byte < 4; byte += 1) {
    const value = (word >>> (byte * 8)) & 0xff;
    hex += hexDigits[value >>> 4]! + hexDigits[value & 15]!;
  }
  return hex;
}
