import { z } from 'zod';
import { randomHex } from '../hash.ts';

/**
 * Names of inbox notices: validation of client-chosen names, generated names, and the
 * `.1`, `.2` ... slots a delivered notice takes in `inbox_removed/` when its name is taken.
 */

/** The reserved name that aborts the next turn. Exact and case-sensitive. */
export const ABORT_NOTICE_NAME = 'abort';

/** A name chosen through the API: 1-200 characters of [A-Za-z0-9._-], not starting with ".". */
export const noticeNameSchema = z
  .string()
  .min(1, 'must have at least 1 character')
  .max(200, 'must have at most 200 characters')
  .regex(/^[A-Za-z0-9_-][A-Za-z0-9._-]*$/, 'must be [A-Za-z0-9._-] and must not start with "."');

/**
 * Whether a key's name (the part after `inbox/`) is a notice at all. Names starting with "."
 * and names holding a further "/" are not notices: they are left in place and never listed.
 * Direct writers may use any other name, even one the API would refuse.
 */
export function isNoticeName(name: string): boolean {
  return name.length > 0 && !name.startsWith('.') && !name.includes('/');
}

/**
 * Splits a name at its last extension: `a_msg.md` -> [`a_msg`, `.md`], `a.b.md` -> [`a.b`,
 * `.md`], `name` -> [`name`, ``]. Only the last dot counts, and a name never starts with one.
 */
export function splitExtension(name: string): [stem: string, extension: string] {
  const dot = name.lastIndexOf('.');
  return dot > 0 ? [name.slice(0, dot), name.slice(dot)] : [name, ''];
}

/**
 * The name slot `n` of a delivered notice gets in `inbox_removed/`: slot 0 is the name
 * itself, slot n >= 1 puts `.n` before the last extension (`a_msg.md` -> `a_msg.1.md`,
 * `name` -> `name.1`, `a.b.md` -> `a.b.1.md`).
 */
export function slotName(name: string, slot: number): string {
  if (slot === 0) return name;
  const [stem, extension] = splitExtension(name);
  return `${stem}.${slot}${extension}`;
}

/** The slot number `storedAs` is for `name` (the inverse of slotName), or undefined. */
export function parseSlot(name: string, storedAs: string): number | undefined {
  if (storedAs === name) return 0;
  const [stem, extension] = splitExtension(name);
  if (!storedAs.startsWith(`${stem}.`) || !storedAs.endsWith(extension)) return undefined;
  const digits = storedAs.slice(stem.length + 1, storedAs.length - extension.length);
  return /^[1-9][0-9]{0,8}$/.test(digits) ? Number(digits) : undefined;
}

/** Byte order of UTF-8 strings, the order object stores list keys in. */
export function compareBytes(left: string, right: string): number {
  const encoder = new TextEncoder();
  const a = encoder.encode(left);
  const b = encoder.encode(right);
  const length = Math.min(a.length, b.length);
  for (let index = 0; index < length; index++) {
    if (a[index] !== b[index]) return a[index]! - b[index]!;
  }
  return a.length - b.length;
}

/**
 * Creates the generator of names for notices posted without one: the clock in milliseconds,
 * zero-padded to 15 digits, a sequence number within that millisecond, and a random suffix
 * (`000001764412345678-0000-3f9a1c2b`). Names from one generator sort strictly after every
 * earlier one; across processes they follow the clock, and the random part keeps them unique.
 */
export function createNameGenerator(random: () => string = () => randomHex(4)): (now: Date) => string {
  let lastMillis = -1;
  let sequence = 0;
  return (now) => {
    let millis = Math.max(0, Math.floor(now.getTime()));
    if (millis <= lastMillis) {
      // Same millisecond (or a clock that stepped back): stay after the previous name.
      millis = lastMillis;
      sequence += 1;
      if (sequence > 9999) {
        millis += 1;
        sequence = 0;
      }
    } else {
      sequence = 0;
    }
    lastMillis = millis;
    return `${String(millis).padStart(15, '0')}-${String(sequence).padStart(4, '0')}-${random()}`;
  };
}
