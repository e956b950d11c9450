import { AbortedError, LeaseHeldError, NotFoundError, TailgateError, TurnClosedError } from '../errors.ts';
import { SessionDeletedError } from '../session-deleted.ts';
import type { TokenSpend } from '../ledger/token-spend.ts';
import { providerMayHaveRun } from '../models/provider-reach.ts';
import type { TokenLogprob } from '../models/model.ts';
import type { TurnUsage } from '../ledger/usage.ts';
import { ClosedByItsCompletionError } from '../session/log/owner-closed.ts';
import type { OpenTurn, TurnOutcome } from '../session/log/types.ts';
import type { StoppedSpendRecord, Undelivered } from '../session/records.ts';
import type { InboxAbort } from '../inbox/index.ts';
import type { StoredItem } from '../items.ts';
import { logUnlessGone } from '../log-unless-gone.ts';
import { afterResponse, storeThenList } from './after-response.ts';
import { afterOwnClose } from './own-close.ts';
import { backgroundSpend, chargedBeforeClose } from './background-charge.ts';
import { pickUp } from './pickup.ts';
import type { TurnNotices } from './notices.ts';
import type { TurnPlan } from './plan.ts';
import type { PromptInputs } from './turn-prompt.ts';
import { errorRecord, noticeRecord, type TurnReceipt } from './receipt.ts';
import type { TurnTrace } from './trace.ts';
import type { CallMeter, StoppedSpend } from './stopped-spend.ts';
import type { LeaseRenewal } from './renewal.ts';
import type { TurnResponse, TurnServices } from './types.ts';

/**
 * Closing a claimed turn, the one place that does it: completed (lib/turn/pipeline.ts hands
 * over the turn's `TurnOutcome`), failed (the input stays stored, the notices it took are
 * carried on or given back) and aborted (an `abort` notice, found by lib/turn/notices.ts).
 * The claim (`OpenTurn`) is a read-only snapshot: what the turn moved (the context start a
 * compaction stored, the overflow boundary its fitted prompt moved) goes in the outcome.
 */

/** What one attempt has decided so far, for closing it when it fails. */
export interface Attempt {
  turn: OpenTurn;
  trace: TurnTrace;
  plan?: TurnPlan;
  receipt?: () => Promise<TurnReceipt>;
  /** The prompt's inputs, with the context start and the overflow boundary the prompt moved. */
  prompt?: PromptInputs;
  notices?: TurnNotices;
  /** Aborted (with the error to answer) once its lease renewals find someone else closed it. */
  stop: AbortController;
  /** What its model calls spent, charged by itself when someone else closed it (chargeStopped). */
  meter: CallMeter;
  /** Set once it charged what it spent, stopped by someone else. */
  stopped?: StoppedSpend;
  /** A background turn's: its runner holds the lease before it moves a notice or calls a model. */
  background?: true;
  /** A background turn's runner took the lease over from another runner of the turn. */
  earlierRun?: true;
  /** A background turn's runner: when it set out to take the lease (TakenLease.at). */
  leaseAt?: number;
  /** Set once this attempt's own failed completion landed (closeFailed). */
  closedFailed?: true;
  /** Its lease's renewals, once its claim landed (closeFailed stops them first). */
  renewal?: LeaseRenewal;
  /** Told its model's log probabilities (TurnOptions.onLogprobs). */
  onLogprobs?: (logprobs: TokenLogprob[][]) => void;
}

/**
 * What the turn's prompt moved, for its outcome: the context start and the overflow boundary,
 * with what the compaction's summary used (which only a completed turn's totals take).
 */
export function promptMoves(
  prompt: PromptInputs | undefined,
): Pick<TurnOutcome, 'context' | 'overflow' | 'summaryUsage'> {
  return {
    ...(prompt?.compacted ? { context: prompt.compacted } : {}),
    ...(prompt?.moved ? { overflow: prompt.moved } : {}),
    ...(prompt?.summaryUsage ? { summaryUsage: prompt.summaryUsage } : {}),
  };
}

/** Stores how the turn ended (its completion): the outcome the pipeline built. */
export function closeTurn(services: TurnServices, turn: OpenTurn, outcome: TurnOutcome): Promise<StoredItem[]> {
  return services.sessions.completeTurn(turn, outcome);
}

/**
 * Closes the turn as aborted by an `abort` notice (the other notices carried on) and throws
 * AbortedError. Its receipt names the notices it took, as `GET .../inbox/delivered` lists them
 * under it: those it would have shown (carried on to the next turn), then the `abort`.
 */
export async function closeAborted(
  services: TurnServices,
  turn: OpenTurn,
  plan: TurnPlan,
  notices: TurnNotices,
  abort: InboxAbort,
): Promise<never> {
  const error = new AbortedError(abort.reason, {
    reason: abort.reason,
    notice: abort.name,
    stored_as: abort.stored_as,
    turn: turn.turn,
  });
  await closeTurn(services, turn, {
    status: 'aborted',
    output: [],
    receipt: {
      strategies: plan.strategies,
      notices: [...notices.delivered, abort].map(noticeRecord),
      abort: { name: abort.name, stored_as: abort.stored_as, reason: abort.reason },
    },
    error: errorRecord(error),
    undelivered: notices.undelivered,
  });
  throw error;
}

/**
 * Closes a claimed turn that failed (unless someone else closed it) and rethrows. Its lease's
 * renewals stop first; its answer waits for none under way (a store call may never answer). A
 * turn whose session was deleted (404: stopped by it, or its completion refused by its fence)
 * forgets the notices it took (they went with the session) and, after its answer, once the
 * renewals under way ended, removes what it left beside the delete's fence (`SessionLog.leaveDeleted`).
 */
export async function closeFailed(
  services: TurnServices,
  sessionId: string,
  attempt: Attempt,
  failure: unknown,
): Promise<never> {
  const stopped = attempt.renewal?.stop();
  try {
    return await closeFailedTurn(services, sessionId, attempt, failure);
  } catch (error) {
    if (!(error instanceof NotFoundError)) throw error;
    const { turn } = attempt;
    const taken = takenBy(attempt);
    if (taken.length > 0) await services.inbox.forget(sessionId, taken, turn.turn);
    afterResponse(services, async () => {
      await stopped;
      await services.sessions.leaveDeleted(turn);
    });
    throw error;
  }
}

/** The notices an attempt took from the inbox or took over (not the ones its turn was claimed with). */
function takenBy(attempt: Attempt): Undelivered['notices'] {
  const { turn } = attempt;
  const undelivered = attempt.notices?.undelivered ?? turn.undelivered;
  return undelivered.notices.filter(
    (notice) => !turn.undelivered.notices.some((earlier) => earlier.stored_as === notice.stored_as),
  );
}

/**
 * The notices an attempt stopped by someone else gives back: those it took, but, for a background
 * turn, none that another run of it may still show or carry on. Closed by another run (one that
 * stalled past a renewal while this run took its lease and notices over, then completed or failed
 * the turn before it learned): none that close showed or carries on (packed since, its segment
 * line tells them); and when that close cannot be read (the get fails, or an older pack wrote a
 * line that does not tell what it carries on), none it took over that another run of the turn
 * held before it (moved, or took over first: `TurnNotices.heldBefore`). One it took over
 * that no other run held (the others found it this run's) goes back: no close of the turn shows
 * it. Its lease taken over by a later run of the turn: the same, and that run takes over what it
 * keeps in turn (an earlier run may yet close the turn showing them). What it keeps, a close by
 * someone else names the turn in `lost_turns` for: the next turn takes those over (docs/STORAGE.md,
 * "Notices"). `anyRun`: the close was read, and no run of the turn can show what goes back, so
 * a notice a later run took over from this one goes back too (that run, unable to read the
 * close, keeps it: lib/inbox/carry.ts `giveBack`).
 */
async function givenBack(
  services: TurnServices,
  attempt: Attempt,
  error: unknown,
): Promise<{ notices: Undelivered['notices']; anyRun?: true }> {
  const taken = takenBy(attempt);
  if (!attempt.background || taken.length === 0) return { notices: taken };
  const held = attempt.notices?.heldBefore ?? new Set<string>();
  const ownOnly = () => ({ notices: taken.filter((notice) => !held.has(notice.stored_as)) });
  if (error instanceof LeaseHeldError) return ownOnly();
  if (!(error instanceof TurnClosedError)) return { notices: taken };
  const accounted = await services.sessions.closerNotices(attempt.turn).catch((readError: unknown) => {
    services.log('tailgate: could not read the completion that closed a background turn', readError);
    return null;
  });
  if (accounted === null) return ownOnly();
  return { notices: taken.filter((notice) => !accounted.has(notice.stored_as)), anyRun: true };
}

/** Gives back to the inbox what an attempt stopped by someone else (`error`) gives back (givenBack). */
async function giveBackTaken(
  services: TurnServices,
  sessionId: string,
  attempt: Attempt,
  error: unknown,
): Promise<void> {
  const { turn } = attempt;
  const { notices, anyRun } = await givenBack(services, attempt, error);
  if (notices.length > 0)
    await services.inbox.giveBack(
      sessionId,
      notices,
      turn.turn,
      { created_at: turn.session.created_at, incarnation: turn.scope.incarnation },
      anyRun ? { anyRun } : turn.writer,
    );
}

async function closeFailedTurn(
  services: TurnServices,
  sessionId: string,
  attempt: Attempt,
  failure: unknown,
): Promise<never> {
  // Closed by the turn's own completion whose webhook event then failed (its intent not known
  // stored): the turn is answered the event's error.
  const closedByCompletion = failure instanceof ClosedByItsCompletionError;
  const error = closedByCompletion ? failure.cause : failure;
  const { sessions } = services;
  const { turn } = attempt;
  // Moves in flight finish first, so the completion carries every notice taken.
  await attempt.notices?.settle().catch(() => undefined);
  const undelivered: Undelivered = attempt.notices?.undelivered ?? turn.undelivered;
  // Closed by someone else (lease, cancel, a delete), or run by another runner that took its
  // lease over: the notices this turn took from the inbox or took over go back (the closer's
  // completion carries the older ones on; the other runner's prompt could not show them), but
  // for those an earlier run of it that closed it showed or carries on (givenBack).
  const byOther = error instanceof TurnClosedError || error instanceof NotFoundError || error instanceof LeaseHeldError;
  if (byOther) {
    // A delete's went with the session: closeFailed forgets them.
    if (!(error instanceof NotFoundError)) await giveBackTaken(services, sessionId, attempt, error);
    await chargeStopped(services, attempt, error);
  }
  // Closed by the abort itself, or by the turn's own completion (above): the queue is taken up,
  // as after any close by the turn's own completion.
  const closedItself = error instanceof AbortedError || closedByCompletion;
  // Another run of a background turn may have moved notices for it meanwhile (afterOwnClose).
  if (closedItself) await afterOwnClose(services, sessionId, attempt);
  if (closedItself) afterResponse(services, () => pickUp(services, sessionId, turn.scope, closedBefore(turn)));
  if (closedByCompletion) await chargeCounted(services, turn, failure);
  // Closed by someone else, by the turn itself, deleted, or run elsewhere: nothing more to store.
  if (closedItself || byOther) throw error;
  // The summary its compaction made is charged as a completed turn's is (as no turn), and shown so;
  // so is a model call that answered (its answer refused: an item over MAX_ITEM_BYTES), billed all the
  // same, and one its provider may have run (it timed out in flight, or failed after the provider
  // accepted it) or that streamed output, estimated (CallMeter.failed).
  const summary = attempt.prompt?.summaryUsage;
  const price = attempt.plan && services.config.modelPrices[attempt.plan.model.id];
  const called = attempt.plan ? attempt.meter.failed(price, providerMayHaveRun(error)) : null;
  // The turn's log line and metrics count it, as a stopped turn's.
  if (called) attempt.stopped = called;
  const answered = called?.usage;
  const estimated = called?.estimated ? ({ usage_estimated: true } as const) : {};
  try {
    // Failed before its prompt was built: the receipt names its model all the same (lib/turn/replay.ts).
    const { plan } = attempt;
    const receipt = (await attempt.receipt?.()) ?? {
      ...(plan && { model: plan.model.id }),
      strategies: plan?.strategies ?? [],
    };
    await closeTurn(services, turn, {
      status: 'failed',
      output: [],
      receipt: {
        ...receipt,
        ...(answered && { usage: answered, ...estimated }),
        ...(summary && { compaction_usage: summary }),
      },
      error: errorRecord(error),
      undelivered,
      ...(answered && { usage: answered }),
      ...promptMoves(attempt.prompt),
    });
    attempt.closedFailed = true;
    await afterOwnClose(services, sessionId, attempt);
    afterResponse(services, () => pickUp(services, sessionId, turn.scope, closedBefore(turn)));
    await chargeToken(services, turn, answered, 0, summary);
  } catch (closeError) {
    // Its notices go back as any stopped turn's: a background turn's other run that closed it
    // carries on only those it showed, not those this run moved itself.
    if (closeError instanceof TurnClosedError) await giveBackTaken(services, sessionId, attempt, closeError);
    // Closed by someone else meanwhile, whose completion names the turn, or left open (its store
    // failing), for a closer to name once its lease ran out: what its own failed completion would
    // have counted (its answer, its summary) is charged and stored, as any stopped turn's.
    if (closeError instanceof TurnClosedError || leftOpen(attempt, closeError)) {
      await chargeToken(services, turn, answered, 0, summary);
      storeSpent(services, turn, {
        ...(called && { usage: called.usage, estimated: called.estimated }),
        ...(summary && { summary_usage: summary }),
      });
    }
    if (closeError instanceof TurnClosedError || closeError instanceof NotFoundError) throw closeError;
    if (closeError instanceof ClosedByItsCompletionError) {
      // Its failed completion stands (its totals took the summary); only its webhook event failed.
      attempt.closedFailed = true;
      await afterOwnClose(services, sessionId, attempt);
      afterResponse(services, () => pickUp(services, sessionId, turn.scope, closedBefore(turn)));
      await chargeCounted(services, turn, closeError);
      if (answered) await chargeToken(services, turn, answered, 0, undefined);
      services.log('tailgate: the webhook event of a failed turn could not be written', closeError.cause);
    } else services.log('tailgate: could not close a failed turn', closeError);
  }
  // A storage failure while the session was being deleted is the delete's doing: 404.
  if (!(error instanceof TailgateError) || error.code === 'corrupt_object' || error.code === 'storage_error') {
    if (!(await sessions.exists(turn.scope).catch(() => true))) throw new SessionDeletedError(sessionId, turn.turn);
  }
  throw error;
}

/** Whether a failed completion that threw `error` left the turn open: not stored, nor refused by another close. */
function leftOpen(attempt: Attempt, error: unknown): boolean {
  return !attempt.closedFailed && !(error instanceof NotFoundError) && !(error instanceof ClosedByItsCompletionError);
}

/**
 * Charges the turn's token what a turn stopped by someone else spent (its call: the provider's usage, else estimated;
 * its summary), as no turn: the closer's completion counts none of it. Once per attempt, its completion not landed.
 * Closed: the closer's completion names the turn, whose totals count what it stores (nothing spent too: the chain waits
 * no longer). Lease taken over: a charge. Deleted, or its own completion landed unseen (it counted them): nothing.
 */
async function chargeStopped(services: TurnServices, attempt: Attempt, error: unknown): Promise<void> {
  const { turn, plan } = attempt;
  const stopped = plan ? attempt.meter.spent(services.config.modelPrices[plan.model.id]) : null;
  if (stopped) attempt.stopped = stopped;
  const summary = attempt.prompt?.summaryUsage;
  const charged = chargeToken(services, turn, stopped?.usage, 0, summary);
  const spent: Omit<StoppedSpendRecord, 'format'> = {
    ...(stopped && { usage: stopped.usage, estimated: stopped.estimated }),
  };
  if (summary) spent.summary_usage = summary;
  if (error instanceof TurnClosedError) storeSpent(services, turn, spent);
  else if (error instanceof LeaseHeldError && (stopped || summary))
    storeThenList(services, turn.scope.id, () => services.sessions.storeStoppedSpend(turn, spent, true));
  await charged;
}

/** Stores, in the background, what `turn`, closed by someone else, spent (log/unbilled.ts), then lists it. */
function storeSpent(services: TurnServices, turn: OpenTurn, spent: Omit<StoppedSpendRecord, 'format'>): void {
  storeThenList(services, turn.scope.id, () => services.sessions.storeStoppedSpend(turn, spent));
}

/** Charges the turn's token `usage` (as `turns` turns) and `summary` (as none), landed before its answer. */
export async function chargeToken(
  services: TurnServices,
  turn: OpenTurn,
  usage: TurnUsage | undefined,
  turns: 0 | 1,
  summary: TurnUsage | undefined,
): Promise<void> {
  const spend = usage || summary ? turnSpend(services, turn) : undefined;
  if (usage) await spend?.chargeNow(services, usage, turns, summary);
  else if (summary) await spend?.chargeNow(services, summary, 0);
}

/**
 * Charges the turn's token what its own completion counted in the session's totals when only
 * its webhook event then failed (ClosedByItsCompletionError): the turn was closed all the same.
 */
function chargeCounted(services: TurnServices, turn: OpenTurn, closed: ClosedByItsCompletionError): Promise<void> {
  return chargeToken(services, turn, closed.counted.usage, 1, closed.counted.summaryUsage);
}

/** What a pickup after this turn's own close needs to tell that the session went idle. */
export function closedBefore(turn: OpenTurn) {
  return { turn: turn.turn, webhookUrl: turn.session.webhook_url ?? null, signal: turn.queueSignal };
}

/**
 * Tells `onBackgroundCompaction` of a background turn that completed having compacted its
 * session, with the token it is charged to (backgroundSpend's); a failure is logged, but
 * for the session or turn deleted meanwhile (nothing is left to index).
 */
export async function tellCompaction(services: TurnServices, turn: OpenTurn, response: TurnResponse): Promise<void> {
  const told = services.onBackgroundCompaction;
  if (!told || !response.context.compaction) return;
  const session = { id: turn.scope.id, created_at: turn.session.created_at };
  const caller = backgroundSpend(services, turn)?.budget.id ?? '';
  await told({ session, generation: turn.scope.generation, response, caller }).catch((error: unknown) =>
    logUnlessGone(services.log, 'tailgate: could not index the compaction of a background turn', error),
  );
}

/**
 * The spend a turn is charged to: a background turn's, the token its record names (none once it was charged before
 * its completion: chargeBeforeClose); else the request's token's.
 */
function turnSpend(services: TurnServices, turn: OpenTurn): TokenSpend | undefined {
  if (chargedBeforeClose(turn)) return undefined;
  const background = (turn.request as { background?: unknown } | undefined)?.background === true;
  return background ? backgroundSpend(services, turn) : services.tokenSpend;
}
