import {
  ABORT_NOTICE_NAME,
  consumeForModelCall,
  currentNotices,
  type DeliveredNotice,
  type FetchedNotice,
  type InboxAbort,
} from '../inbox/index.ts';
import type { OpenTurn } from '../session/log/types.ts';
import type { Undelivered } from '../session/records.ts';
import type { TurnPlan } from './plan.ts';
import type { GateOutcome } from './model-call.ts';
import type { TurnServices } from './types.ts';

/**
 * The notices of one turn: those earlier turns left undelivered, and those it moves out of
 * the inbox. The inbox was read alongside the claim; the moves (which name the turn) start
 * once the claim landed, while the model already runs on the notices as read. A notice's
 * content reaches a stored turn only if its move succeeded: `settle` says whether the prompt
 * showed exactly the notices that moved.
 */

/** The claim's record did not land (another writer took its number): start the turn again. */
export class ClaimLost extends Error {
  constructor() {
    super('the claim lost its record number to another writer');
    this.name = 'ClaimLost';
  }
}

export class TurnNotices {
  /** Notices consumed by earlier turns that no model has seen yet (delivered first). */
  carried: DeliveredNotice[] = [];
  /** What the prompt shows: the carried ones, then this turn's (as read, until `settle`). */
  delivered: DeliveredNotice[] = [];
  /** What a failed or aborted completion carries on. */
  undelivered: Undelivered;
  /** An `abort` notice this turn consumed: the pipeline closes the turn as aborted (lib/turn/close-turn.ts). */
  abort?: InboxAbort;
  /**
   * The notices (`stored_as`) this run took over that another run of its turn held before it (moved
   * them, or took them over first): that run may still close the turn showing them (lib/inbox/carry.ts
   * `recover`), so this one, stopped, keeps them (lib/turn/close-turn.ts `givenBack`).
   */
  heldBefore: ReadonlySet<string> = new Set();
  /** The turns closed by someone else whose moves may still land: even a completion names them (`stillLanding`). */
  stillLost: Undelivered['lost_turns'] = [];
  readonly #landed: Promise<boolean>;
  #move: (() => Promise<DeliveredNotice[]>) | undefined;
  #settling: Promise<void> | undefined;
  #shown: string[] = [];

  readonly #turn: OpenTurn;
  readonly #earlierRun: (() => boolean) | undefined;

  /**
   * `earlierRun`, for a background turn, tells once the claim (with the runner's lease) landed
   * whether its runner took the lease over from another runner of the turn.
   */
  constructor(turn: OpenTurn, landed: Promise<boolean>, earlierRun?: () => boolean) {
    this.#turn = turn;
    this.undelivered = turn.undelivered;
    this.#landed = landed;
    this.#earlierRun = earlierRun;
  }

  /**
   * Plans the notices of the turn. The moves wait for the claim in `settle`, except where the
   * turn's number is needed first (an `abort` notice, notices of turns closed by others, an
   * inbox that could not be read ahead, a background turn whose runner took the lease over from
   * another, which may have moved notices for the turn and stopped answering): those wait for
   * the claim here and move now. When it throws, `undelivered` is what the turn's failed
   * completion carries on.
   */
  async plan(
    services: TurnServices,
    sessionId: string,
    plan: TurnPlan,
    fetched: Promise<FetchedNotice[]> | undefined,
  ): Promise<void> {
    const turn = this.#turn;
    if (!plan.strategies.includes('inbox')) return;
    const listed = fetched ? await fetched.catch(() => undefined) : undefined;
    // A turn takes at most `noticesPerTurn` notices, counting those earlier turns took that it delivers first.
    const consume = (carried: number) =>
      consumeForModelCall(
        services.inbox,
        sessionId,
        { created_at: turn.session.created_at, incarnation: turn.scope.incarnation },
        turn.turn,
        fetched,
        roomFor(services, carried),
        turn.writer,
      );
    // The earlier runner's records name this turn, but not this run (lib/inbox/carry.ts `recover`).
    if (this.#earlierRun) await this.claimed();
    const earlier = this.#earlierRun?.() ? [{ turn: turn.turn, since: turn.claimedAt, except: turn.writer }] : [];
    const { lost_turns: lost } = turn.undelivered;
    if (!listed || lost.length + earlier.length > 0 || listed.some((n) => n.name === ABORT_NOTICE_NAME)) {
      await this.claimed();
      await this.#consumeNow(services, sessionId, turn, consume, earlier);
      return;
    }
    this.carried = [...turn.undelivered.notices];
    const current = currentNotices(listed, turn.session.created_at).slice(0, roomFor(services, this.carried.length));
    const reads = await Promise.all(current.map((notice) => notice.read));
    const asRead = current.flatMap((notice, index) => {
      const read = reads[index]!;
      return read.kind === 'read'
        ? [{ name: notice.name, stored_as: notice.name, content: read.content, posted_at: '' }]
        : [];
    });
    this.delivered = [...this.carried, ...asRead];
    if (listed.length > 0) this.#move = async () => (await consume(this.carried.length)).delivered;
  }

  /** Resolves once the claim landed; ClaimLost when it did not. */
  async claimed(): Promise<void> {
    if (!(await this.#landed)) throw new ClaimLost();
  }

  /** The notices for the prompt being built (remembered for `settle`). */
  forPrompt(): DeliveredNotice[] {
    this.#shown = this.delivered.map((notice) => notice.name);
    return this.delivered;
  }

  /**
   * Waits for the claim, then moves this turn's notices: 'pass' when the last prompt showed
   * exactly the notices delivered, 'changed' when it must be built again. ClaimLost when the
   * claim did not land (nothing was moved).
   */
  async settle(): Promise<GateOutcome> {
    this.#settling ??= (async () => {
      await this.claimed();
      if (!this.#move) return;
      const consumed = await this.#move();
      this.delivered = [...this.carried, ...consumed];
      this.undelivered = { notices: this.delivered.map(undeliveredRecord), lost_turns: this.stillLost };
    })();
    await this.#settling;
    const names = this.delivered.map((notice) => notice.name);
    return names.length === this.#shown.length && names.every((name, index) => name === this.#shown[index])
      ? 'pass'
      : 'changed';
  }

  /** Moves notices once the claim has landed; an `abort` notice is kept in `abort`. */
  async #consumeNow(
    services: TurnServices,
    sessionId: string,
    turn: OpenTurn,
    consume: (carried: number) => ReturnType<TurnServices['inbox']['consume']>,
    earlier: readonly { turn: number; since: string; except: string }[],
  ): Promise<void> {
    // Earlier turns' notices first (those of turns that died, or of an earlier run of this
    // one, are found in the inbox's delivery records), then what this turn consumes.
    const lost = [...turn.undelivered.lost_turns, ...earlier];
    // A takeover that failed may have won a notice on its chain of decision keys (or more):
    // the next turn walks past this one as past a closed turn.
    const since = lost.map((entry) => entry.since).sort()[0];
    if (since !== undefined)
      this.undelivered = {
        ...turn.undelivered,
        lost_turns: [...turn.undelivered.lost_turns, { turn: turn.turn, since }],
      };
    const held = new Set<string>();
    const session = { created_at: turn.session.created_at, incarnation: turn.scope.incarnation };
    this.stillLost = stillLanding(turn, services.clock().getTime(), 2 * services.config.turnLeaseMs);
    const recovered =
      lost.length > 0 ? await services.inbox.recover(sessionId, lost, turn.turn, turn.writer, held, session) : [];
    this.heldBefore = held;
    this.carried = [...turn.undelivered.notices, ...recovered];
    this.undelivered = { notices: this.carried, lost_turns: this.stillLost };
    const consumed = await consume(this.carried.length);
    this.delivered = [...this.carried, ...consumed.delivered];
    this.undelivered = { notices: this.delivered.map(undeliveredRecord), lost_turns: this.stillLost };
    this.#settling = Promise.resolve();
    if (consumed.abort) this.abort = consumed.abort;
  }
}

/** How many notices a turn delivering `carried` that earlier turns took takes from the inbox. */
export function roomFor(services: Pick<TurnServices, 'inbox'>, carried: number): number {
  return Math.max(0, services.inbox.noticesPerTurn - carried);
}

/** A delivered notice as a failed turn's completion carries it. */
function undeliveredRecord(notice: DeliveredNotice): Undelivered['notices'][number] {
  return { name: notice.name, stored_as: notice.stored_as, posted_at: notice.posted_at, content: notice.content };
}

/**
 * The turns closed by someone else that `turn` takes over whose moves may still land once it listed their
 * delivery records (at `listedAt`): the turn that listed them first names them again in its completion
 * (completed too), and so does every turn that lists them within `window` of that listing. A closed
 * turn's process goes on moving the notices it read until it learns of its close (a renewal, its own
 * completion refused), then gives back what it took: a claim of its that lands after the listing (a slow
 * put) is no one's to take over but its give-back's, and a process that dies in that give-back would
 * leave it lost. So the listing that took a turn over first is not the last: each later turn lists
 * again for claims written since it (lib/inbox/carry.ts `recover`), and the turn that lists once
 * `window` (2 × TURN_LEASE_MS, what a stopped turn is given to store its spend) has passed since drops
 * it. An entry a listing named again is there twice, with that first listing's time as `since`: it is
 * named again while `window` has not passed since. Any other entry no turn listed yet (its closer, or a
 * failed take-over, named it; a turn that lists nothing, without the inbox strategy or failed before
 * its listing, carries it on as it was): this listing is its first, so it is named again, twice, with
 * this listing's time (the records written before it are this turn's to take over).
 */
function stillLanding(turn: OpenTurn, listedAt: number, window: number): Undelivered['lost_turns'] {
  const lost = turn.undelivered.lost_turns;
  const since = new Date(listedAt).toISOString();
  const listed = (entry: (typeof lost)[number]) =>
    lost.filter((other) => other.turn === entry.turn && other.since === entry.since).length > 1;
  return lost.flatMap((entry) => {
    if (!listed(entry))
      return [
        { turn: entry.turn, since },
        { turn: entry.turn, since },
      ];
    return listedAt < Date.parse(entry.since) + window ? [entry] : [];
  });
}
