import { StorageError, TurnInProgressError, TurnNotOpenError } from '../errors.ts';
import { sha256Hex } from '../hash.ts';
import type { LogScope } from '../session/keys.ts';
import type { ClosedTurn } from '../session/log/types.ts';
import type { OnBusy } from '../session/fields.ts';
import { afterResponse } from './after-response.ts';
import { inputItems, requestHash } from './plan.ts';
import { requestRecord } from './receipt.ts';
import type { TurnObservation, TurnOptions, TurnRequest, TurnServices } from './types.ts';
import { observedClaim } from './observe.ts';
import { LapsedDeadTurn, refuseLapsedDead, takeOutDead, takeOutInterrupted } from './dead-turn.ts';
import { pickUp, type ClosedBefore } from './pickup.ts';

/**
 * The busy policy (docs/API.md, "Busy sessions"): what a turn does when another holds the
 * session. `reject` answers 409 turn_in_progress; `enqueue` stores the input
 * (`queue/<g>/<key sha256>`, create-only) and answers 202, and whoever closes the running turn
 * takes the queued inputs up, oldest first, each as a background turn of its own; `interrupt`
 * cancels the running turn (taking out a response answered at its end: ./dead-turn.ts) and
 * takes this one. One Idempotency-Key stores one input whichever
 * the policy: a queued input is claimed under the key's SHA-256, as the turn itself would be.
 */

export type Taken<T> = { kind: 'taken'; value: T } | { kind: 'queued'; queued_turn: string; position: number | null };

/** Interrupts tried before a request gives up with 409 (each lost the session to another writer). */
const MAX_INTERRUPTS = 3;

/**
 * Takes a turn (`take`: the route's way of running it, with the services it is given) under the
 * busy policy: the request's, else the session's (read only when the session is busy), else
 * reject. A busy refusal is told to `observeTurn` (the log line, the metrics) only when it is
 * the answer: a queued input is told as `queued` (a keyed retry of one its key queued already,
 * as `replayed`), and an interrupt's refused attempt not at all (the turn it then takes is).
 */
export async function takeUnderPolicy<T>(
  services: TurnServices,
  sessionId: string,
  request: TurnRequest,
  options: { idempotencyKey?: string; onBusy?: OnBusy | undefined; retake?: boolean },
  take: (services: TurnServices, lapsed: Pick<TurnOptions, 'onLapsed' | 'enqueues'>) => Promise<T>,
): Promise<Taken<T>> {
  const started = Date.now();
  const refusals = heldRefusals(services);
  // A dead turn answered at its end is taken out before the turn is stored after it, once: one
  // that stays is followed (./dead-turn.ts). A retake takes the newest failed turn again as it is.
  let deadTurn: 'refused' | 'followed' = options.retake ? 'followed' : 'refused';
  // A retry of an input its key queued is answered by the enqueue below (TurnOptions.enqueues), until
  // that input is found gone (withdrawn since its claim read it): then it is taken as a new request.
  let enqueues = inputItems(request).length > 0;
  try {
    for (let interrupts = 0; ; ) {
      try {
        const lapsed = {
          ...(deadTurn === 'refused' ? { onLapsed: refuseLapsedDead } : {}),
          ...(enqueues ? { enqueues } : {}),
        };
        return { kind: 'taken', value: await take(refusals.services, lapsed) };
      } catch (error) {
        if (error instanceof LapsedDeadTurn) {
          if (!(await takeOutDead(services, sessionId))) deadTurn = 'followed';
          continue;
        }
        // A retry of the request whose own turn runs is answered 409 whatever the policy.
        if (!(error instanceof TurnInProgressError) || error.ownKey) throw error;
        // A retry of an input its key queued is answered as that enqueue was, whatever the policy since.
        const policy = error.queuedKey
          ? 'enqueue'
          : (options.onBusy ?? (await services.sessions.get(sessionId)).on_busy);
        // A queued input runs in the background, charged to no token: a budgeted token's is refused
        // (not its retry of one its key queued: it queues nothing). An empty one is not queued: the
        // turn it would take again is running, not failed.
        if (policy === 'enqueue' && (error.queuedKey || !services.tokenSpend) && inputItems(request).length > 0) {
          // Told as queued, or as failed with the error that kept it from the queue.
          refusals.drop();
          const enqueue = () => enqueueTurn(services, sessionId, request, { ...options, again: error.queuedKey });
          const queued = {
            since: started,
            status: (entry: { replayed: boolean } | null) =>
              entry ? { status: entry.replayed ? ('replayed' as const) : ('queued' as const) } : undefined,
          };
          const entry = await observedClaim(services, sessionId, request, enqueue, queued);
          if (entry) return { kind: 'queued', queued_turn: entry.queued_turn, position: entry.position };
          enqueues = false;
          continue;
        }
        if (policy !== 'interrupt' || interrupts >= MAX_INTERRUPTS) throw error;
        const running = (error.details as { turn: number }).turn;
        const cancelled = await services.sessions.cancelTurn(sessionId, running, true).catch((cancelError: unknown) => {
          // Closed meanwhile: take the turn again all the same.
          if (!(cancelError instanceof TurnNotOpenError)) throw cancelError;
          return undefined;
        });
        // A response answered at its end, dead or not, is taken out as a dead one (./dead-turn.ts):
        // its client's retry, after this turn, stores its input once. One that stays (it took
        // notices, logged once) is followed, cancelled, as any interrupted turn, not tried again.
        if (cancelled?.answered_at_end && deadTurn === 'refused')
          if ((await takeOutInterrupted(services, sessionId, running)) === 'stays') deadTurn = 'followed';
        interrupts++;
        refusals.drop();
      }
    }
  } catch (error) {
    refusals.tell();
    throw error;
  }
}

/**
 * `services` whose `observeTurn` holds back a busy refusal (409 turn_in_progress) of a turn
 * taken under the policy: `tell` tells it (the request's answer after all), `drop` forgets it.
 */
function heldRefusals(services: TurnServices): { services: TurnServices; tell: () => void; drop: () => void } {
  const observe = services.observeTurn;
  let held: TurnObservation | undefined;
  const holding: TurnServices = {
    ...services,
    observeTurn: (outcome) => {
      if (outcome.status === 'failed' && outcome.error_code === 'turn_in_progress') held = outcome;
      else observe?.(outcome);
    },
  };
  return {
    services: observe ? holding : services,
    tell: () => {
      if (held) observe?.(held);
      held = undefined;
    },
    drop: () => {
      held = undefined;
    },
  };
}

/**
 * Queues a turn's input, then takes the queue up at once if the session is idle by now: the
 * running turn may have closed, and looked for queued inputs, before this one was stored.
 */
async function enqueueTurn(
  services: TurnServices,
  sessionId: string,
  request: TurnRequest,
  options: { idempotencyKey?: string; again?: boolean },
): Promise<{ queued_turn: string; position: number | null; replayed: boolean } | null> {
  // Its images and files are stored once the session is read, before the entry that names them.
  const attachments = services.sessions.checkAttachments(inputItems(request));
  const input = attachments.items;
  const key = options.idempotencyKey;
  const queued = await services.sessions.enqueue(
    sessionId,
    {
      input,
      request: requestRecord(request),
      key_sha256: key === undefined ? sha256Hex(crypto.randomUUID()) : sha256Hex(key),
      ...(key === undefined ? {} : { request_sha256: requestHash(input, request) }),
      ...(services.requestId ? { request_id: services.requestId } : {}),
    },
    attachments.store,
    options.again,
  );
  if (!queued) return null;
  // After the answer: stored, the input is answered 202 whatever its pickup meets (a 5xx would
  // have an unkeyed retry queue it twice); a pickup that fails leaves it to the running turn's
  // close, or the next one.
  afterResponse(services, () => pickUp(services, sessionId));
  return queued;
}

/**
 * POST .../turns/{turn}/cancel: ends the open turn `turn` as cancelled (SessionLog.cancelTurn)
 * and takes up the inputs queued behind it after the response, after the session's listing row
 * (a queued turn it cancelled never runs, so nothing else writes the row). A cancel whose
 * completion landed stands even when its webhook event could not be written (logged by the
 * session log: the outbox's drainer delivers it from the turn's intent).
 */
export async function cancelOpenTurn(services: TurnServices, sessionId: string, turn: number): Promise<void> {
  await services.sessions.cancelTurn(sessionId, turn);
  afterResponse(services, async () => services.sessions.refreshIndex(sessionId));
  services.background(pickUp(services, sessionId, undefined, { turn }));
}

/**
 * GET .../queue: the session's queued inputs (log/queue-listing.ts), then, when it lists any (a
 * withdraw's tombstone too: a stale one is the pickup's to delete), a pickup after the
 * response. So inputs that no closer takes up (their turn's process died and
 * no writer came to close it once its lease ran out, or its closer died before its pickup) go on
 * once their client looks at the queue, as after a close. While a turn runs, the pickup's claim
 * is refused (busy) before it writes anything.
 */
export async function listQueue(
  services: TurnServices,
  sessionId: string,
  limit: number,
): Promise<Omit<Awaited<ReturnType<TurnServices['sessions']['listQueuedInputs']>>, 'listed'>> {
  const { listed, ...page } = await services.sessions.listQueuedInputs(sessionId, limit);
  if (listed > 0) afterResponse(services, () => pickUp(services, sessionId));
  return page;
}

/**
 * The session log's `onLeaseClosed`: after any close of a turn whose lease ran out (a
 * newcomer's claim that then stored nothing, a replay of its key, a reader of its events, the
 * webhook outbox's drainer, a take-out of a dead turn), the session's listing row is written
 * again and the inputs queued behind it are taken up, after the response, as after a turn's own
 * close: the close may be the session's last write until its next turn (a take-out's delete
 * racing that refresh keeps its own row, log/session-index.ts). `services` is read when a close
 * happens (the log is built before them).
 */
export function pickUpAfterLeaseClose(services: () => TurnServices): (closed: ClosedTurn) => void {
  return (closed) => {
    const after = services();
    const before: ClosedBefore = { turn: closed.turn, webhookUrl: closed.webhookUrl };
    afterResponse(after, async () => after.sessions.refreshIndex(closed.scope.id));
    afterResponse(after, () => pickUp(after, closed.scope.id, closed.scope, before));
  };
}

/**
 * The session log's `onQueueWaiting`: a new turn's claim found the session idle and the queue's
 * signal raised, so inputs queued before it may wait (the pickup of the close before is still to
 * come, or its process died). The oldest is taken up first, as that pickup would take it, and the
 * claim reads the session again: busy now, it is answered under its busy policy (docs/API.md
 * "Busy sessions"). A queue found empty lowers the signal (`signal`: its etag as the claim listed
 * it). A failure of the store fails the claim; any other is logged and lets the claim go on.
 */
export function pickUpFirst(services: () => TurnServices): (scope: LogScope, signal: string) => Promise<void> {
  return async (scope, signal) => {
    const current = services();
    try {
      await pickUp(current, scope.id, scope, undefined, signal);
    } catch (error) {
      if (error instanceof StorageError) throw error;
      current.log(`tailgate: session ${scope.id}: the pickup before a new turn failed`, error);
    }
  };
}
