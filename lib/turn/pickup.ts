import {
  BudgetExhaustedError,
  IdempotencyKeyReusedError,
  InvalidRequestError,
  TurnInProgressError,
} from '../errors.ts';
import { BoundedCache } from '../session/log/bounded-cache.ts';
import type { LogScope } from '../session/keys.ts';
import { checkCalls } from '../session/log/open-calls.ts';
import type { QueuedInput } from '../session/queued-input.ts';
import { QueuedWithdrawnError } from '../session/log/queue-withdraw.ts';
import { heldEntry, idleEntry, type WebhookEntry } from '../webhooks/events.ts';
import { claimInput } from './background.ts';
import { LapsedDeadTurn, refuseLapsedDead, takeOutDead } from './dead-turn.ts';
import type { BackgroundTurn, TurnServices } from './types.ts';

/**
 * The pickup of queued inputs (the busy policy `enqueue`, ./busy.ts; docs/STORAGE.md "Queued
 * inputs"): whoever closes a session's running turn takes the oldest input up as a background
 * turn of its own.
 */

/** The turn whose close a pickup follows: with nothing queued, the session is idle after it. */
export interface ClosedBefore {
  turn: number;
  /** The session's own `webhook_url` (undefined: not known, read when webhooks are on). */
  webhookUrl?: string | null | undefined;
  /** The etag of the queue's signal as the turn's claim listed it, when set: lowered if nothing waits. */
  signal?: string | undefined;
}

/**
 * What a pickup met: `budget_spent` when the session's budget refused the oldest input (it
 * waits), `busy` when a turn whose lease runs holds the session (its close takes the queue up).
 */
export type PickedUp = 'budget_spent' | 'busy' | undefined;

/**
 * Takes up the oldest queued input while the session is idle: claims it as a background turn
 * under its key hash and hands it to a runner, whose completion takes up the next. A claim
 * that replays (its turn was stored by an earlier pickup that died before removing it) only
 * removes it; a busy session leaves the queue to the turn that holds it. At most one turn is
 * started per call. After a close (`closed`), an empty queue sends `session.idle`, and one the
 * spent budget holds `session.held`. An empty queue
 * lowers the queue's signal (log/queue.ts) when one was read set before the listing (`signal`, or
 * the closed turn's), if it is still as read.
 */
export async function pickUp(
  services: TurnServices,
  sessionId: string,
  known?: LogScope,
  closed?: ClosedBefore,
  signal: string | undefined = closed?.signal,
): Promise<PickedUp> {
  const { sessions } = services;
  const scope = known ?? (await sessions.scope(sessionId));
  // Withdrawn inputs met on the way: passed over, their tombstones left to their withdraws. Each
  // is met once and counts as no try, so no number of them keeps the inputs behind from a pickup.
  const withdrawn = new Set<string>();
  // A dead turn answered at its end is taken out before an input is stored after it (./dead-turn.ts),
  // once: one that stays is followed.
  let deadTurn: 'refused' | 'followed' = 'refused';
  for (let tries = 0; tries < 8 + withdrawn.size; tries++) {
    const next = (await sessions.queued(scope)).find((queued) => !withdrawn.has(queued.keyHash));
    if (!next) {
      // Refused: an enqueue raised it since (its entry is listed next time). Failed: it stays raised.
      if (signal) await sessions.lowerQueueSignal(scope, signal).catch(() => false);
      if (closed) await sendAfter(services, scope, closed, (url, now) => idleEntry(scope, closed.turn, url, now));
      return;
    }
    // An input queued under a generation a delete of the newest turn left (log/queue.ts).
    const queue = next.generation === scope.generation ? scope : { ...scope, generation: next.generation };
    const entry = await sessions.readQueued(queue, next.keyHash);
    // Taken up by another pickup meanwhile, or withdrawn.
    if (!entry) {
      if (await sessions.queuedWithdrawing(queue, next.keyHash)) withdrawn.add(next.keyHash);
      continue;
    }
    // Its images and files are where it was queued: the turn reads them in its own generation.
    await sessions.copyBlobs(sessionId, next.generation, entry.input);
    let claimed: Awaited<ReturnType<typeof claimInput>>;
    try {
      claimed = await claimInput(services, sessionId, {
        input: entry.input,
        request: entry.request,
        keyHash: entry.key_sha256,
        fromQueue: true,
        ...(entry.request_sha256 ? { requestHash: entry.request_sha256 } : {}),
        ...(deadTurn === 'refused' ? { onLapsed: refuseLapsedDead } : {}),
        // Once nothing else refuses the claim: a withdraw that lands first refuses it.
        beforeRecord: () => sessions.markQueued(queue, entry.key_sha256, entry.writer),
        // Under a generation the session left (whatever `scope` says): its key may name a turn taken
        // up there or after, perhaps one a delete took out, which its replay would not find.
        check: async (config) => {
          if ((config.generation ?? '') === next.generation) return;
          // Not a generation a delete of the newest turn left: one of an incarnation deleted since
          // (the session was created again), whose inputs are not this session's.
          if (!(config.queued_in ?? []).includes(next.generation)) throw new TakenBefore();
          const left = { ...scope, queuedIn: config.queued_in ?? [] };
          if (await sessions.queuedTakenBefore(left, next)) throw new TakenBefore();
        },
      });
    } catch (error) {
      if (error instanceof TurnInProgressError) return 'busy';
      // The client of the dead turn retries it: stored after this input, its own would be stored twice.
      // `scope` stays as read: the input's turn, claimed in the generation the take-out moved to,
      // lists the signal raised there, which its close lowers. A pickup given `signal` meets none: the
      // claim that listed it refused a dead turn first, and a turn closing itself is no such turn.
      if (error instanceof LapsedDeadTurn) {
        if (!(await takeOutDead(services, sessionId))) deadTurn = 'followed';
        continue;
      }
      // The session's budget is spent: the input waits, listed, until a PATCH raises it (whose
      // pickup takes it up), or its client withdraws it (DELETE .../queue/{queued_turn}).
      if (error instanceof BudgetExhaustedError) {
        tellWaiting(services, sessionId, entry.key_sha256);
        // After a close, told once: `session.held` instead of `session.idle`.
        if (closed)
          await sendAfter(services, scope, closed, (url, now) =>
            heldEntry(scope, closed.turn, url, now, error.details as object),
          );
        return 'budget_spent';
      }
      // One queued again under its key since is read again: it is an input of its own.
      if (error instanceof QueuedWithdrawnError) {
        if (!error.requeued) withdrawn.add(entry.key_sha256);
        continue;
      }
      if (error instanceof TakenBefore) {
        await sessions.removeQueued(queue, entry.key_sha256);
        continue;
      }
      // Its key stored another request first (as a turn): that one stands, this input goes. An
      // input no longer valid (an output whose call an input before it answered) goes too,
      // logged: left at the head of the queue, it would hold every input behind it. Marked first
      // (as the entry read), so its removal deletes no input queued under its key since its
      // withdraw, and no withdraw lands between the two.
      if (error instanceof InvalidRequestError) {
        const marked = await sessions.markQueued(queue, entry.key_sha256, entry.writer).then(
          () => true,
          (markError: unknown) => {
            if (!(markError instanceof QueuedWithdrawnError)) throw markError;
            if (!markError.requeued) withdrawn.add(entry.key_sha256);
            return false;
          },
        );
        if (!marked) continue;
        services.info(`${queuedInput(sessionId, entry.key_sha256)} was dropped: its turn refused it: ${error.message}`);
      } else if (error instanceof IdempotencyKeyReusedError) {
        // Its enqueue checked the key (log/queue.ts), but the other request's turn landed, or
        // indexed its key, only after that check: its 202 answered an input that never runs.
        const which = queuedInput(sessionId, entry.key_sha256);
        services.info(`${which} was dropped: its Idempotency-Key ran another request first`);
      } else throw error;
      claimed = { turn: 0, status: 'failed' };
    }
    // Its turn goes to a runner before the entry goes: a removal that fails leaves the entry to
    // the next pickup (whose claim replays it), not the turn without a runner until its lease ends.
    if (claimed.run) await services.startBackground({ ...claimed.run, ...enqueuedBy(entry) });
    // A claim that could not index its key leaves the entry, marked, to the pickup after its turn
    // (whose completion indexes it): a withdraw that found neither would answer that it never runs.
    if (claimed.keyIndexed !== false) await sessions.removeQueued(queue, entry.key_sha256);
    if (claimed.run) return;
  }
}

/**
 * The queued inputs this process has told as waiting for budget (session id, then key hash):
 * every pickup meets such an input again (each listing of the queue, each close, each periodic
 * sweep) until a PATCH raises the budget, and one line for it is enough. Bounded: once full,
 * the oldest go first (and are told again should a pickup meet them again).
 */
const toldWaiting = new BoundedCache<true>(4096);

/** Logs, once in this process, that session `sessionId`'s input `keyHash` waits for budget. */
function tellWaiting(services: TurnServices, sessionId: string, keyHash: string): void {
  const key = `${sessionId} ${keyHash}`;
  if (toldWaiting.has(key)) return;
  toldWaiting.set(key, true, 1);
  services.info(`${queuedInput(sessionId, keyHash)} waits: the session's budget is spent`);
}

/** A queued input's run names the request that queued it (BackgroundTurn `enqueued_by`), if its entry does. */
function enqueuedBy(entry: { request_id?: string | undefined }): Pick<BackgroundTurn, 'enqueued_by'> {
  return entry.request_id === undefined ? {} : { enqueued_by: entry.request_id };
}

/** How a log line names a queued input. */
function queuedInput(sessionId: string, keyHash: string): string {
  return `tailgate: a queued input of session ${sessionId} (key sha256 ${keyHash})`;
}

/**
 * Whether a pickup passes queued input `input` (listed as `entry`) over without running it, read
 * only (for the prompt preview, which shows the turn of the first it runs): taken up already (a
 * pickup marked it and its turn is stored, log/queue-taking.ts `takenUp`: its claim replays, and the
 * entry is removed), queued under a generation the session left and taken up there or after
 * (`TakenBefore`), or refused by its turn's claim as invalid against the calls the session leaves
 * open (`openCalls`; null: not tracked), and dropped. Passed over, each stores nothing, so the next
 * is judged against the same calls. Costs, for a marked input, a head of each generation and
 * perhaps a read of the newest record; for one of a generation left, a head of each since it.
 */
export async function passedOver(
  services: Pick<TurnServices, 'sessions'>,
  scope: LogScope,
  entry: { keyHash: string; generation: string },
  input: QueuedInput,
  openCalls: readonly string[] | null,
): Promise<boolean> {
  if (openCalls !== null && refused(() => checkCalls(input.input, openCalls))) return true;
  if (entry.generation !== scope.generation && (await services.sessions.queuedTakenBefore(scope, entry))) return true;
  return services.sessions.queuedTakenUp(scope, entry, input);
}

/** Whether `check` refuses what it checks (InvalidRequestError, the 400 of a claim). */
function refused(check: () => unknown): boolean {
  try {
    check();
    return false;
  } catch (error) {
    if (error instanceof InvalidRequestError) return true;
    throw error;
  }
}

/** A queued input whose key names a turn of a generation the session left (log/queue.ts). */
class TakenBefore extends Error {}

/** `session.idle` or `session.held` (`entry`) for the session's webhook, if it has one. */
async function sendAfter(
  services: TurnServices,
  scope: LogScope,
  closed: ClosedBefore,
  entry: (url: string, now: Date) => WebhookEntry,
): Promise<void> {
  const { webhookSink, config } = services;
  if (!webhookSink || !config.webhooks) return;
  const own = closed.webhookUrl !== undefined ? closed.webhookUrl : (await services.sessions.get(scope.id)).webhook_url;
  const url = own ?? config.webhooks.url;
  if (url !== undefined) await webhookSink(entry(url, services.clock()));
}
