import type { Item, PromptItem, StoredItem } from '../items.ts';
import type { HistoryAggregates, TailRequirement } from '../history.ts';
import { hydrateMedia, type NeedsBytes } from './attachments.ts';
import type { LogScope } from './keys.ts';
import { appendItems, type AppendOptions, type Appended, type AppendedAgain } from './log/append.ts';
import { beginTurn, completeTurn, TurnClaim, type ClaimOptions } from './log/claim.ts';
import {
  commitTurnContext,
  compact,
  contextAt,
  contextsAfter,
  currentContext,
  turnContext,
  type Compacted,
  type CompactOptions,
  type Summarize,
} from './log/compaction.ts';
import { PARALLEL_GETS } from './log/context.ts';
import { pack } from './log/packer.ts';
import { holderScope, type RewindOptions } from './log/rewind.ts';
import { packScheduleOf, type OverdueAppend, type PackSchedule } from './log/pack-schedule.ts';
import { putStateAfter } from './log/state-record.ts';
import { hydrate, listItems, payloadKey } from './log/item-pages.ts';
import { readContext } from './log/tail-reader.ts';
import { previewContext, sketchFork, type ForkSketch, type PreviewContext } from './log/preview-context.ts';
import type { ForkOptions } from './log/fork.ts';
import type {
  BeginTurnResult,
  NewContext,
  OpenTurn,
  PackOptions,
  PackResult,
  TurnHistory,
  TurnOutcome,
} from './log/types.ts';
import { needsView } from './log/views.ts';
import type { SweepResult } from './log/retention.ts';
import {
  getTurn,
  listTurns,
  turnItems,
  turnRecord,
  type SeenItem,
  type TurnSight,
  type TurnSummary,
} from './log/turns.ts';
import type { ContextStart, OverflowBoundary } from './records.ts';
import { readAgainIfGone } from './session-log-base.ts';
import { SessionLogRunning } from './session-log-running.ts';
export { MAX_PAGE_BYTES } from './log/item-pages.ts';

export type * from './log/types.ts';
export type { ImportLine } from './log/import.ts';
export type { ForkOptions } from './log/fork.ts';
export type { ForkSketch } from './log/preview-context.ts';
export type { RewindOptions } from './log/rewind.ts';
export type { SeenItem, SweepResult, TurnSight, TurnSummary };
export type { TailRequirement };

/**
 * The session log on an ObjectStore (docs/STORAGE.md): a write-once log whose commit
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
export class SessionLog extends SessionLogRunning {
  /** When this process packs sessions of this store: one pack at a time, debt bound, backoff (log/pack-schedule.ts). */
  readonly packSchedule: PackSchedule = packScheduleOf(this.log.store);

  /**
   * Appends items without a model turn (POST /items): one create-only record. Seqs are dense
   * from 1 and never reused; racing appends retry until each one commits.
   * An open model turn: TurnInProgressError. `packsOverdue`: the caller packs with a view before
   * it answers when the result's `overdue` says so (lib/turn/append.ts), so the record need not
   * carry the records that view covers. `onlyFirst`: the items go in as the session's first record
   * or not at all (a keyed create's items, lib/openai/conversations.ts): with a record there,
   * nothing is written and the result is that record's. `onLapsed`: told a turn whose lease ran
   * out that the append would close or follow, what it throws refusing the append
   * (CommitOptions.onLapsed). `key`: an Idempotency-Key's SHA-256 and the request's
   * (log/append-key.ts): a retry is answered `replayed` with the seqs the first one stored,
   * nothing written, and the key of another request is IdempotencyKeyReusedError (422).
   */
  append(id: string, items: Item[], options?: AppendOptions & { key?: undefined }): Promise<Appended>;
  append(id: string, items: Item[], options: AppendOptions): Promise<Appended | AppendedAgain>;
  async append(id: string, items: Item[], options: AppendOptions = {}): Promise<Appended | AppendedAgain> {
    return appendItems(this.log, id, items, options);
  }

  /**
   * After an overdue append packed, its record of no items when it was large (log/state-record.ts):
   * never throws, a failed put is told to `failed`.
   */
  async putStateAfter(overdue: OverdueAppend, failed?: (error: unknown) => void): Promise<boolean> {
    return putStateAfter(this.log, this.packSchedule.writtenView(overdue.scope.id), overdue, failed);
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
  async beginTurn(id: string, options: ClaimOptions): Promise<BeginTurnResult> {
    return beginTurn(this.log, id, options);
  }

  /**
   * The same claim, attempt by attempt, so a caller can start work on the turn while its
   * record is being put: each `next()` reads the head and returns the turn as it will be,
   * with `landed`, its create-only put already started (false: another writer took the
   * number; nothing of this attempt may be kept, call `next()` again). Keyed turns write
   * `idem/` once their record landed, before `landed` resolves.
   */
  claimTurn(id: string, options: ClaimOptions): TurnClaim {
    return new TurnClaim(this.log, id, options);
  }

  /**
   * The tail view of the history for an open turn (what `selectTail(full history,
   * requirement)` returns), read newest first and only as far as needed: the suffix holding
   * `toolCalls` calls and outputs, and before it only messages and the required calls (with
   * their outputs). Usually it comes from the view and the items after it that the claim
   * read; tool items outside `requirement.wholeCalls` may then come as the strategies compact
   * them (`compacted`). Outputs stored out of line come as `output_ref` with an empty `output`.
   * `start`: the overflow boundary the turn's prompt starts at (see `fromBoundary`): the view
   * is of the history from its `message_start_seq` on. Says whether the read went past the view
   * (the next turn then wants a fresh one). `requirement` may be a function of the aggregates:
   * a read that needs older entries of a split `repeated` than the claim's aggregates hold reads
   * them and asks it again (TurnHistory.aggregates). `from`: the context starts there, not at
   * the turn's context start (a compaction the turn made).
   */
  async readContext(
    turn: OpenTurn,
    requirement: TailRequirement | ((aggregates: HistoryAggregates) => TailRequirement),
    start: OverflowBoundary | null = null,
    from?: number,
  ): Promise<TurnHistory> {
    return readContext(this.log, turn, requirement, start, from);
  }

  /**
   * Whether the next turn would be better served by a fresh view (as it is when this turn's
   * read went past it: `readContext` says so): with this turn's `output` stored, the strategies
   * (`requirement` of the aggregates then) compact or drop items the view holds whole, or need
   * a tail it lacks (a new epoch began). The caller then packs with `refresh`.
   */
  needsView(
    turn: OpenTurn,
    requirement: (aggregates: HistoryAggregates) => TailRequirement,
    output: readonly StoredItem[] = [],
  ): boolean {
    return needsView(this.log.viewPolicy, turn, requirement, output);
  }

  /**
   * Moves the context start of an open turn (an in-turn compaction): the summary is stored
   * first, create-only under `context/<inverted turn record>`, and the turn's completion
   * commits it (its `context`). A crash before the completion leaves the previous context
   * (the expired turn is closed with the context it started with). When the key is taken
   * (the same compaction ran already), the stored one wins. Returns it: the turn's
   * `TurnOutcome` carries it to the completion. A context `contextStartSchema` refuses (what its
   * readers would refuse) is InvalidRequestError, nothing stored.
   */
  async commitTurnContext(turn: OpenTurn, next: NewContext): Promise<ContextStart> {
    return commitTurnContext(this.log, turn, next);
  }

  /**
   * A manual compaction (POST /compact): reads the current context back to its start and
   * hands it to `summarize`, which returns the new context start and its model call's usage
   * (or null: nothing to do), claiming the session before its model call (log/compaction-claim.ts:
   * a `compact` record with a lease; TurnInProgressError while a turn or another compaction holds
   * it). The summary is stored create-only under `context/<inverted record read>`, then a `compact`
   * record carrying it and the session's totals with that usage commits the move and ends the
   * claim (every summary made is charged in a record: one overtaken carries the newer context).
   * An open turn: TurnInProgressError. A summary whose context `contextStartSchema` refuses (an
   * empty `summarized` range, say) is InvalidRequestError: nothing stored, and its claim
   * ended charging the summary's usage. `onLapsed`: told a turn whose lease ran out that the
   * compaction's claim would close or follow, what it throws refusing the claim (nothing written;
   * CommitOptions.onLapsed).
   */
  async compact(id: string, summarize: Summarize, options: CompactOptions = {}): Promise<Compacted> {
    return compact(this.log, id, summarize, options);
  }

  /** The current context start of a session (null: never compacted). */
  async currentContext(id: string): Promise<ContextStart | null> {
    return readAgainIfGone(() => currentContext(this.log, id));
  }

  /**
   * The compaction of the session whose context starts at `startSeq`, the current one or one a later
   * compaction superseded (its summary stays stored): one list per incarnation of its history, and a
   * read per compaction from the newest back to it, a few at once. Null: none starts there.
   */
  async contextAt(id: string, startSeq: number): Promise<ContextStart | null> {
    return contextAt(this.log, await this.scope(id), startSeq);
  }

  /**
   * The compactions of the session that start after seq `seq`, newest first: contextAt's walk,
   * one list per incarnation of its history and a read of each such compaction (and of the one before).
   */
  async contextsAfter(id: string, seq: number): Promise<ContextStart[]> {
    return contextsAfter(this.log, await this.scope(id), seq);
  }

  /**
   * The context start stored under turn `turn`'s record: the one the turn's own compaction
   * wrote, which later compactions leave as it is (null: none there). A missing turn: NotFoundError.
   */
  async turnContext(id: string, turn: number): Promise<ContextStart | null> {
    const [found, scope] = await Promise.all([turnRecord(this.log, id, turn), this.scope(id)]);
    return turnContext(this.log, found.seq === undefined ? scope : holderScope(scope, found.seq), found.record);
  }

  /**
   * The tail view of the whole committed history for a prompt preview (no turn, no writes):
   * `requirement` is computed from the history's aggregates, which are returned too.
   * `fromOverflow`: read from the stored overflow boundary on, as a turn under the safety net does.
   * `from`: the context starts there (a compaction the previewed turn would make). A `ForkSketch`
   * (sketchFork): the history the first turn of that fork would read, were it written. A newest
   * turn open past its lease is read closed, as the next claim closes it (log/lease.ts asClaimCloses).
   * Given `tookNothing` (as for deleteTurn), the dead turn of a turn answered at its end, which the
   * next turn takes out first, is read taken out, unless its delete is refused (log/dead-preview.ts).
   */
  async previewContext(
    id: string | ForkSketch,
    requirement: (aggregates: HistoryAggregates, context: ContextStart | null) => TailRequirement,
    fromOverflow = false,
    from?: number,
    tookNothing?: RewindOptions['tookNothing'],
  ): Promise<PreviewContext> {
    return readAgainIfGone(() => previewContext(this.log, id, requirement, fromOverflow, from, tookNothing));
  }

  /**
   * A fork of session `id` as `fork` would write it (`fields` beside the parent's: no `id`, a
   * random one stands), nothing written: its session record and what `previewContext` reads its
   * history from. Refused as `fork` refuses it (ForkRefusedError, InvalidRequestError).
   */
  async sketchFork(id: string, options: ForkOptions): Promise<ForkSketch> {
    return sketchFork(this.log, id, options);
  }

  /** Fetches the payloads of items still carrying `output_ref` (at most 6 gets at a time). */
  async hydrate(scope: LogScope, items: PromptItem[]): Promise<PromptItem[]> {
    return hydrate(this.log, scope, items);
  }

  /**
   * Reads the blob of each image and file the items reference into its part's `data` (at most
   * 6 gets at a time, each blob once). Call it with the prompt a turn sends, once it is final:
   * token counts need only the references. `known`: bytes the caller holds already (the
   * turn's own input's), read from no blob.
   */
  async readMedia(
    scope: LogScope,
    items: PromptItem[],
    needsBytes?: NeedsBytes,
    known?: (sha256: string) => Uint8Array | undefined,
  ): Promise<PromptItem[]> {
    // A fork's inherited images are where its ancestors stored them.
    const keyOf = (sha256: string) => payloadKey(this.log, scope, sha256);
    return hydrateMedia(this.log.store, items, keyOf, PARALLEL_GETS, needsBytes, known);
  }

  /**
   * Closes a turn with its outcome: output items get the next seqs, the response is kept for
   * idempotent replay, and a context start or overflow boundary the turn moved is stored. A
   * keyed turn's `idem/` object is written first. Write-once: a turn closed already by someone
   * else (its lease expired, or it was cancelled) gives TurnClosedError with that reason, and
   * nothing of this outcome is stored. A session deleted meanwhile closed the turn itself:
   * NotFoundError.
   */
  async completeTurn(turn: OpenTurn, outcome: TurnOutcome): Promise<StoredItem[]> {
    return completeTurn(this.log, turn, outcome);
  }

  /**
   * A page of items, newest first: those with seq < `before` (all when absent), at most
   * `limit` (1..1000) and about MAX_PAGE_BYTES of items (at least one), with payloads whole.
   * Reads from the tail, so the newest page costs the same however long the session is.
   */
  async listItems(
    id: string,
    options: { before?: number; limit: number },
  ): Promise<{ items: StoredItem[]; has_more: boolean; next_before: number | null }> {
    return readAgainIfGone(() => listItems(this.log, id, options));
  }

  /**
   * Writes a view of the newest closed record when one is due (see `writeViewIfDue` in log/view-writer.ts), then
   * packs closed records older than the newest `keepRecords` into one immutable segment once
   * at least `packMinRecords` of them exist (any number after a new view), merging into the
   * newest segment while it is below the target size; the records and completions it covers
   * become empty tombstones (their keys stay taken), replaced segments, views and leases are
   * deleted. Safe to run concurrently and to interrupt anywhere: readers prefer a segment over
   * the records it covers, and the next run cleans up leftovers. Call it after a turn (e.g. in the
   * background).
   */
  async pack(sessionId: string, options: PackOptions = {}): Promise<PackResult> {
    return pack(this.log, sessionId, options);
  }

  /**
   * Model turns newest first (numbered below `before`, at most `limit`), each with its
   * outcome, times, settings, `context` counts, notices, usage and seq ranges (log/turns.ts).
   */
  async listTurns(
    id: string,
    options: { before?: number; limit: number },
  ): Promise<{ turns: TurnSummary[]; has_more: boolean; next_before: number | null }> {
    return listTurns(this.log, id, options);
  }

  /**
   * One turn with what its model saw, rebuilt from its receipt. A missing turn: NotFoundError.
   * `spent`: a turn closed by someone else shows what it stored spent (log/stopped-receipt.ts).
   */
  async getTurn(
    id: string,
    turn: number,
    options: { spent?: boolean } = {},
  ): Promise<TurnSummary & { receipt: TurnSight | null }> {
    return getTurn(this.log, id, turn, options);
  }

  /** A page of the items up to a turn's input, newest first, each with its treatment in that turn. */
  async turnItems(
    id: string,
    turn: number,
    options: { before?: number; limit: number },
  ): Promise<{ items: SeenItem[]; has_more: boolean; next_before: number | null }> {
    return turnItems(this.log, id, turn, options);
  }
}
