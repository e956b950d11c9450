import fc from 'fast-check';
import { md5 } from '@noble/hashes/legacy.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex, utf8ToBytes } from '@noble/hashes/utils.js';
import { describe, expect, it } from 'vitest';
import { hmacSha256Base64, md5Hex, sha256Hex } from '../lib/hash.ts';

describe('md5Hex', () => {
  it.each([
    ['', 'd41d8cd98f00b204e9800998ecf8427e'],
    ['a', '0cc175b9c0f1b6a831c399e269772661'],
    ['abc', '900150983cd24fb0d6963f7d28e17f72'],
    ['message digest', 'f96b697d7cb7938d525a2f31aaf161d0'],
    [
      '12345678901234567890123456789012345678901234567890123456789012345678901234567890',
      '57edf4a22be3c955ac49da2e2107b67a',
    ],
  ])('gives the RFC 1321 digest of %j', (text, digest) => {
    expect(md5Hex(text)).toBe(digest);
  });

  it("hashes the UTF-8 bytes of any text, across block boundaries (checked against @noble/hashes' MD5)", () => {
    const reference = (text: string) => bytesToHex(md5(utf8ToBytes(text)));
    fc.assert(
      fc.property(fc.string({ maxLength: 300, unit: 'binary' }), (text) => md5Hex(text) === reference(text)),
      { numRuns: 200 },
    );
    for (let length = 50; length <= 130; length += 1)
      expect(md5Hex('é'.repeat(length))).toBe(reference('é'.repeat(length)));
  });
});

describe('sha256Hex', () => {
  it('hashes strings as UTF-8 and bytes as they are', () => {
    expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(sha256Hex(new TextEncoder().encode('abc'))).toBe(sha256Hex('abc'));
  });

  it("hashes any text's UTF-8 bytes and any bytes (checked against @noble/hashes' SHA-256)", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300, unit: 'binary' }), fc.uint8Array({ maxLength: 300 }), (text, bytes) => {
        expect(sha256Hex(text)).toBe(bytesToHex(sha256(utf8ToBytes(text))));
        expect(sha256Hex(bytes)).toBe(bytesToHex(sha256(bytes)));
      }),
      { numRuns: 200 },
    );
  });
});

describe('hmacSha256Base64', () => {
  it.each([
    ['Jefe', 'what do ya want for nothing?', 'W9zBRr9gdU5qBCQmCJV1x1oAPwidJzmDnexYuWTsOEM='],
    ['\u000b'.repeat(20), 'Hi There', 'sDRMYdjbOFNcqK/OrwvxK4gdwgDJgz2nJuk3bC4yz/c='],
  ])('gives the RFC 4231 HMAC-SHA256 under key %j of %j, in base64', (key, text, mac) => {
    expect(hmacSha256Base64(new TextEncoder().encode(key), text)).toBe(mac);
  });
});
