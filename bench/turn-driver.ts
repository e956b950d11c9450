import type { Item, Tool } from '../lib/items.ts';
import type { StoreCounts } from '../test/support/counting-store.ts';
import type { TurnRequest, TurnResponse } from '../lib/turn/index.ts';
import type { RecordedOperation } from './recording-store.ts';

/** What one measured turn reports. Storage figures are known only where the store is counted. */
export interface DrivenTurn {
  ms: number;
  response: TurnResponse;
  /** Storage operations from the request until the response (the turn's own work). */
  storage?: StoreCounts;
  /** Storage operations of the background work the turn started (packing), run after it. */
  background?: StoreCounts;
  /** Every storage call of the turn (until the response), by kind of key. */
  operations?: RecordedOperation[];
  /** UTF-8 bytes of the JSON of the prompt the model was given. */
  promptBytes?: number;
}

/**
 * UTF-8 bytes of the prompt's JSON, each image or file read into it counted at its size (a
 * Uint8Array, left out of the JSON as `JSON.stringify` with a replacer dropping it would). Summed
 * over the prompt's arrays and plain objects, their keys and separators, without building the
 * whole JSON: that string, twice the prompt, was garbage the next timed turn collected.
 */
export function promptByteLength(prompt: unknown): number {
  const media = { bytes: 0 };
  return (jsonBytes(prompt, media) ?? 0) + media.bytes;
}

/** UTF-8 bytes of `value`'s JSON, as a property's or element's (undefined: left out), its media counted apart. */
function jsonBytes(value: unknown, media: { bytes: number }): number | undefined {
  // A Buffer is a Uint8Array with toJSON, which JSON.stringify calls before the replacer sees it.
  if (value instanceof Uint8Array && !hasToJSON(value)) {
    media.bytes += value.length;
    return undefined;
  }
  if (Array.isArray(value)) {
    let bytes = value.length === 0 ? 2 : value.length + 1;
    for (let at = 0; at < value.length; at++) bytes += jsonBytes(value[at], media) ?? 4;
    return bytes;
  }
  if (isPlainObject(value)) {
    let bytes = 2;
    let fields = 0;
    for (const key of Object.keys(value)) {
      const field = jsonBytes(value[key], media);
      if (field === undefined) continue;
      bytes += utf8Length(JSON.stringify(key)) + 1 + field;
      fields++;
    }
    return bytes + Math.max(0, fields - 1);
  }
  // A string, number, boolean or null; anything else (a Date, a Buffer) whole, as JSON.stringify has it.
  const json: string | undefined = JSON.stringify(value, (_key, inner) => {
    if (!(inner instanceof Uint8Array)) return inner;
    media.bytes += inner.length;
    return undefined;
  });
  return json === undefined ? undefined : utf8Length(json);
}

/** An object JSON.stringify writes as its own enumerable keys: no prototype but Object's, no toJSON. */
function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const prototype = Object.getPrototypeOf(value);
  return (prototype === Object.prototype || prototype === null) && !hasToJSON(value);
}

function hasToJSON(value: object): boolean {
  return typeof (value as { toJSON?: unknown }).toJSON === 'function';
}

/** UTF-8 bytes of `text` as TextEncoder writes it (a lone surrogate as U+FFFD, 3 bytes), without encoding it. */
function utf8Length(text: string): number {
  let bytes = text.length;
  for (let at = 0; at < text.length; at++) {
    const code = text.charCodeAt(at);
    if (code < 0x80) continue;
    bytes += code < 0x800 ? 1 : 2;
    // A surrogate pair: 4 bytes for its 2 code units.
    const next = code >= 0xd800 && code <= 0xdbff ? text.charCodeAt(at + 1) : 0;
    if (next >= 0xdc00 && next <= 0xdfff) at++;
  }
  return bytes;
}

/**
 * The same turn-overhead procedure runs on every runtime through this: the memory store in
 * this process (lib/turn/ runTurn, counted and recorded by kind of key), or the worker in
 * workerd over HTTP (counted in the worker, bench/counting-worker.ts).
 */
export interface TurnDriver {
  readonly runtime: string;
  createSession(id: string, instructions: string): Promise<void>;
  /** Appends items (POST /items); returns the last seq. */
  append(id: string, items: Item[]): Promise<number>;
  turn(id: string, request: TurnRequest): Promise<DrivenTurn>;
  postNotice(id: string, content: string): Promise<void>;
  /** Storage counts of every append so far, where the store is counted. */
  readonly appendCounts?: StoreCounts[];
  /** Operations by kind of key of every append so far (see RecordingStore), where recorded. */
  readonly appendKinds?: Map<string, { count: number; bytes: number }>[];
  /** GET /items of the newest 100 items: its storage counts, where the store is counted. */
  newestPage?(id: string): Promise<StoreCounts>;
  /** Packs the log directly; without it, loading runs a short turn every few appends instead. */
  pack?(id: string): Promise<void>;
  close(): Promise<void>;
}

/** The tool the measured turns offer the echo model. */
export const READ_FILE_TOOL: Tool = {
  type: 'function',
  name: 'read_file',
  description: 'Reads a file of the workspace.',
  parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
};
