import type { Content } from '../../content.ts';
import { z } from 'zod';
import type { TurnUsage } from '../../ledger/usage.ts';
import { CorruptObjectError, DeleteRefusedError, NotFoundError, TURN_CANCELLED } from '../../errors.ts';
import { leaseKey, recordKey, type LogScope } from '../keys.ts';
import type { StoredItem } from '../../items.ts';
import { reusedPrefixChars } from '../../prompt-shape.ts';
import type { DoneRecord, LogItem, LogRecord, TurnStatus } from '../records.ts';
import type { SegmentTurn } from '../segment-records.ts';
import { SegmentReader } from '../segment.ts';
import { PARALLEL_GETS, type LogContext } from './context.ts';
import { mapLimit } from '../../store/object-store.ts';
import { readHead, readRecord, withFreshListing } from './head.ts';
import { listItems } from './item-pages.ts';
import { receiptSchema, type Receipt } from './receipt-schema.ts';
import { stoppedSpendKey, withStoppedSpend } from './stopped-receipt.ts';
import { sightOf, treatmentOf, type Treatment, type TurnSight } from './turn-sight.ts';

/** The 404 of a turn session `id` does not have, worded one way by every route that names a turn. */
export function missingTurn(id: string, turn: number): NotFoundError {
  return new NotFoundError(`session ${id} has no turn ${turn}`, { id, turn });
}

export type { Treatment, TurnSight };

/**
 * Reading model turns back (the turn receipts API): their outcome, timing, settings, the
 * `context` counts and what the model saw, from the records and completions, or from the
 * turns section of the segments that packed them. Nothing here writes.
 *
 * Turns are found newest first: one listing of the records, the unpacked records (2 gets
 * each, the newest few), then for each segment its index and one range read of just the
 * turn lines wanted. Turn numbers in a segment are consecutive, so a page that starts at
 * `before` skips a segment after reading its first turn line.
 */

/**
 * A turn's state as receipts report it: a background turn no runner has started yet is
 * `queued` (its record has no `.lease` beside it), an open turn `in_progress`, a turn failed
 * by a cancel `cancelled`.
 */
export type TurnState = 'queued' | 'in_progress' | 'completed' | 'failed' | 'cancelled' | 'aborted';

/** A closed turn's state: a failure by a cancel is `cancelled`. */
export function closedState(status: TurnStatus, errorCode: string | undefined): TurnState {
  return status === 'failed' && errorCode === TURN_CANCELLED ? 'cancelled' : status;
}

/** One model turn as the receipts API returns it. */
export interface TurnSummary {
  turn: number;
  status: TurnState;
  started_at: string | null;
  completed_at: string | null;
  model: string | null;
  strategies: string[];
  context: Record<string, unknown> | null;
  notices: { name: string; stored_as: string; posted_at: string }[];
  usage: TurnUsage | null;
  /** What the summary of the turn's compaction used (present only when it compacted). */
  compaction_usage?: TurnUsage;
  /** Why the answer stopped short (present only then). */
  incomplete?: 'max_output_tokens' | 'content_filter';
  /** It ran in the background (`background: true`; present only then): its create was answered at once. */
  background?: true;
  /**
   * Its `usage` is an estimate, its provider reported none: a turn closed by someone else
   * (./stopped-receipt.ts), or one whose model call its provider may have run (timed out in
   * flight, broke off after it was accepted).
   */
  usage_estimated?: true;
  error: { code: string; message: string; details?: unknown } | null;
  input: { first_seq: number; last_seq: number } | null;
  output: { first_seq: number; last_seq: number } | null;
  /** Characters of this turn's provider prompt that repeat the previous turn's from its start (null: unknown). */
  prefix_reused_chars: number | null;
}

/** A stored item of a turn's window with what the model got of it. */
export type SeenItem = StoredItem & { treatment: Treatment; compacted_as?: { output?: Content; arguments?: string } };

interface RawTurn {
  /** The turn's record (a compaction in the turn keeps its summary under it). */
  record: number;
  summary: Omit<TurnSummary, 'prefix_reused_chars'>;
  receipt: Receipt;
  /** An open background turn's record: queued until its runner writes `.lease`. */
  background?: number;
  /** A background turn's record key, open or closed, while its record is not packed. */
  backgroundKey?: string;
  /** A streamed or background turn's: it has an event journal however it ended. */
  journaled?: boolean;
  /** A completed turn's stored answer (the 200 body): its completion's, or its segment line's. */
  response?: unknown;
  /** A turn closed by someone else: where it stored what it spent (./stopped-receipt.ts). */
  spent?: string;
}

const requestModelSchema = z.object({ model: z.string() }).catch({ model: '' });
const backgroundSchema = z.object({ background: z.boolean() }).catch({ background: false });
const streamSchema = z.object({ stream: z.boolean() }).catch({ stream: false });

/** Whether a turn's record is a background turn's (its stored settings say `background`). */
export function isBackgroundRecord(record: Pick<LogRecord, 'request'>): boolean {
  return backgroundSchema.parse(record.request ?? {}).background;
}

/**
 * A delete's refusal of open turn `turn` of session `id` (its newest, `record` in `scope`): queued
 * while no runner took it (a background turn without its lease object, as walkTurns tells it),
 * else still running. Either passes once the turn ended (`running`: sent again, it may).
 */
export async function openTurnRefused(log: LogContext, scope: LogScope, record: LogRecord, id: string, turn: number) {
  const queued = isBackgroundRecord(record) && !(await log.store.head(leaseKey(scope, record.record)));
  const state = queued ? 'is queued' : 'is still running';
  return new DeleteRefusedError(`turn ${turn} of session ${id} ${state}; delete it once it has ended`, {
    id,
    turn,
    running: true,
  });
}

/**
 * Whether a turn's record is a streamed or background turn's (its stored settings say `stream`
 * or `background`): it has an event journal however it ended.
 */
export function isJournaledRecord(record: Pick<LogRecord, 'request'>): boolean {
  return isBackgroundRecord(record) || streamSchema.parse(record.request ?? {}).stream;
}

/** A page of turns newest first: turns numbered below `before` (all when absent), at most `limit` (1..100). */
export async function listTurns(
  log: LogContext,
  id: string,
  options: { before?: number; limit: number },
): Promise<{ turns: TurnSummary[]; has_more: boolean; next_before: number | null }> {
  const { limit, before } = options;
  // One more than the page: its prompt is what the oldest turn of the page is compared with.
  const raw = await walkTurns(log, id, before, limit + 1);
  // A stopped turn's spend, PARALLEL_GETS at a time (no get for any other turn).
  const turns = await mapLimit(withReuse(raw).slice(0, limit), PARALLEL_GETS, (summary, index) =>
    withStoppedSpend(log, summary, raw[index]!.spent),
  );
  const oldest = turns.at(-1)?.turn;
  const hasMore = oldest !== undefined && oldest > 1;
  return { turns, has_more: hasMore, next_before: hasMore ? oldest! : null };
}

/**
 * One turn with what its model saw. A turn that does not exist: NotFoundError. `spent`: a turn
 * closed by someone else shows what it stored spent (one get more: its receipt as the API
 * answers it, ./stopped-receipt.ts).
 */
export async function getTurn(
  log: LogContext,
  id: string,
  turn: number,
  options: { spent?: boolean } = {},
): Promise<TurnSummary & { receipt: TurnSight | null }> {
  const number = turn;
  const raw = await walkTurns(log, id, number + 1, 2);
  if (raw[0]?.summary.turn !== number) throw missingTurn(id, number);
  const [summary] = withReuse(raw);
  const found = { ...summary!, receipt: sightOf(raw[0]) };
  return options.spent ? withStoppedSpend(log, found, raw[0].spent) : found;
}

/**
 * A turn's record and the first seq it holds (its input's, else its output's). A turn that
 * does not exist: NotFoundError.
 */
export async function turnRecord(log: LogContext, id: string, turn: number): Promise<{ record: number; seq?: number }> {
  const [raw] = await walkTurns(log, id, turn + 1, 1);
  if (raw?.summary.turn !== turn) throw missingTurn(id, turn);
  const seq = raw.summary.input?.first_seq ?? raw.summary.output?.first_seq;
  return { record: raw.record, ...(seq !== undefined ? { seq } : {}) };
}

/**
 * Whether turn `turn` has an event journal however it ended, and whether a writer may have
 * journaled to it: `never` for a background turn no runner took over (its record says
 * `background` and no `.lease` is beside it: read after its close was seen, it never will be, as
 * a runner whose lease lands after the close finds the close and stops, writing nothing);
 * `taken` for one a runner took over (a `.lease` there), for a streamed turn (its record says
 * `stream`: its owner wrote from its claim on) and for a packed turn its segment line says
 * `journaled` (its `.lease` is gone); null for any other turn (a plain JSON turn).
 */
export async function journalRun(log: LogContext, id: string, turn: number): Promise<'never' | 'taken' | null> {
  const [raw] = await walkTurns(log, id, turn + 1, 1);
  if (raw?.summary.turn !== turn || !raw.journaled) return null;
  if (raw.backgroundKey === undefined) return 'taken';
  return (await log.store.head(`${raw.backgroundKey}.lease`)) ? 'taken' : 'never';
}

/** What a stored answer must hold for a reader to end a journal with it: its output items, by seq. */
const storedAnswerSchema = z.object({ output: z.array(z.object({ seq: z.number() }).passthrough()) }).passthrough();

/**
 * The stored answer of turn `turn` when it completed (see SessionLog.completedResponse); null
 * otherwise. CorruptObjectError when it is not an answer.
 */
export async function completedResponse(log: LogContext, id: string, turn: number): Promise<unknown> {
  const [raw] = await walkTurns(log, id, turn + 1, 1);
  if (raw?.summary.turn !== turn || raw.summary.status !== 'completed' || raw.response === undefined) return null;
  const parsed = storedAnswerSchema.safeParse(raw.response);
  if (!parsed.success) throw new CorruptObjectError(`${id} turn ${turn}`, `stored answer: ${parsed.error.message}`);
  // As stored, not as parsed (which puts the checked fields first): the 200 body its turn answered.
  return raw.response;
}

/**
 * A page of the stored items up to a turn's input (newest first, as GET /items pages), each
 * with the treatment the model gave it and, when compacted, the compacted text it got.
 */
export async function turnItems(
  log: LogContext,
  id: string,
  turn: number,
  options: { before?: number; limit: number },
): Promise<{ items: SeenItem[]; has_more: boolean; next_before: number | null }> {
  const found = await getTurn(log, id, turn);
  const end = found.input?.last_seq ?? found.output?.first_seq ?? 0;
  if (end < 1) return { items: [], has_more: false, next_before: null };
  const before = Math.min(options.before ?? end + 1, end + 1);
  if (before <= 1) return { items: [], has_more: false, next_before: null };
  const page = await listItems(log, id, { before, limit: options.limit });
  const runs = found.receipt?.seen ?? [];
  const items = page.items.map((item) => {
    const treatment = treatmentOf(runs, item.seq);
    if (treatment !== 'compacted') return { ...item, treatment };
    const compacted = log.viewPolicy.compact(item as LogItem);
    if (compacted.type === 'function_call_output')
      return { ...item, treatment, compacted_as: { output: compacted.output } };
    if (compacted.type === 'function_call')
      return { ...item, treatment, compacted_as: { arguments: compacted.arguments } };
    return { ...item, treatment };
  });
  return { items, has_more: page.has_more, next_before: page.next_before };
}

/** Turns below `before`, newest first, at most `wanted`. */
export async function walkTurns(log: LogContext, id: string, before: number | undefined, wanted: number) {
  return withFreshListing(async () => {
    const below = (turn: number) => before === undefined || turn < before;
    const found: RawTurn[] = [];
    const { newest, cursor, scope } = await readHead(log, id, 100);
    const consider = (record: LogRecord, done: DoneRecord | null, key: string) => {
      if (record.kind === 'turn' && record.turn !== undefined && below(record.turn))
        found.push(fromRecord(record, done, key));
    };
    if (newest) consider(newest.record, newest.done, newest.key ?? recordKey(scope, newest.record.record));
    for (
      let unit = newest && found.length < wanted ? await cursor.next() : null;
      unit;
      unit = found.length < wanted ? await cursor.next() : null
    ) {
      if (unit.kind === 'record') {
        const { record, done } = await readRecord(log, unit);
        consider(record, done, unit.key);
        continue;
      }
      const reader = new SegmentReader(log.store, unit.key, unit, 8 * 1024);
      const count = (await reader.index()).turns.records.length;
      if (count === 0) continue;
      if (unit.ceiling !== undefined) {
        // A fork's ancestor's segment: only its turns up to the fork point are the fork's.
        const ceiling = unit.ceiling;
        const mine = (await reader.turns(0, count)).filter(
          (turn) => turn.first_seq !== undefined && turn.first_seq <= ceiling && below(turn.turn),
        );
        for (const turn of mine.reverse().slice(0, wanted - found.length)) found.push(fromSegment(turn, unit.key));
        continue;
      }
      let last = count - 1;
      if (before !== undefined) {
        const [first] = await reader.turns(0, 1);
        last = Math.min(last, before - 1 - first!.turn);
        if (last < 0) continue;
      }
      const from = Math.max(0, last + 1 - (wanted - found.length));
      const turns = await reader.turns(from, last + 1);
      for (const turn of turns.reverse()) if (below(turn.turn)) found.push(fromSegment(turn, unit.key));
    }
    // Only the newest record can be open.
    const open = found[0];
    if (open?.background !== undefined && !(await log.store.head(leaseKey(scope, open.background))))
      open.summary.status = 'queued';
    return found.slice(0, wanted);
  });
}

function fromRecord(record: LogRecord, done: DoneRecord | null, key: string): RawTurn {
  const receipt = receiptSchema.parse(done?.receipt ?? {});
  const inputs = record.items.length;
  const outputs = done?.items.length ?? 0;
  const background = isBackgroundRecord(record);
  return spentAt(key, {
    record: record.record,
    receipt,
    ...(background && !done ? { background: record.record } : {}),
    ...(background ? { backgroundKey: key } : {}),
    ...(isJournaledRecord(record) ? { journaled: true } : {}),
    ...(done?.response !== undefined ? { response: done.response } : {}),
    summary: {
      ...common(
        record.turn!,
        done ? closedState(done.status, done.error?.code) : 'in_progress',
        receipt,
        done?.error ?? null,
        requestModelSchema.parse(record.request ?? {}).model,
        background,
      ),
      started_at: record.created_at,
      completed_at: done?.completed_at ?? null,
      input: inputs > 0 ? { first_seq: record.first_seq, last_seq: record.first_seq + inputs - 1 } : null,
      output:
        outputs > 0
          ? { first_seq: record.first_seq + inputs, last_seq: record.first_seq + inputs + outputs - 1 }
          : null,
    },
  });
}

function fromSegment(turn: SegmentTurn, key: string): RawTurn {
  const receipt = receiptSchema.parse(turn.receipt ?? {});
  const first = turn.first_seq;
  const inputs = turn.input_count ?? 0;
  const outputs = turn.output_count ?? 0;
  return spentAt(key, {
    record: turn.record,
    receipt,
    ...(turn.journaled ? { journaled: true } : {}),
    ...(turn.response !== undefined ? { response: turn.response } : {}),
    summary: {
      ...common(turn.turn, closedState(turn.status, turn.error?.code), receipt, turn.error ?? null, '', false),
      started_at: turn.started_at ?? null,
      completed_at: turn.completed_at ?? null,
      input: first !== undefined && inputs > 0 ? { first_seq: first, last_seq: first + inputs - 1 } : null,
      output:
        first !== undefined && outputs > 0
          ? { first_seq: first + inputs, last_seq: first + inputs + outputs - 1 }
          : null,
    },
  });
}

/** `turn`, read from the record or segment at `key`, with where it stored what it spent if it was stopped. */
function spentAt(key: string, turn: RawTurn): RawTurn {
  const spent = stoppedSpendKey(key, turn.summary.turn, turn.summary);
  return spent === undefined ? turn : { ...turn, spent };
}

function common(
  turn: number,
  status: TurnState,
  receipt: Receipt,
  error: TurnSummary['error'],
  requestModel: string,
  background: boolean,
) {
  return {
    turn,
    status,
    model: receipt.model ?? (requestModel || null),
    strategies: receipt.strategies ?? [],
    context: receipt.context ?? null,
    notices: receipt.notices ?? [],
    usage: receipt.usage ?? null,
    ...(receipt.usage && receipt.usage_estimated ? { usage_estimated: true as const } : {}),
    ...(receipt.compaction_usage ? { compaction_usage: receipt.compaction_usage } : {}),
    ...(receipt.incomplete ? { incomplete: receipt.incomplete } : {}),
    ...(background || receipt.background ? { background: true as const } : {}),
    error,
  };
}

/** Adds `prefix_reused_chars`: each turn's prompt against the next older turn's, when both are known. */
function withReuse(raw: RawTurn[]): TurnSummary[] {
  return raw.map((turn, index) => {
    const previous = raw[index + 1];
    const current = turn.receipt.prompt;
    const reused =
      current && previous && previous.summary.turn === turn.summary.turn - 1 && previous.receipt.prompt
        ? reusedPrefixChars(current, previous.receipt.prompt)
        : turn.summary.turn === 1 && current
          ? 0
          : null;
    return { ...turn.summary, prefix_reused_chars: reused };
  });
}
