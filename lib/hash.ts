import { createHash } from 'node:crypto';

/**
 * Hashes through `node:crypto`, which all three runtimes provide natively (Workers with
 * nodejs_compat, Deno, Node): synchronous, so pure strategies can stamp truncations, and
 * several times faster than a JavaScript MD5 on the KiB-sized outputs a prompt compacts
 * (the strategies have a budget of a few milliseconds per prompt).
 */

/** Hex MD5 of the UTF-8 bytes of `text`. */
export function md5Hex(text: string): string {
  return createHash('md5').update(text, 'utf8').digest('hex');
}

/** `bytes` random bytes (the Web Crypto generator every runtime has), as hex. */
export function randomHex(bytes: number): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(bytes)), (byte) => byte.toString(16).padStart(2, '0')).join(
    '',
  );
}

/** Hex SHA-256 of a string (UTF-8) or bytes. */
export function sha256Hex(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}
