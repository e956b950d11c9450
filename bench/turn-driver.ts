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

/** UTF-8 bytes of the prompt's JSON, each image or file read into it counted at its size. */
export function promptByteLength(prompt: unknown): number {
  let mediaBytes = 0;
  const json = JSON.stringify(prompt, (_key, value) => {
    if (!(value instanceof Uint8Array)) return value;
    mediaBytes += value.length;
    return undefined;
  });
  return new TextEncoder().encode(json).length + mediaBytes;
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
