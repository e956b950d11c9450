import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { md5Hex } from '../../lib/hash.ts';
import { md5HexFast } from '../../lib/strategies/md5.ts';

describe('md5HexFast', () => {
  it.each([
    ['', 'd41d8cd98f00b204e9800998ecf8427e'],
    ['a', '0cc175b9c0f1b6a831c399e269772661'],
    ['abc', '900150983cd24fb0d6963f7d28e17f72'],
    ['message digest', 'f96b697d7cb7938d525a2f31aaf161d0'],
    ['12345678901234567890123456789012345678901234567890123456789012345678901234567890', '57edf4a22be3c955ac49da2e2107b67a'],
  ])('gives the RFC 1321 digest of %j', (text, digest) => {
    expect(md5HexFast(text)).toBe(digest);
  });

  it('equals the reference MD5 of the UTF-8 bytes for any text, across block boundaries', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300, unit: 'binary' }), (text) => {
        expect(md5HexFast(text)).toBe(md5Hex(text));
      }),
      { numRuns: 200 },
    );
    for (let length = 50; length <= 130; length += 1) expect(md5HexFast('é'.repeat(length))).toBe(md5Hex('é'.repeat(length)));
  });
});
