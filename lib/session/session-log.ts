import { z } from 'zod';
import { CorruptObjectError, InvalidRequestError, NotFoundError, StorageError, TailgateError } from '../errors.ts';
import { sha256Hex } from '../hash.ts';
import { itemSchema, toolSchema, type Item, type PromptItem, type StoredItem, type Tool } from '../items.ts';
import type { ListResult, ObjectInfo, ObjectStore } from '../store/object-store.ts';
import { emptyAggregates, extendAggregates, type HistoryAggregates } from '../strategies/aggregates.ts';
import { compactCallItem, compactOutputItem } from '../strategies/compact-text.ts';
import { selectTail, tailCut } from '../strategies/select-tail.ts';
import type { TailRequirement } from '../strategies/strategy.ts';
import {
  blobKey,
  contextKey,
  doneKey,
  idempotencyKey,
  leaseKey,
  newGeneration,
  recordKey,
  recordsListPrefix,
  recordsPrefix,
  segmentKey,
  sessionConfigKey,
  sessionPrefix,
  generationSchemaPattern,
  validateId,
  viewKey,
  type LogScope,
} from './keys.ts';
import { mapLimit } from './map-limit.ts';
import { externalizePayloads, readPayload } from './payloads.ts';
import {
  contextObjectSchema,
  doneSchema,
  idempotencyClaimSchema,
  leaseSchema,
  MAX_OPEN_CALLS,
  parseStored,
  recordSchema,
  sessionConfigSchema,
  viewSchema,
  type ContextStart,
  type DoneRecord,
  type LogItem,
  type LogRecord,
  type LogView,
  type SessionConfig,
  type SessionCounts,
  type SegmentTurn,
  type TurnStatus,
  type Undelivered,
} from './records.ts';
import { buildSegment, SegmentMissingError, SegmentReader, TOOL_BLOCK, type SegmentContent } from './segment.ts';
import { SessionExistsError } from './session-exists-error.ts';
import { IdempotencyKeyReusedError, LEASE_EXPIRED, SESSION_DELETED, TURN_CANCELLED, TurnClosedError, TurnNotOpenError } from './turn-errors.ts';
import { TurnInProgressError } from './turn-in-progress-error.ts';
import { UnitCursor, type LogUnit } from './unit-cursor.ts';

/** The fields a session is created with (API.md "Sessions"); null = the deployment default. */
export interface NewSession {
  id?: string;
  instructions?: string | null;
  model?: string | null;
  strategies?: string | string[] | null;
  strategy_config?: Record<string, unknown> | null;
  tools?: Tool[] | null;
  metadata?: Record<string, unknown> | null;
}

/** A session as the log returns it: its stored config plus counts from the newest record. */
export interface SessionRecord {
  id: string;
  created_at: string;
  instructions: string | null;
  model: string | null;
  strategies: string[] | null;
  strategy_config: Record<string, unknown>;
  tools: Tool[];
  metadata: Record<string, unknown>;
  counts: SessionCounts;
}

export type { TailRequirement };

/**
 * A claimed model turn: its input is durable, its lease runs until `leaseExpiresAt` (renewed
 * by `renewLease`). The handle the pipeline passes back to every call about this turn.
 */
export interface OpenTurn {
  sessionId: string;
  /** The incarnation of the session the turn was claimed in. */
  scope: LogScope;
  session: SessionRecord;
  /** The turn's ordinal among the session's model turns (API.md `turn`). */
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
  /** Set by `readContext` when the tail read went past the view (see `needsView`). */
  readPastView: boolean;
  /** The idempotency key's SHA-256 and the request's, for a keyed turn. */
  keyHash?: string;
  requestHash?: string;
  /** Calls without an output after the input (null: not tracked in this log yet). */
  openCalls: string[] | null;
  /** Notices consumed by earlier turns that no model has seen yet (see records.ts). */
  undelivered: Undelivered;
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

/** The newest view of a log and every item after it (seq order), up to some record. */
interface Base {
  view: LogView | null;
  since: LogItem[];
}

export interface StoredOutcome {
  status: TurnStatus;
  response?: unknown;
  error?: { code: string; message: string; details?: unknown };
}

export type BeginTurnResult =
  | { kind: 'replay'; response: unknown; status: TurnStatus; error?: { code: string; message: string; details?: unknown } }
  | { kind: 'claimed'; turn: OpenTurn };



export interface SessionLogOptions {
  /** Prepended to every key (KEY_PREFIX). */
  keyPrefix?: string;
  clock?: () => Date;
  /** How long a claimed turn stays open, unless renewed, before a newcomer may close it as failed. */
  leaseMs?: number;
  /** Function outputs above this many UTF-8 bytes are stored out of line. */
  blobThreshold?: number;
  /** Packing starts once this many closed records older than the newest `keepRecords` exist. */
  packMinRecords?: number;
  /** The newest records stay unpacked (the newest always does: claims read it). */
  keepRecords?: number;
  /** A segment below this size absorbs the next records when packing. */
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
   * Runs on every read of a session's config, before it is used, and may throw: the HTTP
   * layer refuses revoked tokens here, so routes that read the config pay nothing extra.
   */
  checkConfig?: (config: SessionConfig) => void;
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
  /** Objects deleted: packed records, merged segments, leftovers of earlier crashes. */
  deleted: number;
}

const PARALLEL_GETS = 6;
/**
 * A view holds this many tool calls beyond what the strategies need when it is written (the
 * need of the epoch strategies moves by whole epochs; a view that falls short is read past).
 */
const VIEW_MARGIN_CALLS = 8;
/** A turn asks for a fresh view once its view holds this many bytes the strategies no longer need. */
const VIEW_EXCESS_BYTES = 32 * 1024;
/** `pack` also writes a view once the records after the newest one hold this many bytes. */
const VIEW_EVERY_BYTES = 64 * 1024;
/** The tail a view holds when `pack` is not told what the strategies need. */
const DEFAULT_VIEW_CALLS = 256;
/** Characters of a call key kept in a view's `call_keys`. */
const VIEW_KEY_CHARS = 12;

/** A page of items holds about this many bytes at most (at least one item). */
const MAX_PAGE_BYTES = 4 * 1024 * 1024;

const MAX_CLAIM_ATTEMPTS = 64;
const MAX_LISTING_RETRIES = 4;
/** A segment carries the messages of the history before it up to this size (JSON). */
const CARRY_BYTES = 64 * 1024;

const idempotencyKeySchema = z.string().min(1).max(256);
const strategiesSchema = z.union([z.string(), z.array(z.string().min(1))]).nullable();
const newSessionSchema = z
  .object({
    id: z.string().optional(),
    instructions: z.string().nullable().optional(),
    model: z.string().nullable().optional(),
    strategies: strategiesSchema.optional(),
    strategy_config: z.record(z.string(), z.unknown()).nullable().optional(),
    tools: z.array(toolSchema).nullable().optional(),
    metadata: z.record(z.string(), z.unknown()).nullable().optional(),
  })
  .strict();
const itemsSchema = z.array(itemSchema).min(1);
const outcomeSchema = z.object({
  status: z.enum(['completed', 'failed', 'aborted']),
  output: z.array(itemSchema),
  receipt: z.unknown(),
  response: z.unknown().optional(),
  error: z.object({ code: z.string(), message: z.string(), details: z.unknown().optional() }).strict().optional(),
});

/** What `#commit` wrote (or, for a used idempotency key, the `replay` of its turn). */
interface Commit {
  record: LogRecord;
  config: SessionConfig;
  scope: LogScope;
  previous: NonNullable<LogRecord['recent']>;
  /** Model turns: the newest view and every item after it, before the record's items. */
  base: Base | null;
  replay?: Extract<BeginTurnResult, { kind: 'replay' }>;
}

const NOTHING_UNDELIVERED: Undelivered = Object.freeze({ notices: [], lost_turns: [] }) as Undelivered;

interface Head {
  config: SessionConfig;
  scope: LogScope;
  /** The newest record and its completion, or null for a log without records. */
  newest: { record: LogRecord; done: DoneRecord | null } | null;
  /** The listing the newest record was found with, positioned after it. */
  cursor: UnitCursor;
}

/**
 * The session log on an ObjectStore (DESIGN.md "Storage"): a write-once log whose commit
 * point is a create-only put of the next record number. Nothing is rewritten per turn, a turn
 * costs a constant number of storage operations, and reads go newest first, only as far as
 * needed. `pack` writes views (what the strategies need, in one object a turn reads) and
 * packs old records into immutable segments.
 *
 * Concurrency: two writers of the same record number race on a create-only put; the loser
 * reads the log again and retries (appends) or finds the open turn (turn claims). A model
 * turn holds a lease; an expired one is closed as failed by the next writer.
 *
 * @example
 *   const log = new SessionLog(new MemoryStore());
 *   await log.create({ id: 's1' });
 *   const begun = await log.beginTurn('s1', { input: [{ type: 'message', role: 'user', content: 'hi' }] });
 */
export class SessionLog {
  readonly #store: ObjectStore;
  readonly #keyPrefix: string;
  readonly #clock: () => Date;
  readonly #leaseMs: number;
  readonly #blobThreshold: number;
  readonly #packMinRecords: number;
  readonly #keepRecords: number;
  readonly #segmentTargetBytes: number;
  readonly #generateId: () => string;
  readonly #recentRecords: number;
  readonly #recentBytes: number;
  readonly #viewEveryRecords: number;
  readonly #checkConfig: ((config: SessionConfig) => void) | undefined;

  constructor(store: ObjectStore, options: SessionLogOptions = {}) {
    this.#store = store;
    this.#keyPrefix = options.keyPrefix ?? '';
    this.#clock = options.clock ?? (() => new Date());
    this.#leaseMs = options.leaseMs ?? 300_000;
    this.#blobThreshold = options.blobThreshold ?? 8192;
    this.#packMinRecords = Math.max(1, options.packMinRecords ?? 8);
    this.#keepRecords = Math.max(1, options.keepRecords ?? 2);
    this.#segmentTargetBytes = options.segmentTargetBytes ?? 1024 * 1024;
    this.#generateId = options.generateId ?? (() => `s_${crypto.randomUUID().replaceAll('-', '')}`);
    // Enough to cover what stays unpacked when packing runs every few records.
    this.#viewEveryRecords = Math.max(1, options.viewEveryRecords ?? this.#packMinRecords);
    this.#recentRecords = Math.max(0, options.recentRecords ?? this.#keepRecords + Math.max(this.#packMinRecords, this.#viewEveryRecords) + 4);
    // Records hold their items inline, so the carry must fit outputs of a few KiB each.
    this.#recentBytes = Math.max(0, options.recentBytes ?? 1024 * 1024);
    this.#checkConfig = options.checkConfig;
  }

  /** Creates a session (create-only put of its config). An existing id: SessionExistsError. */
  async create(input: NewSession): Promise<SessionRecord> {
    const fields = parseInput(newSessionSchema, input);
    const id = validateId(fields.id ?? this.#generateId());
    const now = this.#clock();
    const config: SessionConfig = {
      format: 'tailgate.session.v1',
      id,
      generation: newGeneration(now),
      created_at: now.toISOString(),
      instructions: fields.instructions ?? null,
      model: fields.model ?? null,
      strategies: normalizeStrategies(fields.strategies),
      strategy_config: fields.strategy_config ?? {},
      tools: fields.tools ?? [],
      metadata: fields.metadata ?? {},
    };
    const written = await this.#store.put(sessionConfigKey(this.#keyPrefix, id), JSON.stringify(config), {
      onlyIfAbsent: true,
      contentType: 'application/json',
    });
    if (!written) throw new SessionExistsError(id);
    return toSessionRecord(config, { items: 0, turns: 0, tool_calls: 0 });
  }

  /** The session with its counts. A missing session: NotFoundError. */
  async get(id: string): Promise<SessionRecord> {
    const head = await this.#head(id);
    return toSessionRecord(head.config, countsOf(head.newest));
  }

  /** Where the session's current incarnation keeps its objects (reads the config). */
  async scope(id: string): Promise<LogScope> {
    return scopeOf(this.#keyPrefix, (await this.#readConfig(id)).config);
  }

  /**
   * Whether the incarnation a turn was claimed in still exists (the id was not deleted, nor
   * deleted and created again). One get of the config.
   */
  async exists(scope: LogScope): Promise<boolean> {
    const object = await this.#store.get(sessionConfigKey(scope.keyPrefix, scope.id));
    if (!object) return false;
    return scopeOf(this.#keyPrefix, parseStored(sessionConfigKey(scope.keyPrefix, scope.id), object.body, sessionConfigSchema)).generation === scope.generation;
  }

  /**
   * Changes config fields (PATCH). A conditional put (If-Match on the etag read), retried
   * when another update won in between, so no concurrent change is lost.
   */
  async update(id: string, patch: Omit<NewSession, 'id'>): Promise<SessionRecord> {
    const fields = parseInput(newSessionSchema.omit({ id: true }), patch);
    for (let attempt = 0; attempt < MAX_CLAIM_ATTEMPTS; attempt++) {
      const { config, info } = await this.#readConfig(id);
      const next: SessionConfig = { ...config };
      if (fields.instructions !== undefined) next.instructions = fields.instructions;
      if (fields.model !== undefined) next.model = fields.model;
      if (fields.strategies !== undefined) next.strategies = normalizeStrategies(fields.strategies);
      if (fields.strategy_config !== undefined) next.strategy_config = fields.strategy_config ?? {};
      if (fields.tools !== undefined) next.tools = fields.tools ?? [];
      if (fields.metadata !== undefined) next.metadata = fields.metadata ?? {};
      const written = await this.#store.put(sessionConfigKey(this.#keyPrefix, id), JSON.stringify(next), {
        ifMatch: info.etag,
        contentType: 'application/json',
      });
      if (written) return toSessionRecord(next, countsOf((await this.#newest(scopeOf(this.#keyPrefix, next))).newest));
      await backoff(attempt);
    }
    throw new StorageError(`session ${id}: too many concurrent updates`);
  }

  /**
   * Deletes a session. An open turn is closed first (`session_deleted`), so its owner's
   * completion is refused and answered 404. The config goes next: from then on the id is
   * free, and every object of the deleted incarnation is under a generation no config names,
   * so a turn or a packer still running writes only where nobody reads. Then everything under the session's prefix
   * that no current config names is deleted, page by page (the inbox too, unless the id was
   * created again meanwhile). An interrupted sweep leaves unreachable objects, which the next
   * delete of the same id removes (also one answered 404).
   */
  async delete(id: string): Promise<void> {
    const configKey = sessionConfigKey(this.#keyPrefix, id);
    let head: Head;
    try {
      head = await this.#head(id);
    } catch (error) {
      // Gone already: a delete interrupted after its first step may have left objects.
      if (error instanceof NotFoundError) await this.#sweep(id);
      throw error;
    }
    const { newest, scope } = head;
    if (newest && newest.record.kind === 'turn' && !newest.done) {
      await this.#close(scope, newest.record, { status: 'failed', error: { code: SESSION_DELETED, message: 'the session was deleted' } });
    }
    await this.#store.delete(configKey);
    await this.#sweep(id);
  }

  /** Deletes every object under a session's prefix that no current config names. */
  async #sweep(id: string): Promise<void> {
    const configKey = sessionConfigKey(this.#keyPrefix, id);
    const prefix = sessionPrefix(this.#keyPrefix, id);
    let cursor: string | undefined;
    for (;;) {
      const page = await this.#store.list(prefix, { limit: 1000, ...(cursor ? { cursor } : {}) });
      // Read after the listing: an object listed under a generation a config names now was
      // written by that incarnation, whatever happened before.
      const current = await this.#store.get(configKey);
      const generation = current ? scopeOf(this.#keyPrefix, parseStored(configKey, current.body, sessionConfigSchema)).generation : null;
      const keys = page.objects.map((object) => object.key).filter((key) => key !== configKey && (generation === null || isOtherGeneration(key.slice(prefix.length), generation)));
      if (keys.length > 0) await this.#store.delete(keys);
      if (!page.truncated || !page.cursor) break;
      cursor = page.cursor;
    }
  }

  /**
   * Appends items without a model turn (POST /items): one create-only record. Seqs are dense
   * from 1 and never reused; racing appends retry until each one commits.
   * An open model turn: TurnInProgressError.
   */
  async append(id: string, items: Item[]): Promise<{ first_seq: number; last_seq: number; record: number }> {
    const input = parseInput(itemsSchema, items);
    const { record } = await this.#commit(id, input, { kind: 'append' });
    return { first_seq: record.first_seq, last_seq: record.first_seq + input.length - 1, record: record.record };
  }

  /**
   * Begins a model turn: claims the next record (create-only) holding the input, so the input
   * is durable before this resolves. Another open turn with an unexpired lease:
   * TurnInProgressError; an expired one is closed as failed first.
   *
   * With an idempotency key, one key gives at most one stored input, whatever the
   * interleaving and wherever a request crashed: a key seen before returns the stored outcome
   * of its turn (replay) and does nothing else (its turn still open: TurnInProgressError; the
   * same key with another request: IdempotencyKeyReusedError). A key's turn is found as the
   * newest record or, once a later record exists, through `idem/<key hash>`, which every
   * close of a keyed turn writes before its completion (and no record follows an open turn).
   */
  async beginTurn(
    id: string,
    options: { input: Item[]; idempotencyKey?: string; requestHash?: string; request?: unknown },
  ): Promise<BeginTurnResult> {
    const input = parseInput(z.array(itemSchema), options.input);
    const keyHash = options.idempotencyKey === undefined ? undefined : sha256Hex(parseInput(idempotencyKeySchema, options.idempotencyKey));
    const committed = await this.#commit(id, input, {
      kind: 'turn',
      ...(keyHash ? { keyHash } : {}),
      ...(options.requestHash ? { requestHash: options.requestHash } : {}),
      ...(options.request !== undefined ? { request: options.request } : {}),
    });
    if (committed.replay) return committed.replay;
    const { record, config, previous, base: claimed, scope } = committed;
    const base = claimed ?? { view: null, since: [] };
    const { aggregates } = aggregatesOf({ view: base.view, since: [...base.since, ...record.items] });
    const session = toSessionRecord(config, record.counts);
    const turn: OpenTurn = {
      sessionId: id,
      scope,
      session,
      turn: record.turn!,
      input: record.items as StoredItem[],
      aggregates,
      leaseExpiresAt: record.lease_expires_at!,
      record: record.record,
      counts: record.counts,
      inputRecords: record.items,
      carried: previous.flatMap((group) => group.items),
      carriedFromRecord: previous[0]?.record ?? record.record,
      base,
      context: record.context ?? null,
      contextMoved: false,
      readPastView: false,
      ...(keyHash ? { keyHash } : {}),
      ...(options.requestHash ? { requestHash: options.requestHash } : {}),
      openCalls: record.open_calls ?? null,
      undelivered: record.undelivered ?? NOTHING_UNDELIVERED,
    };
    return { kind: 'claimed', turn };
  }

  /**
   * Writes the turn's lease again, `leaseMs` from now (`.lease` beside its record), so a
   * newcomer does not close it while the model is still answering. Call it every third of the
   * lease while the turn runs. A turn closed meanwhile keeps its completion: the lease object
   * is then a leftover the packer deletes.
   */
  async renewLease(turn: OpenTurn): Promise<string> {
    const expires = new Date(this.#clock().getTime() + this.#leaseMs).toISOString();
    const lease = { format: 'tailgate.lease.v1', record: turn.record, lease_expires_at: expires };
    await this.#store.put(leaseKey(turn.scope, turn.record), JSON.stringify(lease), { contentType: 'application/json' });
    turn.leaseExpiresAt = expires;
    return expires;
  }

  /**
   * Ends an open turn as failed (`turn_cancelled`), for a turn whose server died or that is
   * no longer wanted: its input stays, its owner's completion will be refused. A turn that is
   * not the open one: TurnNotOpenError (NotFoundError when it never existed).
   */
  async cancelTurn(id: string, turnNumber: number): Promise<{ turn: number; status: TurnStatus }> {
    const { newest, scope } = await this.#head(id);
    const open = newest && newest.record.kind === 'turn' && !newest.done ? newest.record : null;
    if (!open || open.turn !== turnNumber) {
      if (turnNumber > countsOf(newest).turns) throw new NotFoundError(`turn ${turnNumber} of session ${id} not found`, { id, turn: turnNumber });
      throw new TurnNotOpenError(id, turnNumber);
    }
    const done = await this.#close(scope, open, { status: 'failed', error: { code: TURN_CANCELLED, message: `turn ${turnNumber} was cancelled` } });
    if (!done) throw new TurnNotOpenError(id, turnNumber);
    return { turn: turnNumber, status: 'failed' };
  }

  /**
   * The tail view of the history for an open turn (what `selectTail(full history,
   * requirement)` returns), read newest first and only as far as needed: the suffix holding
   * `toolCalls` calls and outputs, and before it only messages and the required calls (with
   * their outputs). Usually it comes from the view and the items after it that the claim
   * read; tool items outside `requirement.wholeCalls` may then come as the strategies compact
   * them (`compacted`). Outputs stored out of line come as `output_ref` with an empty `output`.
   */
  async readContext(turn: OpenTurn, requirement: TailRequirement): Promise<PromptItem[]> {
    const floor = turn.context?.start_seq ?? 0;
    // Usually the claim has read all it takes: the newest view and what came after it.
    const fromBase = tailFromBase(turn.base, turn.inputRecords, requirement, floor);
    if (fromBase) return fromBase;
    turn.readPastView = true;
    return this.#withFreshListing(() => {
      const cursor = new UnitCursor(this.#store, recordsPrefix(turn.scope), { pageLimit: 100, below: turn.carriedFromRecord });
      return this.#readTail(turn.scope, [...turn.carried, ...turn.inputRecords], cursor, requirement, floor);
    });
  }

  /**
   * Whether the next turn would be better served by a fresh view: this turn's read went past
   * its view, or, with this turn's `output` stored, the strategies (`requirement` of the
   * aggregates then) compact or drop items the view holds whole, or need a tail it lacks (a
   * new epoch began). The caller then packs with `refresh`.
   */
  needsView(turn: OpenTurn, requirement: (aggregates: HistoryAggregates) => TailRequirement, output: readonly StoredItem[] = []): boolean {
    if (turn.readPastView) return true;
    if (turn.context || !turn.base.view) return false;
    const base = { view: turn.base.view, since: [...turn.base.since, ...turn.inputRecords, ...(output as LogItem[])] };
    const { aggregates } = aggregatesOf(base);
    const needed = requirement(aggregates);
    return viewExcessBytes(base, needed, Object.values(aggregates.repeated)) > VIEW_EXCESS_BYTES || tailFromBase(base, [], needed, 0) === null;
  }

  /**
   * Moves the context start of an open turn (an in-turn compaction): the summary is stored
   * first, create-only under `context/<inverted turn record>`, and the turn's completion
   * commits it (its `context`). A crash before the completion leaves the previous context
   * (the expired turn is closed with the context it started with). When the key is taken
   * (the same compaction ran already), the stored one wins. Updates `turn.context`.
   */
  async commitTurnContext(turn: OpenTurn, next: NewContext): Promise<ContextStart> {
    const stored = await this.#storeContext(turn.scope, turn.record, next);
    turn.context = stored;
    turn.contextMoved = true;
    return stored;
  }

  /**
   * A manual compaction (POST /compact): reads the current context back to its start and
   * hands it to `summarize`, which returns the new context start (or null: nothing to do).
   * The summary is stored create-only under `context/<inverted newest record>` (two
   * compactions from the same state store one: the loser takes the winner's), then a
   * `compact` record carrying it commits the move (create-only, skipped when a record with
   * that context or a newer one is already there). An open turn: TurnInProgressError.
   */
  async compact(id: string, summarize: (view: ContextView) => Promise<NewContext | null>): Promise<{ compacted: boolean; context: ContextStart | null }> {
    const { newest, cursor, scope } = await this.#head(id, 100);
    if (!newest) return { compacted: false, context: null };
    if (newest.record.kind === 'turn' && !newest.done) {
      const expires = await this.#leaseOf(scope, newest.record);
      if (expires > this.#clock().getTime()) throw new TurnInProgressError(id, newest.record.turn ?? 0, new Date(expires).toISOString());
    }
    const current = contextOf(newest);
    cursor.skipTo(newest.record.recent?.[0]?.record ?? newest.record.record);
    const newestItems = carriedItems(newest);
    const items = await this.#withFreshListing(() => this.#readTail(scope, newestItems, cursor, { toolCalls: 'all', seqs: [] }, current?.start_seq ?? 0));
    const next = await summarize({ items, context: current, carriedFromSeq: newestItems[0]?.seq ?? null });
    if (!next) return { compacted: false, context: current };
    const stored = await this.#storeContext(scope, newest.record.record, next);
    await this.#commit(id, [], { kind: 'compact', context: stored });
    return { compacted: true, context: stored };
  }

  /** The current context start of a session (null: never compacted). */
  async currentContext(id: string): Promise<ContextStart | null> {
    return contextOf((await this.#head(id)).newest);
  }

  async #storeContext(scope: LogScope, baseRecord: number, next: NewContext): Promise<ContextStart> {
    const key = contextKey(scope, baseRecord);
    const context: ContextStart = { ...next, base_record: baseRecord, created_at: this.#clock().toISOString() };
    let failure: { error: unknown } | null = null;
    try {
      if (await this.#store.put(key, JSON.stringify({ format: 'tailgate.context.v1', ...context }), { onlyIfAbsent: true, contentType: 'application/json' })) return context;
    } catch (error) {
      failure = { error };
    }
    // Taken (or a put whose answer was lost): whatever is stored there is the compaction.
    const existing = await this.#store.get(key);
    if (!existing) throw failure ? failure.error : new StorageError(`context ${key} was refused but is missing`);
    const { format: _format, ...stored } = parseStored(key, existing.body, contextObjectSchema);
    return stored;
  }

  /**
   * The tail view of the whole committed history for a prompt preview (no turn, no writes):
   * `requirement` is computed from the history's aggregates, which are returned too.
   */
  async previewContext(
    id: string,
    requirement: (aggregates: HistoryAggregates, context: ContextStart | null) => TailRequirement,
  ): Promise<{ items: PromptItem[]; aggregates: HistoryAggregates; context: ContextStart | null; undelivered: Undelivered; scope: LogScope }> {
    return this.#withFreshListing(async () => {
      const { newest, cursor, scope } = await this.#head(id, 100);
      if (!newest) return { items: [], aggregates: emptyAggregates(), context: null, undelivered: NOTHING_UNDELIVERED, scope };
      const context = contextOf(newest);
      const undelivered = undeliveredOf(newest);
      const base = await this.#base(scope, newest, cursor);
      const { aggregates } = aggregatesOf(base);
      const needed = requirement(aggregates, context);
      const fromBase = tailFromBase(base, [], needed, context?.start_seq ?? 0);
      if (fromBase) return { items: fromBase, aggregates, context, undelivered, scope };
      const items = await this.#readTail(scope, carriedItems(newest), this.#cursorBelow(scope, newest), needed, context?.start_seq ?? 0);
      return { items, aggregates, context, undelivered, scope };
    });
  }

  /** Fetches the payloads of items still carrying `output_ref` (at most 6 gets at a time). */
  async hydrate(scope: LogScope, items: PromptItem[]): Promise<PromptItem[]> {
    return mapLimit(items, PARALLEL_GETS, async (item) => {
      if (item.type !== 'function_call_output' || !item.output_ref) return item;
      const { output_ref: ref, ...rest } = item;
      return { ...rest, output: await readPayload(this.#store, blobKey(scope, ref.sha256), ref) };
    });
  }

  /**
   * Closes a turn with its outcome: output items get the next seqs, and the response is kept
   * for idempotent replay. A keyed turn's `idem/` object is written first. Write-once: a turn
   * closed already by someone else (its lease expired, or it was cancelled) gives
   * TurnClosedError with that reason, and nothing of this outcome is stored. A session deleted
   * meanwhile closed the turn itself: NotFoundError.
   */
  async completeTurn(
    turn: OpenTurn,
    result: {
      status: TurnStatus;
      output: Item[];
      receipt: unknown;
      response?: unknown;
      error?: { code: string; message: string; details?: unknown };
      /** Notices this turn consumed or carried that no model saw (a failed or aborted turn). */
      undelivered?: Undelivered;
    },
  ): Promise<StoredItem[]> {
    const outcome = parseInput(outcomeSchema, result);
    const createdAt = this.#clock().toISOString();
    const stored = outcome.output.map((item, index) => ({ ...item, seq: turn.counts.items + 1 + index, created_at: createdAt }) as StoredItem);
    const items = stored as LogItem[];
    const writer = crypto.randomUUID();
    const undelivered = result.undelivered && !isEmpty(result.undelivered) ? result.undelivered : null;
    const done: DoneRecord = {
      format: 'tailgate.done.v1',
      record: turn.record,
      completed_at: createdAt,
      writer,
      status: outcome.status,
      items,
      counts: {
        items: turn.counts.items + stored.length,
        turns: turn.counts.turns,
        tool_calls: turn.counts.tool_calls + stored.filter((item) => item.type === 'function_call').length,
      },
      receipt: outcome.receipt,
      ...(outcome.response !== undefined ? { response: outcome.response } : {}),
      ...(outcome.error ? { error: outcome.error } : {}),
      // Only a moved context: otherwise the record's own `context` stands.
      ...(turn.context && turn.contextMoved ? { context: turn.context } : {}),
      ...(turn.openCalls ? { open_calls: openCallsAfter(turn.openCalls, stored) } : {}),
      ...(undelivered ? { undelivered } : {}),
    };
    if (turn.keyHash) await this.#indexKey(turn.scope, turn.keyHash, turn.record, turn.requestHash);
    const key = doneKey(turn.scope, turn.record);
    let failure: { error: unknown } | null = null;
    try {
      if (await this.#store.put(key, JSON.stringify(done), { onlyIfAbsent: true, contentType: 'application/json' })) return stored;
    } catch (error) {
      failure = { error };
    }
    // Refused or failed: it may be our own write whose answer was lost.
    const existing = await this.#store.get(key);
    if (existing) {
      const closed = parseStored(key, existing.body, doneSchema);
      if (closed.writer === writer) return stored;
      if (closed.error?.code === SESSION_DELETED) throw new NotFoundError(`session ${turn.sessionId} was deleted during turn ${turn.turn}`, { id: turn.sessionId });
      throw new TurnClosedError(turn.sessionId, turn.turn, closed.error?.code === TURN_CANCELLED ? TURN_CANCELLED : LEASE_EXPIRED);
    }
    if (failure) throw failure.error;
    throw new TurnClosedError(turn.sessionId, turn.turn, LEASE_EXPIRED);
  }

  /**
   * A page of items, newest first: those with seq < `before` (all when absent), at most
   * `limit` (1..1000) and about MAX_PAGE_BYTES of items (at least one), with payloads whole.
   * Reads from the tail, so the newest page costs the same however long the session is.
   */
  async listItems(id: string, options: { before?: number; limit: number }): Promise<{ items: StoredItem[]; has_more: boolean; next_before: number | null }> {
    const limit = parseInput(z.number().int().min(1).max(1000), options.limit);
    const before = options.before === undefined ? undefined : parseInput(z.number().int().positive(), options.before);
    const { items, scope } = await this.#withFreshListing(async () => {
      const { newest, cursor, scope } = await this.#head(id, 100);
      const upper = before === undefined ? Number.POSITIVE_INFINITY : before - 1;
      const page: LogItem[] = [];
      let bytes = 0;
      let lowest = Number.POSITIVE_INFINITY;
      const full = () => page.length >= limit || bytes >= MAX_PAGE_BYTES;
      const take = (items: readonly LogItem[]) => {
        for (let index = items.length - 1; index >= 0 && !full(); index--) {
          const item = items[index]!;
          if (item.seq > upper || item.seq >= lowest) continue;
          const size = itemBytes(item);
          if (page.length > 0 && bytes + size > MAX_PAGE_BYTES) {
            bytes = MAX_PAGE_BYTES;
            break;
          }
          page.push(item);
          bytes += size;
        }
        if (items.length > 0) lowest = Math.min(lowest, items[0]!.seq);
      };
      if (newest) {
        take(carriedItems(newest));
        cursor.skipTo(newest.record.recent?.[0]?.record ?? newest.record.record);
      }
      for (let unit = !full() && newest ? await cursor.next() : null; unit && !full(); unit = await cursor.next()) {
        const wanted = limit - page.length;
        if (unit.kind === 'record') {
          const { record, done } = await this.#readRecord(unit);
          take([...record.items, ...(done?.items ?? [])]);
          continue;
        }
        const top = Math.min(unit.lastSeq, lowest - 1);
        if (unit.firstSeq > upper || top < unit.firstSeq) continue;
        const high = Math.min(upper, top);
        const low = Math.max(unit.firstSeq, high - wanted + 1);
        lowest = Math.min(lowest, high + 1);
        take(await this.#segmentRange(unit, low, high));
        lowest = low;
      }
      return { items: page, scope };
    });
    const hydrated = (await this.hydrate(scope, items)) as StoredItem[];
    const lowest = hydrated.length > 0 ? hydrated[hydrated.length - 1]!.seq : null;
    const hasMore = lowest !== null && lowest > 1;
    return { items: hydrated, has_more: hasMore, next_before: hasMore ? lowest : null };
  }

  /**
   * Writes a view of the newest closed record when one is due (see `#writeViewIfDue`), then
   * packs closed records older than the newest `keepRecords` into one immutable segment once
   * at least `packMinRecords` of them exist (any number after a new view), merging into the
   * newest segment while it is below the target size, and deletes what the segment replaces.
   * Safe to run concurrently and to interrupt anywhere: readers prefer a segment over the
   * records it covers, and the next run deletes leftovers. Call it after a turn (e.g. in the
   * background).
   */
  async pack(sessionId: string, options: PackOptions = {}): Promise<PackResult> {
    const scope = scopeOf(this.#keyPrefix, (await this.#readConfig(sessionId)).config);
    const view = await this.#withFreshListing(() => this.#writeViewIfDue(scope, options.requirement, options.refresh));
    // With a new view, what it covers is packed now, however little: only the records after
    // the view are carried by the next ones, so the older ones should not stay loose.
    const packMinRecords = view ? 1 : this.#packMinRecords;
    const prefix = recordsPrefix(scope);
    const cursor = new UnitCursor(this.#store, prefix);
    const records: Extract<LogUnit, { kind: 'record' }>[] = [];
    let segment: Extract<LogUnit, { kind: 'segment' }> | null = null;
    for (let unit = await cursor.next(); unit; unit = await cursor.next()) {
      if (unit.kind === 'segment') {
        segment = unit;
        break;
      }
      records.push(unit);
    }
    const leftovers = [...cursor.leftovers];
    const candidates = records.slice(this.#keepRecords).reverse();
    let result: PackResult = { packed: false, deleted: 0 };
    if (candidates.length >= packMinRecords) {
      try {
        result = await this.#packRecords(scope, candidates, segment, packMinRecords);
      } catch (error) {
        if (!(error instanceof SegmentMissingError || error instanceof RecordMissingError)) throw error;
      }
    }
    if (leftovers.length > 0) {
      await this.#store.delete(leftovers);
      result = { ...result, deleted: result.deleted + leftovers.length };
    }
    return view ? { ...result, view } : result;
  }

  /**
   * Writes the view of the newest closed record when `viewEveryRecords` records have come
   * since the newest view, or VIEW_EVERY_BYTES of items, or a compaction, or when asked to
   * (`refresh`: see `needsView`) (create-only; a view already there is kept). Its tail holds what
   * `requirement` asks for now plus a margin, so the next turns read it and not the segments.
   * Returns the view's key, or null when none was due.
   */
  async #writeViewIfDue(scope: LogScope, requirement: PackOptions['requirement'], refresh = false): Promise<string | null> {
    const { newest, cursor } = await this.#newest(scope, 100);
    if (!newest || (newest.record.kind === 'turn' && !newest.done)) return null;
    const listed = cursor.views[0]?.record ?? 0;
    if (newest.record.record === listed) return null;
    // A compaction since the newest view makes its tail stale (it starts at the old context start).
    const compacted = (contextOf(newest)?.base_record ?? 0) >= listed && listed > 0;
    // So does a carry grown large (a burst of big appends): every turn would read it.
    const grown = JSON.stringify(recordGroups(newest).filter((group) => group.record > listed)).length > VIEW_EVERY_BYTES;
    const due = newest.record.record - listed >= this.#viewEveryRecords || compacted || grown || refresh;
    if (!due) return null;
    const base = await this.#base(scope, newest, cursor);
    const { aggregates, newKeys } = aggregatesOf(base);
    const lastSeq = countsOf(newest).items;
    const context = contextOf(newest);
    // With a compacted context, the tail starts at the context start.
    const fromSeq = context?.start_seq ?? 1;
    let tail: LogView['tail'] = null;
    const needed = requirement ? requirement(aggregates, context) : { toolCalls: DEFAULT_VIEW_CALLS, seqs: [] };
    if (needed.toolCalls !== 'all' || context) {
      const pinned = Object.values(aggregates.repeated);
      const toolCalls = needed.toolCalls === 'all' ? 'all' : needed.toolCalls + VIEW_MARGIN_CALLS;
      const wanted: TailRequirement = {
        toolCalls,
        seqs: [...new Set([...needed.seqs, ...pinned])].sort((a, b) => a - b),
        ...(needed.wholeCalls !== undefined ? { wholeCalls: needed.wholeCalls } : {}),
      };
      // From the newest view when it holds enough (without the margin if need be), else from the log.
      const withMargin = tailFromBase(base, [], wanted, fromSeq);
      const withoutMargin = withMargin ? null : tailFromBase(base, [], { ...wanted, toolCalls: needed.toolCalls }, fromSeq);
      const held = withMargin || !withoutMargin ? toolCalls : needed.toolCalls;
      const items = (withMargin ?? withoutMargin ?? (await this.#readTail(scope, carriedItems(newest), this.#cursorBelow(scope, newest), wanted, fromSeq))) as LogItem[];
      const cut = held === 'all' ? null : tailCut(items, held);
      const windowStart = cut === null ? fromSeq : (items[cut]?.seq ?? lastSeq + 1);
      tail = { from_seq: fromSeq, window_start: windowStart, items: await this.#viewItems(scope, items, needed.wholeCalls, pinned) };
    }
    const view: LogView = {
      format: 'tailgate.view.v1',
      record: newest.record.record,
      last_seq: lastSeq,
      aggregates,
      call_keys: (base.view?.call_keys ?? '') + newKeys.map((key) => key.slice(0, VIEW_KEY_CHARS)).join(''),
      tail,
      created_at: this.#clock().toISOString(),
    };
    const key = viewKey(scope, view.record);
    await this.#store.put(key, JSON.stringify(view), { onlyIfAbsent: true, contentType: 'application/json' });
    return key;
  }

  /**
   * A view's tail as it is stored: tool items of the newest `wholeCalls` calls (all when
   * undefined) and of the calls with `pinned` seqs whole and inline, since the strategies may
   * show them whole; the others as the strategies compact them (`compactCallItem`,
   * `compactOutputItem`: the same bytes a prompt holds), since they only compact or drop them.
   */
  async #viewItems(scope: LogScope, items: LogItem[], wholeCalls: number | undefined, pinned: number[]): Promise<LogItem[]> {
    const whole = wholeCallIds(items, wholeCalls, pinned);
    return mapLimit(items, PARALLEL_GETS, async (item) => {
      if (item.type === 'message') return item;
      if (whole === null || whole.has(item.call_id)) {
        return item.type === 'function_call_output' && item.output_ref ? ((await this.hydrate(scope, [item]))[0] as LogItem) : item;
      }
      return (item.type === 'function_call' ? compactCallItem(item) : compactOutputItem(item)) as LogItem;
    });
  }

  async #packRecords(
    scope: LogScope,
    candidates: Extract<LogUnit, { kind: 'record' }>[],
    segment: Extract<LogUnit, { kind: 'segment' }> | null,
    packMinRecords: number,
  ): Promise<PackResult> {
    const read = await mapLimit(candidates, PARALLEL_GETS, (unit) => this.#readRecord(unit));
    // Stop before the first turn that is still open: only closed records are packed.
    const openAt = read.findIndex(({ record, done }) => record.kind === 'turn' && !done);
    const closed = openAt < 0 ? read : read.slice(0, openAt);
    if (closed.length < packMinRecords) return { packed: false, deleted: 0 };
    const merge = segment && segment.lastRecord === closed[0]!.record.record - 1 && segment.size < this.#segmentTargetBytes ? segment : null;
    const base: SegmentContent = merge
      ? await new SegmentReader(this.#store, merge.key, merge).content()
      : { firstRecord: closed[0]!.record.record, lastRecord: 0, items: [], turns: [], carried: await this.#carriedBefore(segment, closed[0]!.record.record) };
    const content: SegmentContent = { ...base, items: [...base.items], turns: [...base.turns] };
    for (const { record, done } of closed) {
      content.items.push(...record.items, ...(done?.items ?? []));
      if (record.kind === 'turn' && done) content.turns.push(segmentTurnOf(record, done));
      content.lastRecord = record.record;
    }
    // Records hold outputs inline; a segment keeps the large ones out of line.
    content.items = await externalizePayloads(this.#store, content.items, this.#blobThreshold, (sha) => blobKey(scope, sha));
    const first = content.items[0];
    const last = content.items[content.items.length - 1];
    const range = {
      firstRecord: content.firstRecord,
      lastRecord: content.lastRecord,
      firstSeq: first ? first.seq : closed[0]!.record.first_seq,
      lastSeq: last ? last.seq : closed[0]!.record.first_seq - 1,
    };
    const key = segmentKey(scope, range);
    await this.#store.put(key, buildSegment(content), { onlyIfAbsent: true, contentType: 'application/x-ndjson' });
    const replaced = closed.flatMap(({ record, done }) => {
      const keys = [recordKey(scope, record.record)];
      if (done) keys.push(doneKey(scope, record.record));
      return keys;
    });
    for (const unit of candidates.slice(0, closed.length)) if (unit.leaseKey) replaced.push(unit.leaseKey);
    if (merge) replaced.push(merge.key);
    await this.#store.delete(replaced);
    return { packed: true, segment: key, records: closed.length, deleted: replaced.length };
  }

  /**
   * The messages a new segment starting at `firstRecord` carries: all messages before it,
   * taken from the previous segment (its carried ones plus its own), within CARRY_BYTES.
   */
  async #carriedBefore(previous: Extract<LogUnit, { kind: 'segment' }> | null, firstRecord: number): Promise<LogItem[] | null> {
    if (!previous) return firstRecord === 1 ? [] : null;
    if (previous.lastRecord !== firstRecord - 1) return null;
    const reader = new SegmentReader(this.#store, previous.key, previous, 8 * 1024);
    const carried = await reader.carriedMessages();
    if (carried === null) return null;
    const all = [...carried, ...(await reader.messages())];
    return JSON.stringify(all).length <= CARRY_BYTES ? all : null;
  }

  // --- claims ---

  /**
   * Writes the next record (create-only) holding `input`. Closes an expired open turn first;
   * an unexpired one is TurnInProgressError. Retries when another writer took the number.
   * A keyed turn whose key was used already gets `replay` instead (see beginTurn).
   */
  async #commit(
    id: string,
    input: Item[],
    options: { kind: 'append' | 'turn' | 'compact'; keyHash?: string; requestHash?: string; request?: unknown; context?: ContextStart },
  ): Promise<Commit> {
    const writer = crypto.randomUUID();
    let failure: { error: unknown } | null = null;
    for (let attempt = 0; attempt < MAX_CLAIM_ATTEMPTS; attempt++) {
      const head = await this.#head(id, 100);
      const { scope } = head;
      let newest = head.newest;
      // A put that failed or lost a race may still have landed (a lost answer, an adapter's
      // retry meeting its own write): then the newest record is ours, and nothing is repeated.
      if (newest && newest.record.writer === writer) {
        const own = newest.record;
        const base = options.kind === 'turn' ? before(await this.#base(scope, { record: own, done: null }, head.cursor), own.first_seq) : null;
        return { record: own, config: head.config, previous: own.recent ?? [], base, scope };
      }
      if (failure) throw failure.error;
      if (options.keyHash) {
        // The head is read before the index: a keyed turn older than the newest record was
        // closed, so indexed, before that record was written.
        const replay = await this.#findKey(scope, newest, options.keyHash, options.requestHash);
        if (replay) return { replay, record: newest!.record, config: head.config, previous: [], base: null, scope };
      }
      if (newest && newest.record.kind === 'turn' && !newest.done) {
        const open = newest.record;
        const expires = await this.#leaseOf(scope, open);
        if (expires > this.#clock().getTime()) throw new TurnInProgressError(id, open.turn ?? 0, new Date(expires).toISOString());
        const done = await this.#close(scope, open, { status: 'failed', error: { code: LEASE_EXPIRED, message: `turn ${open.turn ?? 0} did not complete before its lease expired` } });
        if (!done) continue;
        newest = { record: open, done };
      }
      const current = contextOf(newest);
      // A compaction committed already (by a concurrent caller), or overtaken by a newer one.
      if (options.kind === 'compact' && newest && current && options.context && current.base_record >= options.context.base_record) {
        return { record: newest.record, config: head.config, previous: newest.record.recent ?? [], base: null, scope };
      }
      const context = options.context ?? current;
      const counts = countsOf(newest);
      const openCalls = openCallsOf(newest);
      const openAfter = openCalls === null ? null : checkCalls(input, openCalls);
      // A model turn reads the newest view and what follows it before committing, so a
      // corrupt one fails the claim with nothing stored.
      let base: Base | null = null;
      if (options.kind === 'turn') {
        try {
          base = newest ? await this.#base(scope, newest, head.cursor) : { view: null, since: [] };
        } catch (error) {
          // Packed away since the listing: list again.
          if (error instanceof SegmentMissingError || error instanceof RecordMissingError) continue;
          throw error;
        }
      }
      const now = this.#clock();
      const createdAt = now.toISOString();
      const firstSeq = counts.items + 1;
      const items = input.map((item, index) => ({ ...item, seq: firstSeq + index, created_at: createdAt }) as LogItem);
      const number = (newest?.record.record ?? 0) + 1;
      const recent = newest ? this.#carry(newest, context?.start_seq, head.cursor.views.find((view) => view.record <= newest!.record.record)?.record ?? 0) : [];
      const turn = options.kind === 'turn' ? counts.turns + 1 : undefined;
      const undelivered = undeliveredOf(newest);
      const record: LogRecord = {
        format: 'tailgate.record.v1',
        record: number,
        kind: options.kind,
        created_at: createdAt,
        writer,
        first_seq: firstSeq,
        items,
        counts: {
          items: counts.items + items.length,
          turns: turn ?? counts.turns,
          tool_calls: counts.tool_calls + items.filter((item) => item.type === 'function_call').length,
        },
        ...(recent.length > 0 ? { recent } : {}),
        ...(turn !== undefined ? { turn, lease_expires_at: new Date(now.getTime() + this.#leaseMs).toISOString() } : {}),
        ...(options.keyHash ? { idempotency_key_sha256: options.keyHash } : {}),
        ...(options.keyHash && options.requestHash ? { request_sha256: options.requestHash } : {}),
        ...(options.request !== undefined ? { request: options.request } : {}),
        ...(context ? { context } : {}),
        ...(openAfter ? { open_calls: openAfter } : {}),
        ...(isEmpty(undelivered) ? {} : { undelivered }),
      };
      let put: ObjectInfo | null;
      try {
        put = await this.#store.put(recordKey(scope, number), JSON.stringify(record), { onlyIfAbsent: true, contentType: 'application/json' });
      } catch (error) {
        failure = { error };
        continue;
      }
      if (put) {
        // The records the claim has read (carried, or at least the previous one): the tail read
        // continues below them with the claim's own listing.
        const previous = recent.length > 0 || !newest ? recent : recordGroups(newest).slice(-1);
        return { record, config: head.config, previous, base, scope };
      }
      await backoff(attempt);
    }
    throw new StorageError(`session ${id}: too many concurrent writers`);
  }

  /**
   * What the record after `newest` carries: whole records after the newest view listed
   * (`viewRecord`; a turn reads the view anyway), newest first, within budget. With a
   * compacted context (`floor`: its start), every record back to the context start within the
   * byte budget, however many: then a turn reads its whole context from the newest record.
   */
  #carry(newest: { record: LogRecord; done: DoneRecord | null }, floor: number | undefined, viewRecord: number): NonNullable<LogRecord['recent']> {
    const groups = recordGroups(newest).filter(
      (group) => floor !== undefined || group.record > viewRecord,
    );
    const kept: NonNullable<LogRecord['recent']> = [];
    let bytes = 0;
    let reachedFloor = false;
    const wanted = () => (floor === undefined ? kept.length < this.#recentRecords : !reachedFloor || kept.length < this.#recentRecords);
    for (let index = groups.length - 1; index >= 0 && wanted(); index--) {
      const first = groups[index]!.items[0];
      if (floor !== undefined && first !== undefined && first.seq <= floor) reachedFloor = true;
      bytes += JSON.stringify(groups[index]!.items).length;
      if (bytes > this.#recentBytes) break;
      kept.unshift(groups[index]!);
    }
    return kept;
  }

  /**
   * Writes the completion of `record` for someone other than its owner (an expired lease, a
   * cancel), create-only; null when it was closed already. A keyed turn is indexed first.
   * The turn may have consumed notices before it died: the completion names it in
   * `undelivered.lost_turns`, so the next turn looks for them.
   */
  async #close(scope: LogScope, record: LogRecord, outcome: StoredOutcome): Promise<DoneRecord | null> {
    if (record.idempotency_key_sha256) await this.#indexKey(scope, record.idempotency_key_sha256, record.record, record.request_sha256);
    const carried = record.undelivered ?? NOTHING_UNDELIVERED;
    const undelivered: Undelivered = {
      notices: carried.notices,
      lost_turns: record.turn !== undefined ? [...carried.lost_turns, { turn: record.turn, since: record.created_at }] : carried.lost_turns,
    };
    const done: DoneRecord = {
      format: 'tailgate.done.v1',
      record: record.record,
      completed_at: this.#clock().toISOString(),
      status: outcome.status,
      items: [],
      counts: record.counts,
      ...(outcome.error ? { error: outcome.error } : {}),
      ...(record.open_calls ? { open_calls: record.open_calls } : {}),
      ...(isEmpty(undelivered) ? {} : { undelivered }),
    };
    const put = await this.#store.put(doneKey(scope, record.record), JSON.stringify(done), {
      onlyIfAbsent: true,
      contentType: 'application/json',
    });
    return put ? done : null;
  }

  /** When an open turn's lease runs out (ms): its record's, or the renewed one beside it. */
  async #leaseOf(scope: LogScope, record: LogRecord): Promise<number> {
    const claimed = Date.parse(record.lease_expires_at ?? '');
    if (claimed > this.#clock().getTime()) return claimed;
    const key = leaseKey(scope, record.record);
    const object = await this.#store.get(key);
    if (!object) return claimed;
    const lease = parseStored(key, object.body, leaseSchema);
    return Math.max(claimed, Date.parse(lease.lease_expires_at));
  }

  // --- idempotency ---

  /** `idem/<key hash>` -> the record of a keyed turn (create-only; a second write changes nothing). */
  async #indexKey(scope: LogScope, keyHash: string, record: number, requestHash: string | undefined): Promise<void> {
    const claim = { format: 'tailgate.idempotency.v1', record, ...(requestHash ? { request_sha256: requestHash } : {}) };
    await this.#store.put(idempotencyKey(scope, keyHash), JSON.stringify(claim), { onlyIfAbsent: true, contentType: 'application/json' });
  }

  /**
   * The outcome of the turn a key was used for, or null when it was not used: the newest
   * record carries the key (open: TurnInProgressError while its lease runs), or `idem/` names
   * an older record. Another request under the same key: IdempotencyKeyReusedError.
   */
  async #findKey(scope: LogScope, newest: Head['newest'], keyHash: string, requestHash: string | undefined): Promise<Extract<BeginTurnResult, { kind: 'replay' }> | null> {
    let outcome: StoredOutcome;
    if (newest && newest.record.idempotency_key_sha256 === keyHash) {
      checkRequest(newest.record.request_sha256, requestHash, newest.record.turn ?? 0);
      outcome = newest.done ?? (await this.#closeIfExpired(scope, newest.record));
    } else {
      const claimKey = idempotencyKey(scope, keyHash);
      const claim = await this.#store.get(claimKey);
      if (!claim) return null;
      const { record: number, request_sha256: stored } = parseStored(claimKey, claim.body, idempotencyClaimSchema);
      const found = await this.#withFreshListing(() => this.#outcome(scope, number, claimKey));
      checkRequest(stored, requestHash, found.turn);
      outcome = found;
    }
    return { kind: 'replay', response: outcome.response ?? null, status: outcome.status, ...(outcome.error ? { error: outcome.error } : {}) };
  }

  /** An open turn's outcome once its lease has run out (closed now); TurnInProgressError before. */
  async #closeIfExpired(scope: LogScope, record: LogRecord): Promise<StoredOutcome> {
    const expires = await this.#leaseOf(scope, record);
    if (expires > this.#clock().getTime()) throw new TurnInProgressError(scope.id, record.turn ?? 0, new Date(expires).toISOString());
    const message = `turn ${record.turn ?? 0} did not complete before its lease expired`;
    const done = await this.#close(scope, record, { status: 'failed', error: { code: LEASE_EXPIRED, message } });
    if (done) return done;
    const key = doneKey(scope, record.record);
    const object = await this.#store.get(key);
    if (!object) throw new CorruptObjectError(key, 'refused as taken but missing');
    return parseStored(key, object.body, doneSchema);
  }

  /** The stored outcome of model turn record `number`, from its completion or from its segment. */
  async #outcome(scope: LogScope, number: number, claimKey: string): Promise<StoredOutcome & { turn: number }> {
    const [recordObject, doneObject] = await Promise.all([this.#store.get(recordKey(scope, number)), this.#store.get(doneKey(scope, number))]);
    const record = recordObject ? parseStored(recordKey(scope, number), recordObject.body, recordSchema) : null;
    if (doneObject) return { ...parseStored(doneKey(scope, number), doneObject.body, doneSchema), turn: record?.turn ?? 0 };
    if (record) return { ...(await this.#closeIfExpired(scope, record)), turn: record.turn ?? 0 };
    const cursor = new UnitCursor(this.#store, recordsPrefix(scope), { pageLimit: 100 });
    for (let unit = await cursor.next(); unit; unit = await cursor.next()) {
      if (unit.kind !== 'segment' || unit.firstRecord > number || unit.lastRecord < number) continue;
      const turn = await new SegmentReader(this.#store, unit.key, unit).turn(number);
      if (turn) return turn;
      break;
    }
    throw new CorruptObjectError(claimKey, `names turn record ${number}, which is missing`);
  }

  // --- reading ---

  /**
   * The newest view listed by `cursor` (at or below the newest record) and every item after
   * it up to the newest record: from what the newest record carries, and from the log (records
   * or segments, via `cursor`) for the records it does not carry. Without a view, the whole log.
   */
  async #base(scope: LogScope, newest: NonNullable<Head['newest']>, cursor: UnitCursor): Promise<Base> {
    let view: LogView | null = null;
    for (const listed of cursor.views) {
      if (listed.record > newest.record.record) continue;
      view = await this.#readView(listed.key, listed.record);
      // Deleted since the listing (a newer one replaced it): an older one still serves.
      if (view) break;
    }
    const lastSeq = view?.last_seq ?? 0;
    const viewRecord = view?.record ?? 0;
    if (viewRecord === newest.record.record && lastSeq !== countsOf(newest).items) {
      throw new CorruptObjectError(viewKey(scope, viewRecord), `ends at seq ${lastSeq}, its record at ${countsOf(newest).items}`);
    }
    const groups = recordGroups(newest).filter(
      (group) => group.record > viewRecord,
    );
    const carried = groups.flatMap((group) => group.items);
    const older: LogItem[][] = [];
    let low = carried[0]?.seq ?? countsOf(newest).items + 1;
    if (low > lastSeq + 1 && groups.length > 0) {
      cursor.skipTo(groups[0]!.record);
      for (let unit = await cursor.next(); unit && low > lastSeq + 1; unit = await cursor.next()) {
        if (unit.kind === 'record') {
          const { record, done } = await this.#readRecord(unit);
          const items = [...record.items, ...(done?.items ?? [])].filter((item) => item.seq > lastSeq && item.seq < low);
          older.push(items);
          low = Math.min(low, record.first_seq);
          continue;
        }
        const top = Math.min(unit.lastSeq, low - 1);
        const bottom = Math.max(unit.firstSeq, lastSeq + 1);
        if (top >= bottom) older.push(await this.#segmentRange(unit, bottom, top));
        low = Math.min(low, unit.firstSeq);
      }
    }
    const since = [...older.reverse().flat(), ...carried];
    checkDense(recordsPrefix(scope), since, lastSeq + 1);
    return { view, since };
  }

  /** A view, parsed and checked; null when it is gone. */
  async #readView(key: string, record: number): Promise<LogView | null> {
    const object = await this.#store.get(key);
    if (!object) return null;
    const view = parseStored(key, object.body, viewSchema);
    if (view.record !== record) throw new CorruptObjectError(key, `holds the view of record ${view.record}`);
    if (view.tail) checkTail(key, view.tail.items, view.tail.from_seq, view.last_seq);
    return view;
  }

  /** A fresh listing that starts below the records `newest` carries (and below `newest`). */
  #cursorBelow(scope: LogScope, newest: NonNullable<Head['newest']>): UnitCursor {
    return new UnitCursor(this.#store, recordsPrefix(scope), { pageLimit: 100, below: newest.record.recent?.[0]?.record ?? newest.record.record });
  }

  async #readConfig(id: string): Promise<{ config: SessionConfig; info: ObjectInfo }> {
    const key = sessionConfigKey(this.#keyPrefix, id);
    const object = await this.#store.get(key);
    if (!object) throw new NotFoundError(`session ${id} not found`, { id });
    const config = parseStored(key, object.body, sessionConfigSchema);
    if (config.id !== id) throw new CorruptObjectError(key, `holds session ${config.id}`);
    this.#checkConfig?.(config);
    return { config, info: object };
  }

  /**
   * The config and the newest record (with its completion). The first listing page is
   * requested together with the config: it lists every generation's records, the newest
   * generation first, and the config then says which one is the session's.
   */
  async #head(id: string, pageLimit = 3): Promise<Head> {
    const listPrefix = recordsListPrefix(this.#keyPrefix, id);
    const firstPage = this.#store.list(listPrefix, { limit: pageLimit });
    // Settled either way, so a missing session does not leave the listing's failure unhandled.
    firstPage.catch(() => undefined);
    const { config } = await this.#readConfig(id);
    const scope = scopeOf(this.#keyPrefix, config);
    return { config, scope, ...(await this.#newest(scope, pageLimit, { listPrefix, firstPage })) };
  }

  async #newest(scope: LogScope, pageLimit = 3, prefetched?: { listPrefix: string; firstPage: Promise<ListResult> }): Promise<Omit<Head, 'config' | 'scope'>> {
    let first = prefetched;
    return this.#withFreshListing(async () => {
      // A retry lists again.
      const cursor = new UnitCursor(this.#store, recordsPrefix(scope), { pageLimit, ...(first ?? {}) });
      first = undefined;
      const unit = await cursor.next();
      if (!unit) return { newest: null, cursor };
      if (unit.kind === 'segment') throw new CorruptObjectError(unit.key, 'the newest record is packed; the log lost its head');
      return { newest: await this.#readRecord(unit), cursor };
    });
  }

  async #readRecord(unit: Extract<LogUnit, { kind: 'record' }>): Promise<{ record: LogRecord; done: DoneRecord | null }> {
    const [recordObject, doneObject] = await Promise.all([
      this.#store.get(unit.key),
      unit.doneKey ? this.#store.get(unit.doneKey) : Promise.resolve(null),
    ]);
    if (!recordObject) throw new RecordMissingError(unit.key);
    const record = parseStored(unit.key, recordObject.body, recordSchema);
    if (record.record !== unit.record) throw new CorruptObjectError(unit.key, `holds record ${record.record}`);
    checkDense(unit.key, record.items, record.first_seq);
    let done: DoneRecord | null = null;
    if (unit.doneKey) {
      if (!doneObject) throw new RecordMissingError(unit.doneKey);
      done = parseStored(unit.doneKey, doneObject.body, doneSchema);
      if (done.record !== unit.record) throw new CorruptObjectError(unit.doneKey, `completes record ${done.record}`);
      checkDense(unit.doneKey, done.items, record.first_seq + record.items.length);
    }
    return { record, done };
  }

  /** Items of a segment with seq in [low, high], in seq order. */
  async #segmentRange(unit: Extract<LogUnit, { kind: 'segment' }>, low: number, high: number): Promise<LogItem[]> {
    const reader = new SegmentReader(this.#store, unit.key, unit);
    const index = await reader.index();
    const seqs = await reader.toolSeqs();
    const from = lowerBound(seqs, low);
    const to = lowerBound(seqs, high + 1);
    const [messages, tools] = await Promise.all([reader.messages(), reader.tools(from, to, high === index.last_seq)]);
    const items = [...messages.filter((item) => item.seq >= low && item.seq <= high), ...tools].sort((a, b) => a.seq - b.seq);
    checkDense(unit.key, items, low);
    if (items.length !== high - low + 1) throw new CorruptObjectError(unit.key, 'segment does not hold its seq range');
    return items;
  }

  /**
   * The tail walk behind readContext and previewContext. `newest` are the items newer than
   * every unit of `cursor` (seq order). Collects the suffix until it holds enough calls and
   * outputs, then only messages, required calls and candidate outputs for them.
   */
  async #readTail(scope: LogScope, newest: readonly LogItem[], cursor: UnitCursor, requirement: TailRequirement, floor = 0): Promise<PromptItem[]> {
    const needed = requirement.toolCalls;
    const required = new Set(requirement.seqs);
    const suffix: LogItem[] = [];
    const before: LogItem[] = [];
    let cutSeq = needed !== 'all' && needed <= 0 ? Number.POSITIVE_INFINITY : 0;
    let calls = 0;
    let outputs = 0;
    const visit = (item: LogItem) => {
      // Nothing before the current context start is read into a prompt.
      if (item.seq < floor) return;
      if (cutSeq > 0) {
        if (item.type === 'message' || item.type === 'function_call_output' || required.has(item.seq)) before.push(item);
        return;
      }
      suffix.push(item);
      if (item.type === 'function_call') calls += 1;
      else if (item.type === 'function_call_output') outputs += 1;
      if (needed !== 'all' && calls >= needed && outputs >= needed) cutSeq = item.seq;
    };
    for (let index = newest.length - 1; index >= 0; index--) visit(newest[index]!);
    let lowest = newest.length > 0 ? newest[0]!.seq : Number.POSITIVE_INFINITY;
    // Required calls found in segments, and the segments walked (newest first) for their outputs.
    const pendingCalls: { call: LogItem & { type: 'function_call' }; segment: number }[] = [];
    const segments: { reader: SegmentReader; orphans: Record<string, number>; seqs: number[]; loaded: Map<number, LogItem> }[] = [];
    let block = 1;
    for (let unit = lowest > floor ? await cursor.next() : null; unit && lowest > floor; unit = await cursor.next()) {
      if (unit.kind === 'record') {
        const { record, done } = await this.#readRecord(unit);
        const items = [...record.items, ...(done?.items ?? [])];
        for (let index = items.length - 1; index >= 0; index--) if (items[index]!.seq < lowest) visit(items[index]!);
        if (items.length > 0) lowest = Math.min(lowest, items[0]!.seq);
        continue;
      }
      // A segment may reach over items seen already (carried by a newer record): clip it.
      const top = Math.min(unit.lastSeq, lowest - 1);
      if (top < unit.firstSeq) continue;
      lowest = unit.firstSeq;
      // Past the cut only the index and the messages (at the end) are wanted: start small.
      const reader = new SegmentReader(this.#store, unit.key, unit, cutSeq > 0 ? 8 * 1024 : undefined);
      const index = await reader.index();
      const messages = (await reader.messages()).filter((item) => item.seq <= top);
      const messageBySeq = new Map(messages.map((item) => [item.seq, item]));
      const toolSeqs = await reader.toolSeqs();
      const loaded = new Map<number, LogItem>();
      let position = lowerBound(toolSeqs, top + 1);
      let seq = top;
      for (; seq >= Math.max(index.first_seq, floor) && cutSeq === 0; seq--) {
        const message = messageBySeq.get(seq);
        if (message) {
          visit(message);
          continue;
        }
        position -= 1;
        if (position < 0 || toolSeqs[position] !== seq) throw new CorruptObjectError(unit.key, `segment does not hold seq ${seq}`);
        if (!loaded.has(position)) {
          // At least as many tool items as calls or outputs are still missing, never fewer than before.
          block = Math.max(block, needed === 'all' ? position + 1 : Math.max(needed - calls, needed - outputs, 1));
          const from = Math.max(0, position + 1 - block);
          const tools = await reader.tools(from, position + 1, true);
          tools.forEach((item, offset) => loaded.set(from + offset, item));
        }
        visit(loaded.get(position)!);
      }
      if (cutSeq === 0) continue;
      // Before the cut in this segment: messages, required calls, and their outputs.
      for (const message of messages) if (message.seq <= seq && message.seq >= floor) before.push(message);
      const wantedPositions: number[] = [];
      for (const requiredSeq of required) {
        const at = lowerBound(toolSeqs, requiredSeq);
        if (at < position && toolSeqs[at] === requiredSeq) wantedPositions.push(at);
      }
      const requiredCalls = await this.#readPositions(reader, wantedPositions, loaded);
      const unmatched = new Set(index.unmatched);
      const segmentNumber = segments.length;
      for (const call of requiredCalls) {
        if (call.type !== 'function_call') continue;
        before.push(call);
        if (unmatched.has(call.seq)) {
          pendingCalls.push({ call, segment: segmentNumber });
          continue;
        }
        // Its output is later in this segment (usually the next lines): scan forward to it.
        for (let at = lowerBound(toolSeqs, call.seq) + 1; at < toolSeqs.length && toolSeqs[at]! < cutSeq; at++) {
          if (!loaded.has(at)) await this.#readPositions(reader, [at], loaded);
          const item = loaded.get(at)!;
          if (item.type === 'function_call_output' && item.call_id === call.call_id) {
            before.push(item);
            break;
          }
        }
      }
      segments.push({ reader, orphans: index.orphans, seqs: toolSeqs, loaded });
      // A segment that carries every earlier message ends the walk unless a required call is older.
      const carried = await reader.carriedMessages();
      if (carried !== null) {
        before.push(...carried.filter((item) => item.seq >= floor));
        if (![...required].some((requiredSeq) => requiredSeq < index.first_seq)) break;
      }
    }
    // Outputs of required calls stored in a newer segment than the call.
    for (const { call, segment } of pendingCalls) {
      for (let newer = segment - 1; newer >= 0; newer--) {
        const candidate = segments[newer]!;
        const outputSeq = candidate.orphans[call.call_id];
        if (outputSeq === undefined || outputSeq <= call.seq) continue;
        if (outputSeq < cutSeq) before.push(...(await this.#readPositions(candidate.reader, [lowerBound(candidate.seqs, outputSeq)], candidate.loaded)));
        break;
      }
    }
    return assembleView(before.filter((item) => item.seq >= floor), suffix, cutSeq, required);
  }

  /** Loads the tool lines at `positions` (whole blocks, one range request per block). */
  async #readPositions(reader: SegmentReader, positions: number[], loaded: Map<number, LogItem>): Promise<LogItem[]> {
    const sorted = [...new Set(positions)].sort((a, b) => a - b);
    const count = (await reader.toolSeqs()).length;
    const blocks = [...new Set(sorted.filter((position) => !loaded.has(position)).map((position) => Math.floor(position / TOOL_BLOCK)))];
    await mapLimit(blocks, PARALLEL_GETS, async (block) => {
      const from = block * TOOL_BLOCK;
      const items = await reader.tools(from, Math.min(count, from + TOOL_BLOCK), false);
      items.forEach((item, offset) => loaded.set(from + offset, item));
    });
    return sorted.map((position) => loaded.get(position)!);
  }

  /** Runs a read again with a fresh listing when a listed object vanished (a packer ran). */
  async #withFreshListing<Result>(read: () => Promise<Result>): Promise<Result> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await read();
      } catch (error) {
        if (attempt >= MAX_LISTING_RETRIES || !(error instanceof SegmentMissingError || error instanceof RecordMissingError)) {
          if (error instanceof SegmentMissingError || error instanceof RecordMissingError) {
            throw new CorruptObjectError(error.key, 'listed but missing on every read');
          }
          throw error;
        }
      }
    }
  }

  // --- token revocation ---

  /** The session's token generation (0 until tokens are first revoked); one config read. */
  async tokenGeneration(id: string): Promise<number> {
    return (await this.#readConfig(id)).config.token_generation ?? 0;
  }

  /**
   * Revokes the session's scoped tokens: bumps `token_generation` in its config with a
   * conditional put (If-Match on the etag read), retried when another update won in between.
   * Returns the new generation; tokens minted before it are refused from then on.
   */
  async revokeTokens(id: string): Promise<number> {
    for (let attempt = 0; attempt < MAX_CLAIM_ATTEMPTS; attempt++) {
      const { config, info } = await this.#readConfig(id);
      const next: SessionConfig = { ...config, token_generation: (config.token_generation ?? 0) + 1 };
      const written = await this.#store.put(sessionConfigKey(this.#keyPrefix, id), JSON.stringify(next), { ifMatch: info.etag, contentType: 'application/json' });
      if (written) return next.token_generation!;
      await backoff(attempt);
    }
    throw new StorageError(`session ${id}: too many concurrent updates`);
  }
}

/** A record listed a moment ago is gone (packed meanwhile): list again. */
class RecordMissingError extends Error {
  readonly key: string;
  constructor(key: string) {
    super(`record ${key} disappeared`);
    this.name = 'RecordMissingError';
    this.key = key;
  }
}

/** Applies selectTail's rule for the part before the cut, then appends the suffix. */
function assembleView(before: LogItem[], suffix: LogItem[], cutSeq: number, required: Set<number>): PromptItem[] {
  const bySeq = new Map<number, LogItem>();
  for (const item of before) if (item.seq < cutSeq) bySeq.set(item.seq, item);
  const view: PromptItem[] = [];
  const awaiting = new Set<string>();
  for (const item of [...bySeq.values()].sort((a, b) => a.seq - b.seq)) {
    if (item.type === 'message') view.push(item);
    else if (item.type === 'function_call') {
      if (required.has(item.seq)) {
        view.push(item);
        awaiting.add(item.call_id);
      }
    } else if (awaiting.has(item.call_id)) {
      view.push(item);
      awaiting.delete(item.call_id);
    }
  }
  for (let index = suffix.length - 1; index >= 0; index--) view.push(suffix[index]!);
  return view;
}

/**
 * The tail view for `requirement` from a base and the items after it (`newer`), or null when
 * the base's view does not hold enough of the history: its tail starts too late for the cut,
 * or a required call before its window is not in it. Without a view the base holds the
 * whole log. Equal to `selectTail` of the whole history from `floor` on, except that tool
 * items outside `requirement.wholeCalls` (and its seqs) may come as the strategies compact
 * them, which is what they make of them anyway.
 */
function tailFromBase(base: Base, newer: readonly LogItem[], requirement: TailRequirement, floor: number): PromptItem[] | null {
  const tail = base.view ? base.view.tail : { from_seq: 1, window_start: 1, items: [] };
  // A tail written from a later context start lacks the messages before it.
  if (!tail || tail.from_seq > Math.max(floor, 1)) return null;
  const items: LogItem[] = [...(tail.items as LogItem[]), ...base.since, ...newer].filter((item) => item.seq >= floor);
  // Items the view holds compacted must be ones the strategies compact or drop now.
  if (items.some((item) => item.compacted)) {
    if (requirement.toolCalls === 'all' || requirement.wholeCalls === undefined) return null;
    const whole = wholeCallIds(items, requirement.wholeCalls, requirement.seqs)!;
    if (items.some((item) => item.compacted && item.type !== 'message' && whole.has(item.call_id))) return null;
  }
  if (tail.window_start > Math.max(floor, 1)) {
    if (requirement.toolCalls === 'all') return null;
    const cut = tailCut(items, requirement.toolCalls);
    if (cut === null || (cut < items.length && items[cut]!.seq < tail.window_start)) return null;
    const held = new Set<number>();
    for (const item of tail.items) if (item.type === 'function_call' && item.seq < tail.window_start) held.add(item.seq);
    if (requirement.seqs.some((seq) => seq >= floor && seq < tail.window_start && !held.has(seq))) return null;
  }
  return selectTail(items, requirement);
}

/**
 * The call ids of the newest `wholeCalls` calls of `items` and of the calls with `seqs`: the
 * tool items the strategies may show whole. Null (all of them) when `wholeCalls` is undefined.
 */
function wholeCallIds(items: readonly LogItem[], wholeCalls: number | undefined, seqs: readonly number[]): Set<string> | null {
  if (wholeCalls === undefined) return null;
  const pinned = new Set(seqs);
  const ids = new Set<string>();
  let calls = 0;
  for (let index = items.length - 1; index >= 0; index--) {
    const item = items[index]!;
    if (item.type !== 'function_call') continue;
    calls += 1;
    if (calls <= wholeCalls || pinned.has(item.seq)) ids.add(item.call_id);
  }
  return ids;
}

/**
 * How many bytes of the base's view the strategies no longer need: tool items before the cut
 * of `needed` (plus the margin) that are not required, and what whole items they would now
 * compact would lose by it. A new epoch, or a repeat making an older instance unprotected,
 * leaves a view so; reading it costs that much more than the prompt it serves.
 */
function viewExcessBytes(base: Base, needed: TailRequirement, pinned: readonly number[]): number {
  const tail = base.view?.tail;
  if (!tail || needed.toolCalls === 'all') return 0;
  const items: LogItem[] = [...(tail.items as LogItem[]), ...base.since];
  const cut = tailCut(items, needed.toolCalls + VIEW_MARGIN_CALLS);
  const cutSeq = cut === null ? 0 : (items[cut]?.seq ?? Number.POSITIVE_INFINITY);
  const required = wholeCallIds(items, 0, [...needed.seqs, ...pinned])!;
  const whole = wholeCallIds(items, needed.wholeCalls, [...needed.seqs, ...pinned]);
  let excess = 0;
  for (const item of tail.items as LogItem[]) {
    if (item.type === 'message') continue;
    if (item.seq < cutSeq) {
      if (!required.has(item.call_id)) excess += JSON.stringify(item).length;
    } else if (whole !== null && !item.compacted && !whole.has(item.call_id)) {
      const compacted = item.type === 'function_call' ? compactCallItem(item) : compactOutputItem(item);
      if (compacted !== item) excess += JSON.stringify(item).length - JSON.stringify(compacted).length;
    }
  }
  return excess;
}

/** A base cut before `firstSeq` (the items of a record just claimed). */
function before(base: Base, firstSeq: number): Base {
  return { view: base.view, since: base.since.filter((item) => item.seq < firstSeq) };
}

/**
 * The aggregates of the history up to the end of a base: the view's, extended over the items
 * after it (a call is a repeat when its key is in the view's keys or earlier among them).
 */
function aggregatesOf(base: Base): { aggregates: HistoryAggregates; newKeys: string[] } {
  const packed = base.view?.call_keys ?? '';
  return extendAggregates(base.view?.aggregates ?? emptyAggregates(), base.since, (key) => hasViewKey(packed, key.slice(0, VIEW_KEY_CHARS)));
}

function hasViewKey(packed: string, short: string): boolean {
  for (let at = packed.indexOf(short); at >= 0; at = packed.indexOf(short, at + 1)) if (at % VIEW_KEY_CHARS === 0) return true;
  return false;
}

/** The records the newest record carries, then its own items (with its completion's), oldest first. */
function recordGroups(newest: { record: LogRecord; done: DoneRecord | null }): NonNullable<LogRecord['recent']> {
  return [...(newest.record.recent ?? []), { record: newest.record.record, items: [...newest.record.items, ...(newest.done?.items ?? [])] }];
}

/** The items the newest record carries and its own, in seq order. */
function carriedItems(newest: NonNullable<Head['newest']>): LogItem[] {
  return recordGroups(newest).flatMap((group) => group.items);
}

/** A view's tail: seqs ascending, none after the view's end. */
function checkTail(key: string, items: readonly LogItem[], fromSeq: number, lastSeq: number): void {
  let previous = fromSeq - 1;
  for (const item of items) {
    if (item.seq <= previous || item.seq > lastSeq) throw new CorruptObjectError(key, `tail holds seq ${item.seq} out of order`);
    previous = item.seq;
  }
}

function segmentTurnOf(record: LogRecord, done: DoneRecord): SegmentTurn {
  return {
    record: record.record,
    turn: record.turn ?? 0,
    status: done.status,
    ...(record.idempotency_key_sha256 ? { idempotency_key_sha256: record.idempotency_key_sha256 } : {}),
    ...(done.response !== undefined ? { response: done.response } : {}),
    ...(done.error ? { error: done.error } : {}),
  };
}

function contextOf(newest: Head['newest']): ContextStart | null {
  if (!newest) return null;
  return newest.done?.context ?? newest.record.context ?? null;
}

function countsOf(newest: Head['newest']): SessionCounts {
  if (!newest) return { items: 0, turns: 0, tool_calls: 0 };
  return newest.done?.counts ?? newest.record.counts;
}

function toSessionRecord(config: SessionConfig, counts: SessionCounts): SessionRecord {
  return {
    id: config.id,
    created_at: config.created_at,
    instructions: config.instructions,
    model: config.model,
    strategies: config.strategies,
    strategy_config: config.strategy_config,
    tools: config.tools,
    metadata: config.metadata,
    counts: { ...counts },
  };
}

function normalizeStrategies(value: string | string[] | null | undefined): string[] | null {
  if (value === undefined || value === null) return null;
  const names = (Array.isArray(value) ? value : value.split(',')).map((name) => name.trim()).filter((name) => name !== '');
  return names;
}

function parseInput<Schema extends z.ZodType>(schema: Schema, value: unknown): z.infer<Schema> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new InvalidRequestError(`${issue?.path.join('.') || 'input'}: ${issue?.message ?? 'invalid'}`, { issues: parsed.error.issues });
  }
  return parsed.data;
}

function checkDense(key: string, items: readonly LogItem[], firstSeq: number): void {
  items.forEach((item, index) => {
    if (item.seq !== firstSeq + index) throw new CorruptObjectError(key, `seq ${item.seq} where ${firstSeq + index} was expected`);
  });
}

/** First index in ascending `values` holding a value >= `target`. */
function lowerBound(values: readonly number[], target: number): number {
  let low = 0;
  let high = values.length;
  while (low < high) {
    const middle = (low + high) >> 1;
    if (values[middle]! < target) low = middle + 1;
    else high = middle;
  }
  return low;
}

async function backoff(attempt: number): Promise<void> {
  const delay = Math.min(200, 2 ** Math.min(attempt, 7)) * Math.random();
  await new Promise((resolve) => setTimeout(resolve, delay));
}

function scopeOf(keyPrefix: string, config: SessionConfig): LogScope {
  return { keyPrefix, id: config.id, generation: config.generation ?? '' };
}

/**
 * Whether a key under a session's prefix (`rest`, the part after it) belongs to anything but
 * the incarnation `generation`: id-level objects (the inbox) and other generations' objects.
 */
function isOtherGeneration(rest: string, generation: string): boolean {
  const [kind, level = ''] = rest.split('/');
  if (kind === 'inbox' || kind === 'inbox_removed') return false;
  // A config written before generations keeps its objects without the level.
  if (generation === '') return generationSchemaPattern.test(level);
  return level !== generation;
}

/** The calls without an output after the newest record (null: not tracked by that record). */
function openCallsOf(newest: Head['newest']): string[] | null {
  if (!newest) return [];
  return (newest.done ? newest.done.open_calls : newest.record.open_calls) ?? null;
}

/**
 * Checks input items against the calls still open in the history and returns the calls
 * open after them: a call must not reuse the call_id of an open call, and an output must
 * answer an open call (so a second output for the same call is refused).
 */
function checkCalls(input: readonly Item[], open: readonly string[]): string[] {
  const pending = new Set(open);
  input.forEach((item, index) => {
    if (item.type === 'function_call') {
      if (pending.has(item.call_id)) throw new InvalidRequestError(`input.${index}.call_id: a call with call_id ${item.call_id} is already open`, { field: `input.${index}.call_id` });
      pending.add(item.call_id);
    } else if (item.type === 'function_call_output') {
      if (!pending.delete(item.call_id)) {
        throw new InvalidRequestError(`input.${index}.call_id: no open function_call with call_id ${item.call_id} (unknown, or answered already)`, { field: `input.${index}.call_id` });
      }
    }
  });
  return [...pending].slice(-MAX_OPEN_CALLS);
}

/** The open calls after a model's output (a model is not refused: its items are what it said). */
function openCallsAfter(open: readonly string[], output: readonly StoredItem[]): string[] {
  const pending = new Set(open);
  for (const item of output) {
    if (item.type === 'function_call') pending.add(item.call_id);
    else if (item.type === 'function_call_output') pending.delete(item.call_id);
  }
  return [...pending].slice(-MAX_OPEN_CALLS);
}

/** The notices no model has seen yet, as of the newest record (its completion decides). */
function undeliveredOf(newest: Head['newest']): Undelivered {
  if (!newest) return NOTHING_UNDELIVERED;
  return (newest.done ? newest.done.undelivered : newest.record.undelivered) ?? NOTHING_UNDELIVERED;
}

function isEmpty(undelivered: Undelivered): boolean {
  return undelivered.notices.length === 0 && undelivered.lost_turns.length === 0;
}

/** A key reused with another request (both hashes known and different). */
function checkRequest(stored: string | undefined, requestHash: string | undefined, turn: number): void {
  if (stored && requestHash && stored !== requestHash) throw new IdempotencyKeyReusedError(turn);
}

/** About how many bytes an item takes in a page (its JSON, with its whole output). */
function itemBytes(item: LogItem): number {
  const json = JSON.stringify(item).length;
  return item.type === 'function_call_output' && item.output_ref ? json + item.output_ref.length : json;
}
