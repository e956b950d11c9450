import { z } from 'zod';
import { CorruptObjectError, InvalidRequestError, NotFoundError, StorageError } from '../errors.ts';
import { sha256Hex } from '../hash.ts';
import { itemSchema, toolSchema, type Item, type PromptItem, type StoredItem, type Tool } from '../items.ts';
import type { ObjectInfo, ObjectStore } from '../store/object-store.ts';
import { emptyAggregates, extendAggregates, type HistoryAggregates } from '../strategies/aggregates.ts';
import { compactCallItem, compactOutputItem } from '../strategies/compact-text.ts';
import { selectTail, tailCut } from '../strategies/select-tail.ts';
import type { TailRequirement } from '../strategies/strategy.ts';
import {
  blobKey,
  contextKey,
  doneKey,
  idempotencyKey,
  recordKey,
  recordsPrefix,
  segmentKey,
  sessionConfigKey,
  sessionPrefix,
  validateId,
  viewKey,
} from './keys.ts';
import { mapLimit } from './map-limit.ts';
import { externalizePayloads, readPayload } from './payloads.ts';
import {
  contextObjectSchema,
  doneSchema,
  idempotencyClaimSchema,
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
} from './records.ts';
import { buildSegment, SegmentMissingError, SegmentReader, TOOL_BLOCK, type SegmentContent } from './segment.ts';
import { SessionExistsError } from './session-exists-error.ts';
import { TurnClosedError } from './turn-closed-error.ts';
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

/** A claimed model turn: its input is durable, its lease runs until `leaseExpiresAt`. */
export interface OpenTurn {
  sessionId: string;
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

/** Turns whose tail read went past their view (see `needsView`). */
const readPastView = new WeakSet<OpenTurn>();

/** Turns whose context start moved (their completion stores the new one). */
const movedContexts = new WeakSet<OpenTurn>();

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
  /** How long a claimed turn stays open before a newcomer may close it as failed. */
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

interface Head {
  config: SessionConfig;
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
    const config: SessionConfig = {
      format: 'tailgate.session.v1',
      id,
      created_at: this.#clock().toISOString(),
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
      if (written) return toSessionRecord(next, countsOf((await this.#newest(id)).newest));
      await backoff(attempt);
    }
    throw new StorageError(`session ${id}: too many concurrent updates`);
  }

  /**
   * Deletes every object under the session's prefix (records, views, segments, blobs,
   * inbox), page by page, and the config last, so an interrupted delete can be repeated.
   */
  async delete(id: string): Promise<void> {
    const configKey = sessionConfigKey(this.#keyPrefix, id);
    if (!(await this.#store.head(configKey))) throw new NotFoundError(`session ${id} not found`, { id });
    const prefix = sessionPrefix(this.#keyPrefix, id);
    let startAfter: string | undefined;
    for (;;) {
      const page = await this.#store.list(prefix, { limit: 1000, ...(startAfter ? { startAfter } : {}) });
      const keys = page.objects.map((object) => object.key).filter((key) => key !== configKey);
      if (keys.length > 0) await this.#store.delete(keys);
      if (!page.truncated || page.objects.length === 0) break;
      startAfter = page.objects[page.objects.length - 1]!.key;
    }
    await this.#store.delete(configKey);
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
   * Begins a model turn. With an idempotency key already used on this session, returns the
   * stored outcome of that turn (replay) and does nothing else; if that turn is still open,
   * TurnInProgressError. Otherwise claims the next record (create-only) holding the input, so
   * the input is durable before this resolves. Another open turn with an unexpired lease:
   * TurnInProgressError; an expired one is closed as failed first.
   */
  async beginTurn(id: string, options: { input: Item[]; idempotencyKey?: string; request?: unknown }): Promise<BeginTurnResult> {
    const input = parseInput(z.array(itemSchema), options.input);
    let keyHash: string | undefined;
    if (options.idempotencyKey !== undefined) {
      keyHash = sha256Hex(parseInput(idempotencyKeySchema, options.idempotencyKey));
      const replay = await this.#replay(id, keyHash);
      if (replay) return replay;
    }
    const { record, config, previous, base: claimed } = await this.#commit(id, input, {
      kind: 'turn',
      ...(keyHash ? { keyHash } : {}),
      ...(options.request !== undefined ? { request: options.request } : {}),
    });
    if (keyHash) {
      const claimKey = idempotencyKey(this.#keyPrefix, id, keyHash);
      const claimed = await this.#store.put(claimKey, JSON.stringify({ format: 'tailgate.idempotency.v1', record: record.record }), {
        onlyIfAbsent: true,
        contentType: 'application/json',
      });
      if (!claimed) {
        // A concurrent request with the same key claimed it first: close ours, answer with theirs.
        await this.#close(id, record, { status: 'failed', error: { code: 'duplicate_request', message: 'the idempotency key was claimed by another request' } });
        const replay = await this.#replay(id, keyHash);
        if (replay) return replay;
        throw new TurnInProgressError(id, record.turn ?? 0);
      }
    }
    const base = claimed ?? { view: null, since: [] };
    const { aggregates } = aggregatesOf({ view: base.view, since: [...base.since, ...record.items] });
    const session = toSessionRecord(config, record.counts);
    const carried = previous.flatMap((group) => group.items);
    const turn: OpenTurn = {
      sessionId: id,
      session,
      turn: record.turn!,
      input: await this.#hydrateItems(id, record.items),
      aggregates,
      leaseExpiresAt: record.lease_expires_at!,
      record: record.record,
      counts: record.counts,
      inputRecords: record.items,
      carried,
      carriedFromRecord: previous[0]?.record ?? record.record,
      base,
      context: record.context ?? null,
    };
    return { kind: 'claimed', turn };
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
    readPastView.add(turn);
    return this.#withFreshListing(() => {
      const cursor = new UnitCursor(this.#store, recordsPrefix(this.#keyPrefix, turn.sessionId), { pageLimit: 100, below: turn.carriedFromRecord });
      return this.#readTail(turn.sessionId, [...turn.carried, ...turn.inputRecords], cursor, requirement, floor);
    });
  }

  /**
   * Whether the next turn would be better served by a fresh view: this turn's read went past
   * its view, or, with this turn's `output` stored, the strategies (`requirement` of the
   * aggregates then) compact or drop items the view holds whole, or need a tail it lacks (a
   * new epoch began). The caller then packs with `refresh`.
   */
  needsView(turn: OpenTurn, requirement: (aggregates: HistoryAggregates) => TailRequirement, output: readonly StoredItem[] = []): boolean {
    if (readPastView.has(turn)) return true;
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
    const stored = await this.#storeContext(turn.sessionId, turn.record, next);
    turn.context = stored;
    movedContexts.add(turn);
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
    const { newest, cursor } = await this.#head(id, 100);
    if (!newest) return { compacted: false, context: null };
    if (newest.record.kind === 'turn' && !newest.done && Date.parse(newest.record.lease_expires_at ?? '') > this.#clock().getTime()) {
      throw new TurnInProgressError(id, newest.record.turn ?? 0, newest.record.lease_expires_at);
    }
    const current = contextOf(newest);
    cursor.skipTo(newest.record.recent?.[0]?.record ?? newest.record.record);
    const newestItems = carriedItems(newest);
    const items = await this.#withFreshListing(() => this.#readTail(id, newestItems, cursor, { toolCalls: 'all', seqs: [] }, current?.start_seq ?? 0));
    const next = await summarize({ items, context: current, carriedFromSeq: newestItems[0]?.seq ?? null });
    if (!next) return { compacted: false, context: current };
    const stored = await this.#storeContext(id, newest.record.record, next);
    await this.#commit(id, [], { kind: 'compact', context: stored });
    return { compacted: true, context: stored };
  }

  /** The current context start of a session (null: never compacted). */
  async currentContext(id: string): Promise<ContextStart | null> {
    return contextOf((await this.#head(id)).newest);
  }

  async #storeContext(id: string, baseRecord: number, next: NewContext): Promise<ContextStart> {
    const key = contextKey(this.#keyPrefix, id, baseRecord);
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
  ): Promise<{ items: PromptItem[]; aggregates: HistoryAggregates; context: ContextStart | null }> {
    return this.#withFreshListing(async () => {
      const { newest, cursor } = await this.#head(id, 100);
      if (!newest) return { items: [], aggregates: emptyAggregates(), context: null };
      const context = contextOf(newest);
      const base = await this.#base(id, newest, cursor);
      const { aggregates } = aggregatesOf(base);
      const needed = requirement(aggregates, context);
      const fromBase = tailFromBase(base, [], needed, context?.start_seq ?? 0);
      if (fromBase) return { items: fromBase, aggregates, context };
      const items = await this.#readTail(id, carriedItems(newest), this.#cursorBelow(id, newest), needed, context?.start_seq ?? 0);
      return { items, aggregates, context };
    });
  }

  /** Fetches the payloads of items still carrying `output_ref` (at most 6 gets at a time). */
  async hydrate(sessionId: string, items: PromptItem[]): Promise<PromptItem[]> {
    validateId(sessionId);
    return mapLimit(items, PARALLEL_GETS, async (item) => {
      if (item.type !== 'function_call_output' || !item.output_ref) return item;
      const { output_ref: ref, ...rest } = item;
      return { ...rest, output: await readPayload(this.#store, blobKey(this.#keyPrefix, sessionId, ref.sha256), ref) };
    });
  }

  /**
   * Closes a turn with its outcome: output items get the next seqs, large outputs go out of
   * line, and the response is kept for idempotent replay. Write-once: a turn closed already
   * (its lease expired and a newcomer closed it) gives TurnClosedError.
   */
  async completeTurn(
    turn: OpenTurn,
    result: { status: TurnStatus; output: Item[]; receipt: unknown; response?: unknown; error?: { code: string; message: string; details?: unknown } },
  ): Promise<StoredItem[]> {
    const outcome = parseInput(outcomeSchema, result);
    const createdAt = this.#clock().toISOString();
    const stored = outcome.output.map((item, index) => ({ ...item, seq: turn.counts.items + 1 + index, created_at: createdAt }) as StoredItem);
    const items = stored as LogItem[];
    const writer = crypto.randomUUID();
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
      ...(turn.context && movedContexts.has(turn) ? { context: turn.context } : {}),
    };
    const key = doneKey(this.#keyPrefix, turn.sessionId, turn.record);
    let failure: { error: unknown } | null = null;
    try {
      if (await this.#store.put(key, JSON.stringify(done), { onlyIfAbsent: true, contentType: 'application/json' })) return stored;
    } catch (error) {
      failure = { error };
    }
    // Refused or failed: it may be our own write whose answer was lost.
    const existing = await this.#store.get(key);
    if (existing && parseStored(key, existing.body, doneSchema).writer === writer) return stored;
    if (failure) throw failure.error;
    throw new TurnClosedError(turn.sessionId, turn.turn);
  }

  /**
   * A page of items, newest first: those with seq < `before` (all when absent), at most
   * `limit` (1..1000), with payloads whole. Reads from the tail, so the newest page costs the
   * same however long the session is.
   */
  async listItems(id: string, options: { before?: number; limit: number }): Promise<{ items: StoredItem[]; has_more: boolean; next_before: number | null }> {
    const limit = parseInput(z.number().int().min(1).max(1000), options.limit);
    const before = options.before === undefined ? undefined : parseInput(z.number().int().positive(), options.before);
    const items = await this.#withFreshListing(async () => {
      const { newest, cursor } = await this.#head(id, 100);
      const upper = before === undefined ? Number.POSITIVE_INFINITY : before - 1;
      const page: LogItem[] = [];
      let lowest = Number.POSITIVE_INFINITY;
      const take = (items: readonly LogItem[]) => {
        for (let index = items.length - 1; index >= 0 && page.length < limit; index--) {
          const item = items[index]!;
          if (item.seq <= upper && item.seq < lowest) page.push(item);
        }
        if (items.length > 0) lowest = Math.min(lowest, items[0]!.seq);
      };
      if (newest) {
        take(carriedItems(newest));
        cursor.skipTo(newest.record.recent?.[0]?.record ?? newest.record.record);
      }
      for (let unit = page.length < limit && newest ? await cursor.next() : null; unit && page.length < limit; unit = await cursor.next()) {
        const wanted = limit - page.length;
        if (unit.kind === 'record') {
          const { record, done } = await this.#readRecord(unit);
          take([...record.items, ...(done?.items ?? [])]);
          continue;
        }
        const top = Math.min(unit.lastSeq, lowest - 1);
        if (unit.firstSeq > upper || top < unit.firstSeq) continue;
        lowest = unit.firstSeq;
        const high = Math.min(upper, top);
        const low = Math.max(unit.firstSeq, high - wanted + 1);
        page.push(...(await this.#segmentRange(unit, low, high)).reverse());
      }
      return page;
    });
    const full = (await this.hydrate(id, items)) as StoredItem[];
    const lowest = full.length > 0 ? full[full.length - 1]!.seq : null;
    const hasMore = lowest !== null && lowest > 1;
    return { items: full, has_more: hasMore, next_before: hasMore ? lowest : null };
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
    const view = await this.#withFreshListing(() => this.#writeViewIfDue(sessionId, options.requirement, options.refresh));
    // With a new view, what it covers is packed now, however little: only the records after
    // the view are carried by the next ones, so the older ones should not stay loose.
    const packMinRecords = view ? 1 : this.#packMinRecords;
    const prefix = recordsPrefix(this.#keyPrefix, sessionId);
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
        result = await this.#packRecords(sessionId, candidates, segment, packMinRecords);
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

  /** Same as `pack`; the name the integrator's port may use. */
  async packIfNeeded(sessionId: string, options: PackOptions = {}): Promise<PackResult> {
    return this.pack(sessionId, options);
  }

  /**
   * Writes the view of the newest closed record when `viewEveryRecords` records have come
   * since the newest view, or VIEW_EVERY_BYTES of items, or a compaction, or when asked to
   * (`refresh`: see `needsView`) (create-only; a view already there is kept). Its tail holds what
   * `requirement` asks for now plus a margin, so the next turns read it and not the segments.
   * Returns the view's key, or null when none was due.
   */
  async #writeViewIfDue(id: string, requirement: PackOptions['requirement'], refresh = false): Promise<string | null> {
    const { newest, cursor } = await this.#newest(id, 100);
    if (!newest || (newest.record.kind === 'turn' && !newest.done)) return null;
    const listed = cursor.views[0]?.record ?? 0;
    if (newest.record.record === listed) return null;
    // A compaction since the newest view makes its tail stale (it starts at the old context start).
    const compacted = (contextOf(newest)?.base_record ?? 0) >= listed && listed > 0;
    // So does a carry grown large (a burst of big appends): every turn would read it.
    const grown = JSON.stringify(recordGroups(newest).filter((group) => group.record > listed)).length > VIEW_EVERY_BYTES;
    const due = newest.record.record - listed >= this.#viewEveryRecords || compacted || grown || refresh;
    if (!due) return null;
    const base = await this.#base(id, newest, cursor);
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
      const items = (withMargin ?? withoutMargin ?? (await this.#readTail(id, carriedItems(newest), this.#cursorBelow(id, newest), wanted, fromSeq))) as LogItem[];
      const cut = held === 'all' ? null : tailCut(items, held);
      const windowStart = cut === null ? fromSeq : (items[cut]?.seq ?? lastSeq + 1);
      tail = { from_seq: fromSeq, window_start: windowStart, items: await this.#viewItems(id, items, needed.wholeCalls, pinned) };
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
    const key = viewKey(this.#keyPrefix, id, view.record);
    await this.#store.put(key, JSON.stringify(view), { onlyIfAbsent: true, contentType: 'application/json' });
    return key;
  }

  /**
   * A view's tail as it is stored: tool items of the newest `wholeCalls` calls (all when
   * undefined) and of the calls with `pinned` seqs whole and inline, since the strategies may
   * show them whole; the others as the strategies compact them (`compactCallItem`,
   * `compactOutputItem`: the same bytes a prompt holds), since they only compact or drop them.
   */
  async #viewItems(id: string, items: LogItem[], wholeCalls: number | undefined, pinned: number[]): Promise<LogItem[]> {
    const whole = wholeCallIds(items, wholeCalls, pinned);
    return mapLimit(items, PARALLEL_GETS, async (item) => {
      if (item.type === 'message') return item;
      if (whole === null || whole.has(item.call_id)) {
        return item.type === 'function_call_output' && item.output_ref ? ((await this.hydrate(id, [item]))[0] as LogItem) : item;
      }
      return (item.type === 'function_call' ? compactCallItem(item) : compactOutputItem(item)) as LogItem;
    });
  }

  async #packRecords(
    sessionId: string,
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
    content.items = await externalizePayloads(this.#store, content.items, this.#blobThreshold, (sha) => blobKey(this.#keyPrefix, sessionId, sha));
    const first = content.items[0];
    const last = content.items[content.items.length - 1];
    const range = {
      firstRecord: content.firstRecord,
      lastRecord: content.lastRecord,
      firstSeq: first ? first.seq : closed[0]!.record.first_seq,
      lastSeq: last ? last.seq : closed[0]!.record.first_seq - 1,
    };
    const key = segmentKey(this.#keyPrefix, sessionId, range);
    await this.#store.put(key, buildSegment(content), { onlyIfAbsent: true, contentType: 'application/x-ndjson' });
    const replaced = closed.flatMap(({ record, done }) => {
      const keys = [recordKey(this.#keyPrefix, sessionId, record.record)];
      if (done) keys.push(doneKey(this.#keyPrefix, sessionId, record.record));
      return keys;
    });
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
   */
  async #commit(
    id: string,
    input: Item[],
    options: { kind: 'append' | 'turn' | 'compact'; keyHash?: string; request?: unknown; context?: ContextStart },
  ): Promise<{
    record: LogRecord;
    config: SessionConfig;
    previous: NonNullable<LogRecord['recent']>;
    /** Model turns: the newest view and every item after it, before the record's items. */
    base: Base | null;
  }> {
    const writer = crypto.randomUUID();
    let failure: { error: unknown } | null = null;
    for (let attempt = 0; attempt < MAX_CLAIM_ATTEMPTS; attempt++) {
      const head = await this.#head(id, 100);
      let newest = head.newest;
      // A put that failed or lost a race may still have landed (a lost answer, an adapter's
      // retry meeting its own write): then the newest record is ours, and nothing is repeated.
      if (newest && newest.record.writer === writer) {
        const own = newest.record;
        const base = options.kind === 'turn' ? before(await this.#base(id, { record: own, done: null }, head.cursor), own.first_seq) : null;
        return { record: own, config: head.config, previous: own.recent ?? [], base };
      }
      if (failure) throw failure.error;
      if (newest && newest.record.kind === 'turn' && !newest.done) {
        const open = newest.record;
        if (Date.parse(open.lease_expires_at ?? '') > this.#clock().getTime()) {
          throw new TurnInProgressError(id, open.turn ?? 0, open.lease_expires_at);
        }
        const done = await this.#close(id, open, { status: 'failed', error: { code: 'lease_expired', message: `turn ${open.turn ?? 0} did not complete before its lease expired` } });
        if (!done) continue;
        newest = { record: open, done };
      }
      const current = contextOf(newest);
      // A compaction committed already (by a concurrent caller), or overtaken by a newer one.
      if (options.kind === 'compact' && newest && current && options.context && current.base_record >= options.context.base_record) {
        return { record: newest.record, config: head.config, previous: newest.record.recent ?? [], base: null };
      }
      const context = options.context ?? current;
      const counts = countsOf(newest);
      // A model turn reads the newest view and what follows it before committing, so a
      // corrupt one fails the claim with nothing stored.
      let base: Base | null = null;
      if (options.kind === 'turn') {
        try {
          base = newest ? await this.#base(id, newest, head.cursor) : { view: null, since: [] };
        } catch (error) {
          // Packed away since the listing: list again.
          if (error instanceof SegmentMissingError || error instanceof RecordMissingError) continue;
          throw error;
        }
      }
      const now = this.#clock();
      const createdAt = now.toISOString();
      const firstSeq = counts.items + 1;
      const stamped = input.map((item, index) => ({ ...item, seq: firstSeq + index, created_at: createdAt }) as LogItem);
      const items = stamped;
      const number = (newest?.record.record ?? 0) + 1;
      const recent = newest ? this.#carry(newest, context?.start_seq, head.cursor.views.find((view) => view.record <= newest!.record.record)?.record ?? 0) : [];
      const turn = options.kind === 'turn' ? counts.turns + 1 : undefined;
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
        ...(options.request !== undefined ? { request: options.request } : {}),
        ...(context ? { context } : {}),
      };
      let put: ObjectInfo | null;
      try {
        put = await this.#store.put(recordKey(this.#keyPrefix, id, number), JSON.stringify(record), { onlyIfAbsent: true, contentType: 'application/json' });
      } catch (error) {
        failure = { error };
        continue;
      }
      if (put) {
        // The records the claim has read (carried, or at least the previous one): the tail read
        // continues below them with the claim's own listing.
        const previous = recent.length > 0 || !newest ? recent : recordGroups(newest).slice(-1);
        return { record, config: head.config, previous, base };
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

  /** Writes the completion of `record` (create-only); null when someone else closed it. */
  async #close(id: string, record: LogRecord, outcome: StoredOutcome): Promise<DoneRecord | null> {
    const done: DoneRecord = {
      format: 'tailgate.done.v1',
      record: record.record,
      completed_at: this.#clock().toISOString(),
      status: outcome.status,
      items: [],
      counts: record.counts,
      ...(outcome.error ? { error: outcome.error } : {}),
    };
    const put = await this.#store.put(doneKey(this.#keyPrefix, id, record.record), JSON.stringify(done), {
      onlyIfAbsent: true,
      contentType: 'application/json',
    });
    return put ? done : null;
  }

  // --- idempotency ---

  async #replay(id: string, keyHash: string): Promise<BeginTurnResult | null> {
    const claimKey = idempotencyKey(this.#keyPrefix, id, keyHash);
    const claim = await this.#store.get(claimKey);
    if (!claim) return null;
    const { record: number } = parseStored(claimKey, claim.body, idempotencyClaimSchema);
    const outcome = await this.#withFreshListing(() => this.#outcome(id, number, claimKey));
    return { kind: 'replay', response: outcome.response ?? null, status: outcome.status, ...(outcome.error ? { error: outcome.error } : {}) };
  }

  /** The stored outcome of model turn `number`, from its completion or from its segment. */
  async #outcome(id: string, number: number, claimKey: string): Promise<StoredOutcome> {
    const [recordObject, doneObject] = await Promise.all([
      this.#store.get(recordKey(this.#keyPrefix, id, number)),
      this.#store.get(doneKey(this.#keyPrefix, id, number)),
    ]);
    if (doneObject) return parseStored(doneKey(this.#keyPrefix, id, number), doneObject.body, doneSchema);
    if (recordObject) {
      const record = parseStored(recordKey(this.#keyPrefix, id, number), recordObject.body, recordSchema);
      if (Date.parse(record.lease_expires_at ?? '') > this.#clock().getTime()) throw new TurnInProgressError(id, record.turn ?? 0, record.lease_expires_at);
      const done = await this.#close(id, record, { status: 'failed', error: { code: 'lease_expired', message: `turn ${record.turn ?? 0} did not complete before its lease expired` } });
      if (done) return done;
      return this.#outcome(id, number, claimKey);
    }
    const cursor = new UnitCursor(this.#store, recordsPrefix(this.#keyPrefix, id), { pageLimit: 100 });
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
  async #base(id: string, newest: NonNullable<Head['newest']>, cursor: UnitCursor): Promise<Base> {
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
      throw new CorruptObjectError(viewKey(this.#keyPrefix, id, viewRecord), `ends at seq ${lastSeq}, its record at ${countsOf(newest).items}`);
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
    checkDense(recordsPrefix(this.#keyPrefix, id), since, lastSeq + 1);
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
  #cursorBelow(id: string, newest: NonNullable<Head['newest']>): UnitCursor {
    return new UnitCursor(this.#store, recordsPrefix(this.#keyPrefix, id), { pageLimit: 100, below: newest.record.recent?.[0]?.record ?? newest.record.record });
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

  /** The config and the newest record (with its completion), read in parallel. */
  async #head(id: string, pageLimit = 3): Promise<Head> {
    const [{ config }, newest] = await Promise.all([this.#readConfig(id), this.#newest(id, pageLimit)]);
    return { config, ...newest };
  }

  async #newest(id: string, pageLimit = 3): Promise<Omit<Head, 'config'>> {
    return this.#withFreshListing(async () => {
      const cursor = new UnitCursor(this.#store, recordsPrefix(this.#keyPrefix, id), { pageLimit });
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
  async #readTail(id: string, newest: readonly LogItem[], cursor: UnitCursor, requirement: TailRequirement, floor = 0): Promise<PromptItem[]> {
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

  async #hydrateItems(id: string, items: LogItem[]): Promise<StoredItem[]> {
    return (await this.hydrate(id, items)) as StoredItem[];
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
