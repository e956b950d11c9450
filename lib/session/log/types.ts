import type { AttachmentLimits } from '../attachments.ts';
import type { Item, PromptItem, StoredItem } from '../../items.ts';
import type { HistoryAggregates, TailRequirement } from '../../history.ts';
import type { LogScope } from '../keys.ts';
import type {
  ContextStart,
  LogItem,
  OverflowBoundary,
  SessionConfig,
  SessionCounts,
  TurnStatus,
  Unbilled,
  Undelivered,
} from '../records.ts';
import type { LogView } from '../view-records.ts';
import type { Budget, Ledger, TurnUsage } from '../../ledger/usage.ts';

import type { SessionRecord } from '../fields.ts';

/**
 * The keys a reader loaded of its view's repeat index: the view's delta, and shards by prefix at
 * the depth of the index (each as sorted, concatenated keys; lib/session/log/key-shards.ts).
 */
export interface KnownKeys {
  depth: number;
  delta: string;
  shards: Map<string, string>;
  /** The index's shard filters by prefix (lib/session/key-filter.ts): a key one rejects is in no shard. */
  filters?: Readonly<Record<string, string>>;
  /** The keys whose first call after the view its record flagged, and whether it was a repeat. */
  flags?: Map<string, boolean>;
}

/**
 * The newest view of a log and every item after it (seq order), up to some record, with the
 * shards of the view's repeat index that the calls after it (and the input) fall in.
 */
export interface Base {
  view: LogView | null;
  since: LogItem[];
  known: KnownKeys | null;
  /** A newer view was listed but could not serve (its chunk gone): `view` is the newest that can. */
  skipped?: true;
}

export type { NewSession, SessionPatch, SessionRecord } from '../fields.ts';

/**
 * A claimed model turn, as its claim found it: a read-only snapshot (nothing writes it after
 * the claim). Its input is durable, its lease runs until `leaseExpiresAt` (`renewLease` writes
 * a later one and returns it). The handle the pipeline passes back to every call about this
 * turn; what the turn changes (a moved context start or overflow boundary) goes to its close
 * in the `TurnOutcome`.
 */
export interface OpenTurn {
  /** The incarnation of the session the turn was claimed in; `scope.id` is the session id. */
  readonly scope: LogScope;
  readonly session: Readonly<SessionRecord>;
  /** The turn's ordinal among the session's model turns (docs/API.md, `turn`). */
  readonly turn: number;
  /** The input items with their seqs, payloads whole. */
  readonly input: readonly StoredItem[];
  /** The aggregates of the history including the input. */
  readonly aggregates: Readonly<HistoryAggregates>;
  /** The lease the claim wrote (renewals are written beside the record, not here). */
  readonly leaseExpiresAt: string;
  /** When the turn was claimed (its record's `created_at`). */
  readonly claimedAt: string;
  /** The record number (model turns and appends share one numbering). */
  readonly record: number;
  /** Counts after the input. */
  readonly counts: Readonly<SessionCounts>;
  /** The input as stored (large outputs as `output_ref`). */
  readonly inputRecords: readonly LogItem[];
  /** The items of the records before this one that its record carries (seq order). */
  readonly carried: readonly LogItem[];
  /** The oldest record whose items are in `carried` (the turn's own record when none). */
  readonly carriedFromRecord: number;
  /** The newest view the claim found (null: none yet), and every item after it before the input. */
  readonly base: Readonly<Base>;
  /** The call keys of `base.since`, when the claim had them: the completion flags its calls' repeats with them. */
  readonly sinceKeys?: ReadonlySet<string>;
  /**
   * The context start at the claim (null: never compacted). Reads stop at its `start_seq`.
   * A compaction in the turn returns the moved one (`commitTurnContext`); the close stores it.
   */
  readonly context: ContextStart | null;
  /** The overflow boundary at the claim (null: none); the close stores one the turn moved. */
  readonly overflow: OverflowBoundary | null;
  /**
   * A random id every completion this handle writes carries: a completion refused because it
   * is already there, but carrying this id, is this turn's own (an earlier answer was lost).
   */
  readonly writer: string;
  /** The idempotency key's SHA-256 and the request's, for a keyed turn. */
  readonly keyHash?: string;
  readonly requestHash?: string;
  /** The settings the record stores (everything of the request but its input). */
  readonly request?: unknown;
  /**
   * What the claim's put learned, once it landed (lib/session/log/claim.ts): the completion
   * writes `idem/` and runs `onClaimed` again when the claim could not.
   */
  readonly landing: Promise<ClaimLanding>;
  /** A turn without input (a retake): the first seq of the failed input it takes again, when its claim read it. */
  readonly retaken?: number;
  /** Calls without an output after the input (null: not tracked in this log yet). */
  readonly openCalls: readonly string[] | null;
  /** Notices consumed by earlier turns that no model has seen yet (see records.ts). */
  readonly undelivered: Readonly<Undelivered>;
  /** The session's usage totals before this turn (its completion adds the turn's usage). */
  readonly ledger: Readonly<Ledger>;
  /** Turns closed by someone else whose spend the totals do not count yet (log/unbilled.ts). */
  readonly unbilled: Readonly<Unbilled>;
  /** The etag of the queue's signal as its claim listed it, when set (keys.ts queueSignalKey). */
  readonly queueSignal?: string;
}

/** The history an open turn read (SessionLog.readContext). */
export interface TurnHistory {
  /** The tail view of the history, in seq order. */
  items: PromptItem[];
  /** The read went past the claim's view: the next turn is better served by a fresh one (see needsView). */
  readPastView: boolean;
  /**
   * The aggregates the read was made for: the claim's, or those with every entry of `repeated`
   * when the claim's left older ones out and the read met them (lib/session/log/older-repeated.ts).
   */
  aggregates?: HistoryAggregates;
}

/**
 * What a turn's webhook intent is written from (`onClaimed`): an open turn, or a turn another
 * closer closed, whose intent is put again when its event failed (log/lease.ts closeTurn).
 */
export type IntentTurn = Pick<OpenTurn, 'scope' | 'turn' | 'leaseExpiresAt'> & {
  readonly session: Pick<OpenTurn['session'], 'webhook_url'>;
};

/** What a claim's put learned besides landing: whether it indexed the key and ran `onClaimed`. */
export interface ClaimLanding {
  /** `idem/` names this turn (always false for a turn without a key). */
  readonly keyIndexed: boolean;
  /**
   * The turn's webhook intent (`onClaimed`): `stored` once it answered at the claim; `failed`
   * there, the completion runs it again before its `.done`; `unknown` without `onClaimed`, or
   * for an adopted record (its own claim ran it, which this handle did not see).
   */
  readonly intent: 'stored' | 'failed' | 'unknown';
}

/**
 * How a claimed turn ended, as the pipeline builds it (lib/turn/pipeline.ts,
 * lib/turn/close-turn.ts) and its owner's close stores it (SessionLog.completeTurn).
 */
export interface TurnOutcome {
  readonly status: TurnStatus;
  readonly output: readonly Item[];
  readonly receipt: unknown;
  readonly response?: unknown;
  readonly error?: { code: string; message: string; details?: unknown } | undefined;
  /** Notices this turn consumed or carried that no model saw (a failed or aborted turn). */
  readonly undelivered?: Readonly<Undelivered>;
  /**
   * A completed turn's usage, or a failed one's whose model answered (its answer refused, e.g. an
   * item over MAX_ITEM_BYTES; counted as no turn): the completion carries the session's totals with it.
   */
  readonly usage?: TurnUsage;
  /** What the summary of the turn's compaction used: a completed turn's totals take it too, as no turn. */
  readonly summaryUsage?: TurnUsage;
  /** The context start a compaction in the turn stored (`commitTurnContext`): the close commits it. */
  readonly context?: ContextStart;
  /** The overflow boundary the turn's fitted prompt moved: the close stores it. */
  readonly overflow?: OverflowBoundary;
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
  /** Its receipt (lib/turn/receipt.ts): a replay kept without its error names the model it names. */
  receipt?: unknown;
}

export type BeginTurnResult =
  | ({
      kind: 'replay';
      /** The key's turn. */
      turn: number;
      response: unknown;
      /** The seq the turn's output starts at (absent: not known, a turn packed before segments kept it). */
      outputSeq?: number | undefined;
    } & Pick<StoredOutcome, 'status' | 'error' | 'receipt'>)
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
   * The delta bound of the repeat index: a view holds up to this many call keys inline before
   * its shards are written (lib/session/log/key-shards.ts, INDEX_DELTA_KEYS by default).
   */
  indexDeltaKeys?: number;
  /**
   * A view's repeat index carries its shards' filters while they hold at most this many keys
   * (lib/session/key-filter.ts, FILTER_MAX_KEYS by default).
   */
  indexFilterKeys?: number;
  /**
   * A view's tail is stored in a chunk once its items before the window hold this many bytes
   * (lib/session/log/view-chunks.ts; 16 MiB by default).
   */
  viewChunkBytes?: number;
  /**
   * Tests: build each view that lib/session/log/view-increment.ts builds from its base the whole
   * way too, and throw when the two differ.
   */
  checkViews?: boolean;
  /**
   * Keep the views read or written, parsed, up to this many bytes of JSON per store, for the
   * life of the process (lib/session/log/view-cache.ts). Default 0: none kept.
   */
  viewCacheBytes?: number;
  /**
   * Keep the records written or read, parsed, up to this many bytes of JSON per store, for the
   * life of the process (lib/session/log/record-cache.ts; 0: none kept). Default
   * `DEFAULTS.recordCacheBytes` (lib/defaults.ts).
   */
  recordCacheBytes?: number;
  /**
   * Runs on every read of a session's config, before it is used, and may throw: the HTTP
   * layer refuses revoked tokens here, so routes that read the config pay nothing extra.
   */
  checkConfig?: ((config: SessionConfig) => void) | undefined;
  /** SESSION_TTL_DAYS: idle days after which a session without its own `expires_after_days` expires (null: never). */
  sessionTtlDays?: number | null;
  /**
   * DEFAULT_SESSION_BUDGET: the budget a session created or imported without one of its own
   * gets (null: none). A fork keeps its parent's; a PATCH with `budget: null` removes it.
   */
  defaultBudget?: Budget | null;
  /**
   * Runs once a turn's completion landed, whoever wrote it, before the close is answered (the
   * webhooks' outbox, lib/webhooks/events.ts). A failure is logged and the close stands, the
   * event left to the turn's intent, which the outbox's drainer delivers (lib/webhooks/intent.ts):
   * for a close by someone else (a cancel, an expired lease's) always, for the owner's
   * completion once its intent is known stored (`onClaimed` answered, else it fails).
   */
  onClosed?: ((closed: ClosedTurn) => Promise<void>) | undefined;
  /** Where the log tells what it let stand after a failure (default: console.error). */
  log?: ((message: string, details?: unknown) => void) | undefined;
  /**
   * Runs with a model turn's claim put, before its completion can exist (the webhooks' outbox
   * intent, lib/webhooks/intent.ts). A failure does not fail the claim: the owner's completion
   * runs it again before its `.done` (see ClaimLanding.intent).
   */
  onClaimed?: ((turn: IntentTurn) => Promise<void>) | undefined;
  /**
   * Runs once a completion written because a turn's lease ran out landed (failed
   * `lease_expired`: a newcomer's claim, a replay of its key, `closeIfExpired`), after
   * `onClosed`: whoever closes a dead turn takes up the inputs queued behind it
   * (lib/turn/busy.ts, pickUpAfterLeaseClose); a model turn's claim only once it stored nothing
   * after all (its record landed, its own close does). It must not throw: it schedules that work.
   */
  onLeaseClosed?: ((closed: ClosedTurn) => void) | undefined;
  /**
   * Runs when a new model turn's claim finds the session idle and its queue's signal set
   * (`signal`: its etag as listed): takes the oldest queued input up first (lib/turn/busy.ts,
   * pickUpFirst), and the claim then reads the session again. Once per claim.
   */
  onQueueWaiting?: ((scope: LogScope, signal: string) => Promise<void>) | undefined;
  /**
   * Runs once a completion written for someone other than the turn's owner landed (a cancel,
   * a close of a lapsed lease), before `onClosed`, and for the fence of a delete once the delete
   * swept the session: the turn's attempts running in this process stop at once
   * (lib/turn/running.ts), and a lapsed turn none of them runs is logged by this process, whose
   * close landed (functions/services.ts, closesByOthers). It must not throw.
   */
  onClosedByOther?: ((closed: ClosedTurn) => void) | undefined;
  /** Runs once a delete ended, with the scope it deleted: a compaction of it running here stops. Must not throw. */
  onDeleted?: ((scope: LogScope) => void) | undefined;
}

/** A model turn whose completion has just landed. */
export interface ClosedTurn {
  scope: LogScope;
  turn: number;
  status: TurnStatus;
  error?: { code: string; message: string; details?: unknown } | undefined;
  usage?: TurnUsage | undefined;
  /** What the summary of a compaction in the completed turn used (its `compaction_usage`). */
  compactionUsage?: TurnUsage | undefined;
  completedAt: string;
  /**
   * A close written for someone else (lib/session/log/lease.ts, closeTurn): when the turn's
   * record was written, and the model its stored request named, if it named one.
   */
  claimedAt?: string | undefined;
  model?: string | undefined;
  /**
   * The session's own `webhook_url` (null: the deployment's WEBHOOK_URL; undefined: not read,
   * only for `onLeaseClosed` of a log without `onClosed`).
   */
  webhookUrl: string | null | undefined;
}

export type { PackOptions, PackResult } from './pack-types.ts';

/** A background turn's lease as its runner took it (takeLease): its etag, and whether another runner held it before. */
export interface TakenLease {
  etag: string;
  takenOver: boolean;
  at: number; // when its runner set out to take it (log clock, ms): holdsLease
}
