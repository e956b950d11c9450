import { expect, it } from 'vitest';
import { md5Hex, sha256Hex } from '../../lib/hash.ts';

it('hashes with node:crypto inside workerd, as in Node and Deno', () => {
  expect(md5Hex('message digest')).toBe('f96b697d7cb7938d525a2f31aaf161d0');
  expect(md5Hex('é')).toBe('66ddcd97cfdeabb2f6fb8a999b4bc76f');
  expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  expect(sha256Hex(new TextEncoder().encode('abc'))).toBe(sha256Hex('abc'));
});
