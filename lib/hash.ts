import { md5 as jsMd5 } from 'js-md5';
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex, utf8ToBytes } from '@noble/hashes/utils.js';

/**
 * Hex MD5 of the UTF-8 bytes of `text`. Synchronous, so pure strategies can stamp
 * truncations. js-md5 hashes strings without a separate encoding pass, several times
 * faster than a bytes-first MD5 on the KiB-sized outputs a prompt compacts.
 */
export function md5Hex(text: string): string {
  return jsMd5.hex(text);
}

/** Hex SHA-256 of a string (UTF-8) or bytes. Synchronous and portable across runtimes. */
export function sha256Hex(data: string | Uint8Array): string {
  return bytesToHex(sha256(typeof data === 'string' ? utf8ToBytes(data) : data));
}
