import type { z } from 'zod';
import { DEFAULTS } from '../../defaults.ts';
import type { ObjectStore } from '../../store/object-store.ts';
import type { SessionConfig } from '../records.ts';
import type { Budget } from '../../ledger/usage.ts';
import type { SessionLogOptions, ViewPolicy } from './types.ts';
import { recordCacheOf, type RecordCache } from './record-cache.ts';
import { viewCacheOf, type ViewCache } from './view-cache.ts';
import { logToConsole } from '../../loggable.ts';

/**
 * What every part of a session log works with: the store, the key prefix, the clock and the
 * options with their defaults applied. Built once per `SessionLog`; nothing in it changes.
 */
export interface LogContext {
  readonly store: ObjectStore;
  readonly keyPrefix: string;
  readonly clock: () => Date;
  readonly leaseMs: number;
  readonly blobThreshold: number;
  readonly packMinRecords: number;
  readonly keepRecords: number;
  readonly segmentTargetBytes: number;
  readonly generateId: () => string;
  readonly recentRecords: number;
  readonly recentBytes: number;
  readonly viewEveryRecords: number;
  /** The repeat index's delta bound (undefined: INDEX_DELTA_KEYS of lib/session/log/key-shards.ts). */
  readonly indexDeltaKeys: number | undefined;
  /** Keys in shards up to which an index carries filters (undefined: FILTER_MAX_KEYS of lib/session/key-filter.ts). */
  readonly indexFilterKeys: number | undefined;
  /** See SessionLogOptions.viewChunkBytes. */
  readonly viewChunkBytes: number;
  /** See SessionLogOptions.checkViews. */
  readonly checkViews: boolean;
  readonly checkConfig: ((config: SessionConfig) => void) | undefined;
  readonly viewPolicy: ViewPolicy;
  /** Views parsed before, by key (null: every view is fetched). */
  readonly viewCache: ViewCache | null;
  /** Records parsed before, by key (null: every record is parsed). */
  readonly recordCache: RecordCache | null;
  readonly sessionTtlDays: number | null;
  /** See SessionLogOptions.defaultBudget. */
  readonly defaultBudget: Budget | null;
  readonly onClosed: SessionLogOptions['onClosed'];
  readonly onClaimed: SessionLogOptions['onClaimed'];
  readonly onLeaseClosed: SessionLogOptions['onLeaseClosed'];
  readonly onQueueWaiting: SessionLogOptions['onQueueWaiting'];
  readonly onClosedByOther: SessionLogOptions['onClosedByOther'];
  readonly onDeleted: SessionLogOptions['onDeleted'];
  readonly log: (message: string, details?: unknown) => void;
}

/**
 * A view's tail goes into a chunk once the items before its window hold this many bytes, and a
 * view names its base's chunk while it holds at most an eighth of this many bytes beside it, or
 * an eighth of the chunk's (lib/session/log/view-chunks.ts; SessionLogOptions.viewChunkBytes).
 * A process that does not hold the view reads the chunk too (one get more). The default is the
 * view cache's (DEFAULTS.viewCacheBytes): a view larger than that no process keeps, so every
 * turn reads it whole anyway, and one get more is little beside 16 MiB; a smaller view is
 * stored whole, read in one get by a process that does not hold it.
 */
const VIEW_CHUNK_BYTES = 16 * 1024 * 1024;

/** Gets at most this many objects at a time. */
export const PARALLEL_GETS = 6;
export const MAX_CLAIM_ATTEMPTS = 64;

/** The context of a log on `store`, with the defaults of `options` applied. */
export function logContext(store: ObjectStore, options: SessionLogOptions): LogContext {
  const packMinRecords = Math.max(1, options.packMinRecords ?? 8);
  const keepRecords = Math.max(1, options.keepRecords ?? 2);
  // Enough to cover what stays unpacked when packing runs every few records.
  const viewEveryRecords = Math.max(1, options.viewEveryRecords ?? packMinRecords);
  return {
    store,
    keyPrefix: options.keyPrefix ?? '',
    clock: options.clock ?? (() => new Date()),
    leaseMs: options.leaseMs ?? DEFAULTS.turnLeaseMs,
    blobThreshold: options.blobThreshold ?? DEFAULTS.blobThresholdBytes,
    packMinRecords,
    keepRecords,
    segmentTargetBytes: options.segmentTargetBytes ?? 1024 * 1024,
    generateId: options.generateId ?? (() => `s_${crypto.randomUUID().replaceAll('-', '')}`),
    viewEveryRecords,
    indexDeltaKeys: options.indexDeltaKeys === undefined ? undefined : Math.max(1, options.indexDeltaKeys),
    indexFilterKeys: options.indexFilterKeys,
    viewChunkBytes: Math.max(1, options.viewChunkBytes ?? VIEW_CHUNK_BYTES),
    checkViews: options.checkViews ?? false,
    recentRecords: Math.max(0, options.recentRecords ?? keepRecords + Math.max(packMinRecords, viewEveryRecords) + 4),
    // Records hold their items inline, so the carry must fit outputs of a few KiB each.
    recentBytes: Math.max(0, options.recentBytes ?? 1024 * 1024),
    checkConfig: options.checkConfig,
    viewPolicy: options.viewPolicy,
    viewCache: viewCacheOf(store, options.viewCacheBytes ?? 0),
    recordCache: recordCacheOf(store, options.recordCacheBytes ?? DEFAULTS.recordCacheBytes),
    sessionTtlDays: options.sessionTtlDays ?? null,
    defaultBudget: options.defaultBudget ?? null,
    onClosed: options.onClosed,
    onClaimed: options.onClaimed,
    onLeaseClosed: options.onLeaseClosed,
    onQueueWaiting: options.onQueueWaiting,
    onClosedByOther: options.onClosedByOther,
    onDeleted: options.onDeleted,
    log: options.log ?? logToConsole,
  };
}

/**
 * Checks an internal invariant: a value lib/ was handed by its own caller (a model's outcome,
 * items the pipeline built). A client's input is validated once, at the edge (the routes' zod
 * schemas), so a failure here is a bug and a plain Error (500), never a client's 400.
 */
export function checkInvariant<Schema extends z.ZodType>(schema: Schema, value: unknown): z.infer<Schema> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`session log invariant: ${issue?.path.join('.') || 'value'}: ${issue?.message ?? 'invalid'}`);
  }
  return parsed.data;
}

export async function backoff(attempt: number): Promise<void> {
  const delay = Math.min(200, 2 ** Math.min(attempt, 7)) * Math.random();
  await new Promise((resolve) => setTimeout(resolve, delay));
}
