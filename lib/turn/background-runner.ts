import {
  AbortedError,
  LEASE_EXPIRED,
  NotFoundError,
  TurnClosedError,
  TurnInProgressError,
  TurnNotOpenError,
} from '../errors.ts';
import { runTurn } from './pipeline.ts';
import { journalTurn } from './journal.ts';
import { errorRecord } from './receipt.ts';
import { releaseLease } from './renewal.ts';
import type { BackgroundTurn, HeldLease, TurnServices } from './types.ts';

/**
 * The runner of background turns (lib/turn/background.ts claims them): it takes a claimed
 * turn over by the `writer` its record carries and runs it to completion with no client
 * connected, in a Cloudflare Queues consumer (functions/worker.ts) or in this process.
 */

/**
 * Runs a claimed background turn in this process, after the response: `startBackground` off
 * Workers. A turn a storage failure left open keeps its lease as its last renewal set it:
 * nothing here runs it again, so the lease runs out and the next writer closes the turn.
 */
export async function runInProcess(services: TurnServices, run: BackgroundTurn): Promise<void> {
  services.background(runClaimedTurn(services, run, {}));
}

/**
 * Runs a claimed background turn delivered by a queue (functions/worker.ts), which delivers it
 * again on 'retry' (after retryDelaySeconds): see runClaimedTurn. A run that stops with the turn
 * left open gives its lease up first, so the next delivery's runner takes the turn over at once
 * instead of waiting a renewal for it.
 */
export async function runBackgroundTurn(services: TurnServices, run: BackgroundTurn): Promise<'done' | 'retry'> {
  const lease: HeldLease = {};
  const outcome = await runClaimedTurn(services, run, lease);
  if (outcome === 'retry') await releaseLease(services, lease);
  return outcome;
}

/**
 * Seconds before a turn left open after its `attempts`-th delivery (1 the first) is delivered
 * again: 2, 4, 8 ..., so a storage outage of some seconds does not use every delivery up at
 * once, but at most half the lease (and at least 1): the lease its runner gave up stays live
 * that long, so no reader closes the turn as `lease_expired` before the next delivery comes;
 * and at most 12 hours, the longest delay a queue accepts (a TURN_LEASE_MS above a day).
 */
export function retryDelaySeconds(attempts: number, leaseMs: number): number {
  const delay = Math.min(2 ** Math.max(1, Math.min(attempts, 16)), Math.floor(leaseMs / 2000));
  return Math.max(1, Math.min(delay, MAX_QUEUE_DELAY_SECONDS));
}

/**
 * The deliveries of a background turn's queue message (wrangler.toml's `max_retries` of
 * `tailgate-turns`, and one): at the last, a turn still left open is given up, logged.
 */
export const MAX_TURN_DELIVERIES = 6;

/** The longest delay a Cloudflare queue message's retry takes (12 hours). */
const MAX_QUEUE_DELAY_SECONDS = 43_200;

/**
 * Runs a claimed background turn to its end, holding its lease in `lease`. Settles 'done' once
 * the turn is closed, by itself or by someone else (its outcome is in its completion), or when
 * another runner of it is alive (it renews the turn's lease), and 'retry' when a storage failure
 * left it open, for another runner to take over. A run of a turn closed already (a message
 * delivered again after its turn ended) is logged, not told as a turn (lib/turn/observe.ts).
 */
async function runClaimedTurn(
  services: TurnServices,
  run: BackgroundTurn,
  lease: HeldLease,
): Promise<'done' | 'retry'> {
  // Its events are journaled, so a client follows it (GET .../turns/{turn}/events).
  const journal = journalTurn(services, run.session_id, run.turn);
  const background = { background: { turn: run.turn, writer: run.writer, lease } };
  let outcome: 'done' | 'retry' = 'done';
  let ends = true;
  try {
    const response = await runTurn(services, run.session_id, { input: [] }, background, journal.emit);
    journal.emit({ event: 'turn.completed', data: response });
    return outcome;
  } catch (error) {
    // Closed before this run took it over (a cancel, a lease run out, an earlier run): this run
    // writes nothing. The journal is another run's (one still running may yet write its end), or
    // a reader's: a turn that never ran gets its end from the first reader of its events
    // (lib/turn/journal.ts). Its number may be another turn's by now (after a delete of the
    // newest turn). One line, no stack, as for the next case: a cancel of a queued turn and a
    // message delivered twice are what happens, not failures.
    if (error instanceof TurnNotOpenError) {
      ends = false;
      services.info(`tailgate: background turn ${run.turn} of session ${run.session_id} is closed already`);
      return outcome;
    }
    // Another runner of the turn holds its lease and renews it (a message delivered twice): this
    // one called no model and moved nothing; the turn and its journal are the other run's.
    if (error instanceof TurnInProgressError) {
      ends = false;
      services.info(`tailgate: background turn ${run.turn} of session ${run.session_id} runs elsewhere`);
      return outcome;
    }
    // Its session was deleted (the renewal found it closed so, or a step found it gone): the
    // model call is aborted, and nothing is journaled into the swept session.
    if (error instanceof NotFoundError) {
      ends = false;
      journal.drop();
      services.info(
        `tailgate: background turn ${run.turn} of session ${run.session_id} stopped: the session was deleted`,
      );
      return outcome;
    }
    const stored = errorRecord(error);
    // A storage failure may still have closed the turn (its failed completion landed): then
    // its journal ends with the error too, and no other run comes.
    if ((stored.code !== 'storage_error' && stored.code !== 'internal_error') || (await closed(services, run))) {
      // Stored and journaled as a client sees it (errorRecord): a provider's text is the log's. A
      // turn closed by someone else (a cancel, an interrupt, a lapsed lease) or stopped by an
      // `abort` notice is one line, no stack; a routine one but for a lapsed lease.
      const which = `background turn ${run.turn} of session ${run.session_id}`;
      if (error instanceof TurnClosedError || error instanceof AbortedError) {
        if (error.code === LEASE_EXPIRED) services.log(`tailgate: ${which} stopped: ${error.code}`);
        else services.info(`tailgate: ${which} stopped: ${error.code}`);
      } else services.log(`tailgate: ${which} failed`, error);
      journal.emit({ event: 'error', data: { error: stored }, cause: error });
      return outcome;
    }
    // Left open: the next run's events follow in its journal, and its end ends it.
    services.log(`tailgate: background turn ${run.turn} of session ${run.session_id} stopped`, error);
    outcome = 'retry';
    return outcome;
  } finally {
    journal.close(outcome === 'done' && ends);
  }
}

/** Whether the turn is closed, as its receipt says (not known, a storage failure: taken as open). */
async function closed(services: TurnServices, run: BackgroundTurn): Promise<boolean> {
  const found = await services.sessions.getTurn(run.session_id, run.turn).catch(() => null);
  return found !== null && found.status !== 'queued' && found.status !== 'in_progress';
}
