import { z } from 'zod';
import { CorruptObjectError } from '../errors.ts';
import {
  cutFields,
  functionCallItemSchema,
  functionCallOutputItemSchema,
  idSchema,
  messageItemSchema,
  payloadRefSchema,
  toolSchema,
  type PromptItem,
} from '../items.ts';
import { decodeUtf8 } from '../store/object-store.ts';
import { generationSchemaPattern } from './keys.ts';
import { forkPointSchema, MAX_FORK_DEPTH, MAX_NAMED_GENERATIONS, namedPointSchema } from './fork-point.ts';
import { budgetSchema, ledgerSchema, turnUsageSchema } from '../ledger/usage.ts';

/**
 * The zod schemas of every object the session log writes. Each carries a `format` tag, so a
 * foreign object under our prefix is told apart from a corrupt one in the error message.
 */

/** The fields every stored item has. */
export const storedFields = { seq: z.number().int().positive(), created_at: z.string() };

/**
 * An item as the log stores it: a stored item whose function_call_output may keep its
 * output out of line (`output` is '' and `output_ref` previews the blob).
 */
export const logItemSchema = z.discriminatedUnion('type', [
  messageItemSchema.extend({ ...storedFields, ...cutFields }),
  functionCallItemSchema.extend({ ...storedFields, ...cutFields }),
  functionCallOutputItemSchema.extend({ ...storedFields, output_ref: payloadRefSchema.optional() }),
]);
export type LogItem = z.infer<typeof logItemSchema> & PromptItem;

export const countsSchema = z
  .object({
    items: z.number().int().nonnegative(),
    turns: z.number().int().nonnegative(),
    tool_calls: z.number().int().nonnegative(),
  })
  .strict();
export type SessionCounts = z.infer<typeof countsSchema>;

/** A session's counts as every answer gives them, in one order: items, turns, tool_calls. */
export function sessionCounts({ items, turns, tool_calls }: SessionCounts): SessionCounts {
  return { items, turns, tool_calls };
}

/** Generations of one incarnation, nearest first (`''`: the one before generations were named). */
const generationListSchema = z.array(z.string().regex(generationSchemaPattern).or(z.literal(''))).min(1);

export const sessionConfigSchema = z
  .object({
    format: z.literal('tailgate.session.v1'),
    id: idSchema,
    /** The incarnation of the id: every other object of the log is under it (keys.ts). */
    generation: z.string().regex(generationSchemaPattern).optional(),
    created_at: z.string(),
    /** When a PATCH or an import last wrote the config (absent: neither did): activity, as a record is. */
    updated_at: z.string().optional(),
    instructions: z.string().nullable(),
    model: z.string().nullable(),
    strategies: z.array(z.string()).nullable(),
    strategy_config: z.record(z.string(), z.unknown()),
    tools: z.array(toolSchema),
    /** The busy policy; absent: reject. */
    on_busy: z.enum(['reject', 'enqueue', 'interrupt']).optional(),
    metadata: z.record(z.string(), z.unknown()),
    /** Idle days after which the retention sweep deletes the session (absent: the deployment's). */
    expires_after_days: z.number().int().positive().optional(),
    /** Where the session's turn outcomes are posted (absent: the deployment's WEBHOOK_URL). */
    webhook_url: z.string().optional(),
    /** Bumped to revoke the session's scoped tokens: a token minted at a lower one is refused. */
    token_generation: z.number().int().nonnegative().optional(),
    budget: budgetSchema.optional(),
    /** A fork: the incarnations its history continues in, nearest first (log/fork.ts). */
    fork_of: z.array(forkPointSchema).min(1).max(MAX_FORK_DEPTH).optional(),
    /**
     * The generations of this id that a delete of its newest turn wrote and its history still
     * reads (the current one or one `fork_of` or `named` names): the ids of the turns they hold name them
     * (log/rewind.ts, idGeneration).
     */
    /**
     * The generation this incarnation started with (create, fork, import), kept by deletes of
     * the newest turn and PATCH: a bound token names the incarnation by it (functions/auth.ts).
     * Absent in configs written before it: their tokens name the generation they were minted at.
     */
    incarnation: z.string().regex(generationSchemaPattern).optional(),
    rewound: z
      .array(z.string().regex(generationSchemaPattern))
      .min(1)
      .max(MAX_FORK_DEPTH + MAX_NAMED_GENERATIONS + 1)
      .optional(),
    /**
     * A history a delete of the newest turn flattened (log/flatten.ts): the generations that held
     * its items before, nearest first, each for the seqs above the next one's up to its `seq`. The
     * ids of those items still name them (log/rewind.ts, idGeneration); the items are the current
     * generation's, or of a generation `fork_of` names.
     */
    named: z.array(namedPointSchema).min(1).max(MAX_NAMED_GENERATIONS).optional(),
    /**
     * The generations of this incarnation a delete of its newest turn left, nearest first:
     * inputs queued under them (`queue/<g>/`) are still taken up (log/queue.ts).
     */
    queued_in: generationListSchema.optional(),
    /**
     * Generations a delete of the newest turn left whose charges may still be owed: the next write
     * carries them and takes out each generation it carried whole (log/owed-charges.ts).
     */
    carry_from: generationListSchema.optional(),
    /** Random, put anew by each writer that names a generation in `carry_from` again (log/charges.ts oweAgain). */
    carry_mark: z.string().max(64).optional(),
    /**
     * The SHA-256 of the request that created the session under an Idempotency-Key (POST
     * /v1/conversations): the key sent again with another request is refused.
     */
    request_sha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/)
      .optional(),
  })
  .strict();
export type SessionConfig = z.infer<typeof sessionConfigSchema>;

/**
 * The start of the current context (a summarization compaction, lib/compaction/): reads stop
 * at `start_seq`, and the prompt opens with `summary`, which stands for everything before it.
 * Every record and completion carries the latest one, so the newest record always knows it.
 */
export const contextStartSchema = z
  .object({
    /** The record the compaction was computed at: it names `context/<inverted base_record>`. */
    base_record: z.number().int().positive(),
    /** The first seq of the context; older items are only in the summary (and in the history). */
    start_seq: z.number().int().positive(),
    summary: z.string(),
    /** The seqs this compaction summarized (the summary before them is folded in). */
    summarized: z.object({ first_seq: z.number().int().positive(), last_seq: z.number().int().positive() }).strict(),
    /** call_ids of calls that had no output at the cut (noted as interrupted, never replayed). */
    interrupted: z.array(z.string()),
    /** The model that wrote the summary. */
    model: z.string(),
    created_at: z.string(),
    /**
     * The generation that wrote the compaction, when a delete of the newest turn wrote that one
     * (lib/session/log/rewind.ts, writtenGeneration): its item id names it (lib/openai/ids.ts).
     * Absent otherwise, and in compactions stored before it existed.
     */
    generation: z.string().regex(generationSchemaPattern).optional(),
  })
  .strict();
export type ContextStart = z.infer<typeof contextStartSchema>;

/** `context/<inverted base record>`: a compaction's summary, create-only (the claim). */
export const contextObjectSchema = contextStartSchema.extend({ format: z.literal('tailgate.context.v1') }).strict();

/**
 * Where the prompt starts after the overflow safety net (lib/compaction/fit-prompt.ts) dropped
 * the oldest items of a session whose strategies do not compact: tool pairs whose call is older
 * than `tool_start_seq` and messages older than `message_start_seq` stay stored but out of the
 * prompt. `turn` is the turn that last moved it. Carried like `context`.
 */
export const overflowBoundarySchema = z
  .object({
    tool_start_seq: z.number().int().positive(),
    message_start_seq: z.number().int().positive(),
    turn: z.number().int().positive(),
  })
  .strict()
  .refine((boundary) => boundary.message_start_seq <= boundary.tool_start_seq, {
    message: 'message_start_seq is after tool_start_seq',
  });
export type OverflowBoundary = z.infer<typeof overflowBoundarySchema>;

export const errorSchema = z
  .object({ code: z.string(), message: z.string(), details: z.unknown().optional() })
  .strict();
export const turnStatusSchema = z.enum(['completed', 'failed', 'aborted']);
export type TurnStatus = z.infer<typeof turnStatusSchema>;

/** A notice a turn consumed from the inbox whose model call never happened or failed. */
export const undeliveredNoticeSchema = z
  .object({ name: z.string(), stored_as: z.string(), posted_at: z.string(), content: z.string() })
  .strict();

/**
 * Notices consumed but not yet seen by a model, carried by every record and completion
 * until a turn delivers them (like `context`, the newest object says what holds now):
 * - `notices`: consumed by turns that failed or aborted, with their content;
 * - `lost_turns`: turns closed by someone else (lease expired, cancelled) that may have
 *   consumed notices before they died; the next turn finds those in the inbox's delivery
 *   records (`turn` = that turn, written after `since`). An entry there twice (same `turn` and
 *   `since`) was listed already, at `since`: turns list it again for a while (lib/turn/notices.ts
 *   `stillLanding`); its readers take the turns as a set.
 */
export const undeliveredSchema = z
  .object({
    notices: z.array(undeliveredNoticeSchema),
    lost_turns: z.array(z.object({ turn: z.number().int().positive(), since: z.string() }).strict()),
  })
  .strict();
export type Undelivered = z.infer<typeof undeliveredSchema>;

/**
 * Turns closed by someone else whose spend (`spent/<generation>/<turn>`, written by the stopped
 * turn) the session's totals do not count yet, and manual compactions' claims passed over once
 * their lease ran out (`claim`: the claim's record, whose summary the compaction stores at
 * `spent/<generation>/compact-<record>`), carried by every record and completion until a
 * write of the chain counts it (lib/session/log/unbilled.ts); the newest object says what holds
 * now (absent: none). `closed_at` is the close's time, from which the wait for it is bounded.
 */
export const unbilledSchema = z.array(
  z.union([
    z.object({ generation: z.string(), turn: z.number().int().positive(), closed_at: z.string() }).strict(),
    z.object({ generation: z.string(), claim: z.number().int().positive(), closed_at: z.string() }).strict(),
  ]),
);
export type Unbilled = z.infer<typeof unbilledSchema>;

/** What a turn stopped by someone else spent (`spent/<generation>/<turn>`); an empty object: nothing known. */
export const stoppedSpendSchema = z
  .object({
    format: z.literal('tailgate.spent.v1'),
    usage: turnUsageSchema.optional(),
    summary_usage: turnUsageSchema.optional(),
    estimated: z.boolean().optional(),
  })
  .strict();
export type StoppedSpendRecord = z.infer<typeof stoppedSpendSchema>;

/** No notice waiting: what a record or completion without `undelivered` means. */
export const NOTHING_UNDELIVERED: Undelivered = Object.freeze({ notices: [], lost_turns: [] }) as Undelivered;

/** The call_ids of calls without an output yet (the newest ones, at most this many are kept). */
export const MAX_OPEN_CALLS = 1000;
export const openCallsSchema = z.array(z.string()).max(MAX_OPEN_CALLS);

/** Repeat flags of calls: `<view policy version>:` (untagged: not used), then each `1` a repeat, `0` a first. */
const repeatsSchema = z.string().regex(/^(?:[^:]+:)?[01]+$/);
const recentGroupSchema = z
  .object({ record: z.number().int().positive(), items: z.array(logItemSchema), repeats: repeatsSchema.optional() })
  .strict();

/** `turn/<inverted record>`: an append, or the open part of a model turn (its input). */
export const recordSchema = z
  .object({
    format: z.literal('tailgate.record.v1'),
    record: z.number().int().positive(),
    kind: z.enum(['append', 'turn', 'compact']),
    created_at: z.string(),
    /** A random id of the write, so a writer whose put landed but whose answer was lost knows. */
    writer: z.string().max(64).optional(),
    first_seq: z.number().int().positive(),
    items: z.array(logItemSchema),
    /** Counts after these items. */
    counts: countsSchema,
    /** Appends: per call of `items`, whether its key was seen before (lib/session/log/repeat-flags.ts). */
    repeats: repeatsSchema.optional(),
    /**
     * The items of the records just before this one (whole records, oldest first, within a
     * byte budget), so a tail read finds the recent history in the newest record instead of
     * one get per record; with each, its `repeats` when it has them.
     */
    recent: z.array(recentGroupSchema).optional(),
    /** Model turns: the ordinal of the turn (counts.turns after the claim). */
    turn: z.number().int().positive().optional(),
    lease_expires_at: z.string().optional(),
    idempotency_key_sha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/)
      .optional(),
    /** SHA-256 of the request a keyed turn was taken with (a reuse with another body is refused). */
    request_sha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/)
      .optional(),
    request: z.unknown().optional(),
    /** The current context start when this record was written (a `compact` record sets it). */
    context: contextStartSchema.optional(),
    /** The overflow boundary when this record was written (absent: none). */
    overflow: overflowBoundarySchema.optional(),
    /** Calls without an output after these items (absent in records written before it existed). */
    open_calls: openCallsSchema.optional(),
    undelivered: undeliveredSchema.optional(),
    ledger: ledgerSchema.optional(),
    unbilled: unbilledSchema.optional(),
    /** The charges its totals count whose objects were still listed (lib/session/log/charges.ts). */
    charged: z.array(z.string().max(64)).optional(),
  })
  .strict();
export type LogRecord = z.infer<typeof recordSchema>;

/** `turn/<inverted record>.done`: closes a model turn, write-once. */
export const doneSchema = z
  .object({
    format: z.literal('tailgate.done.v1'),
    record: z.number().int().positive(),
    completed_at: z.string(),
    writer: z.string().max(64).optional(),
    status: turnStatusSchema,
    items: z.array(logItemSchema),
    /** Its record's calls' flags, then its own, when its process told them (repeat-flags.ts turnRepeats). */
    repeats: repeatsSchema.optional(),
    /** Counts after the outputs. */
    counts: countsSchema,
    receipt: z.unknown().optional(),
    response: z.unknown().optional(),
    error: errorSchema.optional(),
    /** The context start after this turn (changed when the turn compacted). */
    context: contextStartSchema.optional(),
    /** The overflow boundary after this turn (when the turn moved it). */
    overflow: overflowBoundarySchema.optional(),
    open_calls: openCallsSchema.optional(),
    /** Notices still undelivered after this turn (absent: none). */
    undelivered: undeliveredSchema.optional(),
    ledger: ledgerSchema.optional(),
    unbilled: unbilledSchema.optional(),
  })
  .strict();
export type DoneRecord = z.infer<typeof doneSchema>;

/** `idem/<sha256>`: which record owns an idempotency key. */
export const idempotencyClaimSchema = z
  .object({
    format: z.literal('tailgate.idempotency.v1'),
    record: z.number().int().positive(),
    request_sha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/)
      .optional(),
    /** A keyed append's (no turn): the seqs of the items it stored, which its key replays. */
    first_seq: z.number().int().positive().optional(),
    last_seq: z.number().int().positive().optional(),
  })
  .strict();

/** `turn/<generation>/<inverted record>.lease`: an open turn's renewed lease. */
export const leaseSchema = z
  .object({ format: z.literal('tailgate.lease.v1'), record: z.number().int().positive(), lease_expires_at: z.string() })
  .strict();

/** Parses stored bytes as JSON of `schema`; anything else is a CorruptObjectError naming `key`. */
export function parseStored<Schema extends z.ZodType>(key: string, bytes: Uint8Array, schema: Schema): z.infer<Schema> {
  let value: unknown;
  try {
    value = JSON.parse(decodeUtf8(bytes));
  } catch (error) {
    throw new CorruptObjectError(key, `not UTF-8 JSON (${error instanceof Error ? error.message : String(error)})`);
  }
  return validateStored(key, value, schema);
}

/**
 * What `parseStored` gives, or undefined for an object that is not UTF-8 JSON of `schema`: for
 * objects a reader can do without (it rebuilds, or starts over, instead).
 */
export function parseStoredOrUndefined<Schema extends z.ZodType>(
  bytes: Uint8Array,
  schema: Schema,
): z.infer<Schema> | undefined {
  try {
    return parseStored('', bytes, schema);
  } catch {
    return undefined;
  }
}

/** Validates an already parsed value read from `key` against `schema`. */
export function validateStored<Schema extends z.ZodType>(key: string, value: unknown, schema: Schema): z.infer<Schema> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue && issue.path.length > 0 ? ` at ${issue.path.join('.')}` : '';
    throw new CorruptObjectError(key, `${issue?.message ?? 'does not match its schema'}${where}`);
  }
  return parsed.data;
}
