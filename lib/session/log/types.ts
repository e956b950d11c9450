import type { AttachmentLimits } from '../attachments.ts';
import type { PromptItem, StoredItem } from '../../items.ts';
import type { HistoryAggregates, TailRequirement } from '../../history.ts';
import type { LogScope } from '../keys.ts';
import type {
  ContextStart,
  LogItem,
  OverflowBoundary,
  SessionConfig,
  SessionCounts,
  TurnStatus,
  Undelivered,
} from '../records.ts';
import type { LogView } from '../view-records.ts';
import type { Ledger, TurnUsage } from '../../ledger/usage.ts';

import type { SessionRecord } from '../fields.ts';

/** The keys a reader loaded, by shard prefix, at the depth of its view's index. */
export interface KnownKeys {
  depth: number;
  shards: Map<string, Set<string>>;
}

/**
 * The newest view of a log and every item after it (seq order), up to some record, with the
 * shards of the view's repeat index that the calls after it (and the input) fall in.
 */
export interface Base {
  view: LogView | null;
  since: LogItem[];
  known: KnownKeys | null;
}

export type { NewSession, SessionPatch, SessionRecord } from '../fields.ts';

/**
 * A claimed model turn: its input is durable, its lease runs until `leaseExpiresAt` (renewed
 * by `renewLease`). The handle the pipeline passes back to every call about this turn.
 */
export interface OpenTurn {
  /** The incarnation of the session the turn was claimed in; `scope.id` is the session id. */
  scope: LogScope;
  session: SessionRecord;
  /** The turn's ordinal among the session's model turns (docs/API.md, `turn`). */
  turn: number;
  /** The input items with their seqs, payloads whole. */
  input: StoredItem[];
  /** The aggregates of the history including the input. */
  aggregates: HistoryAggregates;
  leaseExpiresAt: string;
  /** The record number (model turns and appends share one numbering). */
  record: number;
  /** Counts after the input. */
  counts: SessionCounts;
  /** The input as stored (large outputs as `output_ref`). */
  inputRecords: LogItem[];
  /** The items of the records before this one that its record carries (seq order). */
  carried: LogItem[];
  /** The oldest record whose items are in `carried` (the turn's own record when none). */
  carriedFromRecord: number;
  /** The newest view the claim found (null: none yet), and every item after it before the input. */
  base: Base;
  /**
   * The current context start (null: never compacted). Reads stop at its `start_seq`.
   * `commitTurnContext` moves it; the turn's completion stores it.
   */
  context: ContextStart | null;
  /** Set by `commitTurnContext`: the completion stores the moved context start. */
  contextMoved: boolean;
  /**
   * The overflow boundary (null: none). The turn sets it, with `overflowMoved`, when its
   * prompt had to drop more; the completion stores the moved one.
   */
  overflow: OverflowBoundary | null;
  overflowMoved: boolean;
  /** Set by `readContext` when the tail read went past the view (see `needsView`). */
  readPastView: boolean;
  /**
   * A random id every completion this handle writes carries: a completion refused because it
   * is already there, but carrying this id, is this turn's own (an earlier answer was lost).
   */
  writer: string;
  /** The idempotency key's SHA-256 and the request's, for a keyed turn. */
  keyHash?: string;
  requestHash?: string;
  /** The settings the record stores (everything of the request but its input). */
  request?: unknown;
  /** Set once `idem/` names this turn (written when the claim landed). */
  keyIndexed?: boolean;
  /** Set when `onClaimed` failed at the claim: the completion runs it again before its `.done`. */
  claimHookFailed?: boolean;
  /** Calls without an output after the input (null: not tracked in this log yet). */
  openCalls: string[] | null;
  /** Notices consumed by earlier turns that no model has seen yet (see records.ts). */
  undelivered: Undelivered;
  /** The session's usage totals before this turn (its completion adds the turn's usage). */
  ledger: Ledger;
}

/** What a compaction decided: the new context start and its summary (see ContextStart). */
export type NewContext = Omit<ContextStart, 'base_record' | 'created_at'>;

/** What `compact` hands its summarizer: the current context, read back to its start. */
export interface ContextView {
  /** Items from the context start (seq order; out-of-line outputs as `output_ref`). */
  items: PromptItem[];
  context: ContextStart | null;
  /**
   * The oldest seq the newest record carries (see `recent`). A new context start at or after
   * it keeps the whole context in what later records carry, so a turn reads it from the newest
   * record alone (within the carry's byte budget).
   */
  carriedFromSeq: number | null;
}

export interface StoredOutcome {
  status: TurnStatus;
  response?: unknown;
  error?: { code: string; message: string; details?: unknown } | undefined;
}

export type BeginTurnResult =
  | {
      kind: 'replay';
      /** The key's turn. */
      turn: number;
      response: unknown;
      status: TurnStatus;
      error?: { code: string; message: string; details?: unknown } | undefined;
    }
  | { kind: 'claimed'; turn: OpenTurn };

/**
 * What the log needs of the strategies to keep its views, handed in by the turn layer
 * (lib/turn/view-policy.ts builds it from lib/strategies/), so the log imports no strategy:
 * how to extend the aggregates, a call's repeat key, the tail a requirement selects, and how
 * the strategies compact a tool item a view stores compacted. `version` names all of it: it
 * is stored in every view, and a view written under another version is not read (its
 * compacted items, aggregates or keys may differ), so bump it whenever any of these changes.
 */
export interface ViewPolicy {
  readonly version: string;
  emptyAggregates(): HistoryAggregates;
  /**
   * The aggregates after `items`; `seenBefore(key)` tells a call key seen before them.
   * `keys`: the keys of their calls, in order, when the caller has them (see aggregatesOf).
   */
  extendAggregates(
    previous: HistoryAggregates,
    items: readonly LogItem[],
    seenBefore: (key: string) => boolean,
    keys?: readonly string[],
  ): { aggregates: HistoryAggregates; newKeys: string[] };
  /** The key (hex) `extendAggregates` gives `seenBefore` for a call. */
  callKey(name: string, argumentsText: string): string;
  /** The tail view of `items` for `requirement` (see `selectTail` in lib/strategies/). */
  selectTail(items: readonly LogItem[], requirement: TailRequirement): PromptItem[];
  /** The index where the newest `toolCalls` calls and outputs begin, or null. */
  tailCut(items: readonly PromptItem[], toolCalls: number): number | null;
  /** A tool item as the strategies compact it (the item itself when they leave it so). */
  compact<Item extends LogItem>(item: Item): Item;
}

export interface SessionLogOptions {
  /** The strategies' part of the views (required: every turn computes aggregates with it). */
  viewPolicy: ViewPolicy;
  /** Prepended to every key (KEY_PREFIX). */
  keyPrefix?: string;
  clock?: () => Date;
  /** How long a claimed turn stays open, unless renewed, before a newcomer may close it as failed. */
  leaseMs?: number;
  /** Function outputs above this many UTF-8 bytes are stored out of line. */
  blobThreshold?: number;
  /** The largest image and file payloads taken (MAX_IMAGE_BYTES, MAX_FILE_BYTES). */
  attachmentLimits?: AttachmentLimits;
  /** Packing starts once this many closed records older than the newest `keepRecords` exist. */
  packMinRecords?: number;
  /** The newest records stay unpacked (the newest always does: claims read it). */
  keepRecords?: number;
  /**
   * A segment below this size absorbs the next records when packing, and a pack writes segments
   * of at most about this size (plus one record).
   */
  segmentTargetBytes?: number;
  /** Generates ids for sessions created without one. */
  generateId?: () => string;
  /** A record carries the items of at most this many records before it (see `recent`). */
  recentRecords?: number;
  /** ...and at most about this many bytes of them. */
  recentBytes?: number;
  /** `pack` writes a new view once this many records follow the newest one. */
  viewEveryRecords?: number;
  /**
   * Keep the views read or written, parsed, up to this many bytes of JSON per store, for the
   * life of the process (lib/session/log/view-cache.ts). Default 0: none kept.
   */
  viewCacheBytes?: number;
  /**
   * Runs on every read of a session's config, before it is used, and may throw: the HTTP
   * layer refuses revoked tokens here, so routes that read the config pay nothing extra.
   */
  checkConfig?: ((config: SessionConfig) => void) | undefined;
  /** SESSION_TTL_DAYS: idle days after which a session without its own `expires_after_days` expires (null: never). */
  sessionTtlDays?: number | null;
  /**
   * Runs once a turn's completion landed, whoever wrote it, before the close is answered (the
   * webhooks' outbox, lib/webhooks/events.ts); a failure fails the close's caller.
   */
  onClosed?: ((closed: ClosedTurn) => Promise<void>) | undefined;
  /**
   * Runs with a model turn's claim put, before its completion can exist (the webhooks' outbox
   * intent, lib/webhooks/intent.ts); a failure fails the claim as its put's would.
   */
  onClaimed?: ((turn: OpenTurn) => Promise<void>) | undefined;
}

/** A model turn whose completion has just landed. */
export interface ClosedTurn {
  scope: LogScope;
  turn: number;
  status: TurnStatus;
  error?: { code: string; message: string } | undefined;
  usage?: TurnUsage | undefined;
  completedAt: string;
  /** The session's own `webhook_url` (null or absent: the deployment's WEBHOOK_URL). */
  webhookUrl: string | null | undefined;
}

export interface PackOptions {
  /**
   * What the session's strategies need from its history, given its aggregates (see
   * `tailRequirement`): the tail a new view holds. Absent: the newest 256 calls and the
   * repeated ones, all outputs inline.
   */
  requirement?: (aggregates: HistoryAggregates, context: ContextStart | null) => TailRequirement;
  /** Write a view of the newest record even if none is due (a turn found its view stale). */
  refresh?: boolean;
}

export interface PackResult {
  /** The view written, when one was due. */
  view?: string;
  packed: boolean;
  /** The segment written (or found already written). */
  segment?: string;
  records?: number;
  /** The newest record a segment covers once the pack is done (absent: no segment yet). */
  through?: number;
  /** Objects deleted: packed records, merged segments, leftovers of earlier crashes. */
  deleted: number;
}
