import { firstToCreate } from '../store/create-only.ts';
import { decodeUtf8, listAll, mapLimit, type StoredObject } from '../store/object-store.ts';
import { ABORT_NOTICE_NAME, compareBytes } from './notice-name.ts';
import type { DeliveredNotice, SessionMark } from './types.ts';
import {
  CLOCK_TOLERANCE_MS,
  CONCURRENCY,
  decodeName,
  markMetadata,
  markOf,
  META,
  namesOther,
  postedAtOf,
  turnSchema,
  withMetadata,
} from './delivery-records.ts';
import type { InboxContext } from './move.ts';
import { after, decide, keyName, RETURNED, takerOf } from './decision-chain.ts';
import { finishGiveBack, type Reposted } from './give-back.ts';

/**
 * Notices a turn consumed but no model saw: taken over by a later turn, given back to the
 * inbox, or finally recorded as carried by the turn that delivered them (docs/STORAGE.md, "Notices").
 */

/**
 * Takes over, for turn `turn`, the notices turns closed by someone else consumed (for each
 * `{turn, since}`: the delivery records written for that turn after `since`, its claim
 * time), so they reach a model instead of being lost. Each record is rewritten to name
 * `turn` with If-Match once `decide` gave it to this turn, so a notice the dead turn's owner
 * returns meanwhile (see `giveBack`) is taken by one of them only. In name order; an `abort`
 * among them is not returned (it ended the turn that took it). Costs one listing of
 * `inbox_removed/` (per 1000 records), a head per recent record where listings carry no
 * metadata (S3), and a get and three puts per notice found (and a put and a get per taker
 * passed over on its chain of decision keys, `decide`). Only turns that did not close
 * themselves need it, and a background turn's run that took the lease of an earlier run of it
 * (lost names the turn itself, `except` this run: `runner` is its random `writer`, which the
 * records it takes over name beside `turn`, so the earlier run's give-back leaves them alone).
 * Given `held`, adds the `stored_as` of each notice returned that another run of `turn` held
 * before this one took it over (see `takeOver`): that run may still close the turn showing it.
 * A notice a give-back of a closed turn has that it did not finish (its process died) goes back to
 * the inbox (lib/inbox/give-back.ts), naming `session` as a post does. A closed turn's claim may land
 * after this listing (a slow put), its give-back then the only one to know it: so later turns list
 * again for a while, the take-over not fencing such claims (lib/turn/notices.ts `stillLanding`).
 */
export async function recover(
  ctx: InboxContext,
  sessionId: string,
  lost: readonly LostTurn[],
  turn: number,
  runner?: string,
  held?: Set<string>,
  session?: SessionMark,
): Promise<DeliveredNotice[]> {
  const removedPrefix = ctx.removedPrefix(sessionId);
  const lostTurns = new Set(lost.map((entry) => String(entry.turn)));
  const found = await mapLimit(await lostDeliveries(ctx, sessionId, lost), CONCURRENCY, async (info) => {
    const name = decodeName(info.metadata[META.name]) ?? info.key.slice(removedPrefix.length);
    if (name === ABORT_NOTICE_NAME) return null;
    const storedAs = info.key.slice(removedPrefix.length);
    // A give-back of the closed turn has it, and may have died before it was done: finished here.
    const givenBack = async (object: StoredObject, decision: string) => {
      const notice = { name, storedAs, object, decision, found: true };
      await finishGiveBack(ctx, sessionId, notice, session).catch((error: unknown) => {
        ctx.log({ level: 'warn', message: 'notice a closed turn gave back not posted again', key: info.key, error });
      });
    };
    const taken = await takeOver(ctx, info.key, { turn: String(turn), runner }, lostTurns, givenBack);
    if (!taken) return null;
    const { object, heldBefore } = taken;
    if (heldBefore) held?.add(storedAs);
    return {
      name,
      stored_as: storedAs,
      content: decodeUtf8(object.body),
      posted_at: postedAtOf(info),
    };
  });
  return found
    .filter((notice): notice is DeliveredNotice => notice !== null)
    .sort((left, right) => compareBytes(left.name, right.name));
}

/**
 * Takes the delivery record at `key`, as it names a closed turn (among `lost`), over for turn
 * `ours`: the record as read when it is ours, or null (a give-back's key on its chain: `givenBack`
 * finishes that give-back). Once `decide` gave it to this turn, the
 * record is rewritten if-match to name `ours` and the decision key taken through, then `ours`
 * confirms it holds the notice by creating `<that key>-after-<ours>`: a successor that finds
 * this turn closed creates that key too, and of the two the first to create it has the notice.
 * A turn refused there gives the notice up (its rewrite landed after the successor's, the etag
 * being the body's). The rewrite names this run (`runner`) too, or none. `heldBefore`: another
 * run of turn `ours` had the notice before this one took it over: it moved it itself (the chain
 * begins at the key of its move, `taken-<ours>-<ms>`, whether or not a run took it over since; that
 * run, its prompt showing it, may close the turn), or confirmed its hold on the chain first (`decide`).
 */
async function takeOver(
  ctx: InboxContext,
  key: string,
  taker: { turn: string; runner: string | undefined },
  lost: ReadonlySet<string>,
  givenBack: (object: StoredObject, decision: string) => Promise<void>,
): Promise<{ object: StoredObject; heldBefore: boolean } | null> {
  const ours = taker.turn;
  const object = await ctx.store.get(key);
  const from = object?.metadata[META.turn];
  if (!object || from === undefined || !lost.has(from)) return null;
  const decided = await decide(ctx, key, decisionOf(object), taker, lost);
  if (decided === undefined) return null;
  if ('givenBack' in decided) {
    await givenBack(object, decided.givenBack);
    return null;
  }
  const { decision } = decided;
  // Moved by another run of this turn (the chain begins at its move: `taken-<ours>-<ms>`, even when a
  // run took it over since, which may not have confirmed), or held by one on the chain.
  const heldBefore = decided.heldBefore || (from === ours && decisionOf(object).startsWith(`taken-${ours}-`));
  const metadata = withRunner({ ...object.metadata, [META.turn]: ours, [META.takenAs]: decision }, taker.runner);
  // A failed write goes on (the decision key is ours, the record only tells where to begin); a
  // refused one may be our own write met again by a retry: the record says who holds it now.
  const taken = await ctx.store.put(key, object.body, { ifMatch: object.etag, metadata }).catch(() => true);
  if (!taken && !namesUs(await ctx.store.head(key), ours, taker.runner)) return null;
  return (await kept(ctx, key, decision, taker)) ? { object, heldBefore } : null;
}

/** `metadata` naming `runner` as the run that wrote the record, or no run. */
function withRunner(metadata: Record<string, string>, runner?: string): Record<string, string> {
  const { [META.runner]: _earlier, ...rest } = metadata;
  return runner === undefined ? rest : { ...rest, [META.runner]: runner };
}

/**
 * Whether delivery record `record` names turn `turn` and, given `runner`, no other run of it: a
 * record of an earlier run of the same turn (META.runner) is not this run's.
 */
function namesUs(record: { metadata: Record<string, string> } | null, turn: string, runner?: string): boolean {
  if (record?.metadata[META.turn] !== turn) return false;
  const by = record.metadata[META.runner];
  return runner === undefined || by === undefined || by === runner;
}

/**
 * Whether turn `ours`, which took the delivery record at `key` over through `decision` and
 * rewrote it, still has the notice: it creates `<decision>-after-<ours>` (see `takeOver`). A
 * successor that created it first has the notice; the record, when it still names `ours`, is
 * put back to name that successor as the successor wrote it (a failure there is logged). The
 * record only tells a listing where to begin: a put-back landing after a later turn's rewrite
 * begins a decision further back on the same chain of keys.
 */
async function kept(
  ctx: InboxContext,
  key: string,
  decision: string,
  taker: { turn: string; runner: string | undefined },
): Promise<boolean> {
  const ours = taker.turn;
  const confirmation = after(decision, ours);
  const confirmed = await firstToCreate(ctx.store, `${key}/${confirmation}`, keyName(taker));
  if (confirmed.first) return true;
  const successor = takerOf(confirmed.found);
  if (successor === undefined) return false;
  try {
    const record = await ctx.store.get(key);
    if (record?.metadata[META.turn] === ours) {
      // Its run is not known here: the record names none.
      const metadata = withRunner({ ...record.metadata, [META.turn]: successor, [META.takenAs]: confirmation });
      await ctx.store.put(key, record.body, { ifMatch: record.etag, metadata });
    }
  } catch (error) {
    ctx.log({ level: 'warn', message: `delivery record not put back to name turn ${successor}`, key, error });
  }
  return false;
}

/**
 * The decision key (after `<key>/`) a turn taking over delivery record `record` begins at: the
 * one its holder took it through, or, for a record its consuming turn `<turn>` wrote (at `<ms>`),
 * `taken-<turn>-<ms>`.
 */
export function decisionOf(record: Pick<StoredObject, 'metadata' | 'uploaded'>): string {
  return takenAs(record) ?? `taken-${record.metadata[META.turn]}-${record.uploaded.getTime()}`;
}

/** The decision key a turn took delivery record `record` over through, if it did. */
function takenAs(record: Pick<StoredObject, 'metadata'>): string | undefined {
  const taken = record.metadata[META.takenAs];
  return taken !== undefined && /^taken-[^/]+$/.test(taken) ? taken : undefined;
}

/**
 * A turn closed by someone else, which may have consumed notices since its claim (`since`); with
 * `except`, an earlier run of the turn taking it over (`except`: the random `writer` of the run
 * taking it over, whose own records are not lost).
 */
export type LostTurn = { turn: number; since: string; except?: string };

/** Whose records a give-back takes (`giveBack`): one run's (its random `writer`), or any run's of the turn. */
export type Runner = string | { anyRun: true };

/**
 * The notices a give-back finds itself (`giveBack`): those the delivery records naming the turn,
 * written since `since` (its claim), hold that its close does not account for (`accounted`, their
 * `stored_as`: what it showed or carries on); an `abort` among them stays (it ended the turn).
 */
export type Unaccounted = { since: string; accounted: ReadonlySet<string> };

/** The notices `unaccounted` names for turn `turn`: one listing, and a head per recent record on S3. */
async function unaccountedNotices(ctx: InboxContext, sessionId: string, turn: number, unaccounted: Unaccounted) {
  const removedPrefix = ctx.removedPrefix(sessionId);
  const found = await lostDeliveries(ctx, sessionId, [{ turn, since: unaccounted.since }]);
  return found.flatMap((info) => {
    const storedAs = info.key.slice(removedPrefix.length);
    const name = decodeName(info.metadata[META.name]) ?? storedAs;
    return name === ABORT_NOTICE_NAME || unaccounted.accounted.has(storedAs) ? [] : [{ name, stored_as: storedAs }];
  });
}

/**
 * The delivery records that name one of the `lost` turns, written after its claim: the notices
 * (an `abort` among them) those turns consumed. One listing of `inbox_removed/` per 1000
 * records, and a head per recent record where listings carry no metadata (S3).
 */
export async function lostDeliveries(ctx: InboxContext, sessionId: string, lost: readonly LostTurn[]) {
  const removedPrefix = ctx.removedPrefix(sessionId);
  const horizon = Math.min(...lost.map((entry) => Date.parse(entry.since))) - CLOCK_TOLERANCE_MS;
  const turns = new Map(lost.map((entry) => [entry.turn, entry]));
  const recent = (await listAll(ctx.store, removedPrefix)).filter(
    (info) => info.uploaded.getTime() >= horizon && !info.key.slice(removedPrefix.length).includes('/'),
  );
  const named = await mapLimit(recent, CONCURRENCY, async (listed) => {
    const info = await withMetadata(ctx.store, listed);
    const owner = turnSchema.safeParse(info.metadata[META.turn]);
    const entry = owner.success ? turns.get(owner.data) : undefined;
    if (entry === undefined || info.uploaded.getTime() < Date.parse(entry.since) - CLOCK_TOLERANCE_MS) return null;
    return entry.except !== undefined && info.metadata[META.runner] === entry.except ? null : info;
  });
  return named.filter((info) => info !== null);
}

/**
 * Whether the `lost` turns consumed no notice: no delivery record names one of them. Then
 * taking such a turn out, or the session back before it, delivers nothing twice and loses
 * nothing (a delete of the newest turn asks, lib/turn/fork.ts).
 */
export async function tookNothing(ctx: InboxContext, sessionId: string, lost: readonly LostTurn[]): Promise<boolean> {
  return lost.length === 0 || (await lostDeliveries(ctx, sessionId, lost)).length === 0;
}

/**
 * Gives notices back to the inbox: turn `turn` consumed them but was closed by someone else
 * (its lease expired, it was cancelled) before a model's answer was stored. Each delivery
 * record still naming `turn` that the give-back's decision key gives it (`returned`: a later turn
 * that took it over keeps it) goes back: the notice is posted again under its name (or a generated
 * one when the name is taken), then the record is deleted (still the claim read), crash-safe at each
 * call (lib/inbox/give-back.ts `finishGiveBack`; one a give-back that died left is finished).
 * Given `session` (the incarnation the turn ran in: its creation time and `incarnation`), a
 * notice posted again names it as a post does, so a session created or imported again under the
 * id drops it (lib/inbox/move.ts `take`); and when, once they are posted, the
 * id names another incarnation or none (a delete ran meanwhile, its sweep perhaps past the
 * inbox already), they are removed again: nothing lands in a deleted session. Given `runner`
 * (the random `writer` of the turn's run), a record another run of the same turn took over
 * (META.runner) is that run's, and left alone; given `{ anyRun: true }` (the run read the close of
 * its turn, which shows or carries on none of them: no run of the turn can show them now), it goes
 * back too, past the keys runs of the turn created on its chain (`decide`), so a run that took it
 * over and cannot read that close, keeping it, loses it no more. Given `Unaccounted` (with
 * `{ anyRun: true }`), it finds the notices itself. Failures are logged, but for that listing's,
 * which throws.
 */
export async function giveBack(
  ctx: InboxContext,
  sessionId: string,
  toGive: readonly { name: string; stored_as: string }[] | Unaccounted,
  turn: number,
  session?: SessionMark,
  runner?: Runner,
): Promise<void> {
  const notices = 'accounted' in toGive ? await unaccountedNotices(ctx, sessionId, turn, toGive) : toGive;
  const removedPrefix = ctx.removedPrefix(sessionId);
  const anyRun = typeof runner === 'object';
  const given: Reposted[] = [];
  await mapLimit(notices, CONCURRENCY, async ({ name, stored_as: storedAs }) => {
    const key = removedPrefix + storedAs;
    try {
      const object = await ctx.store.get(key);
      if (!object || !namesUs(object, String(turn), anyRun ? undefined : runner)) return;
      const decided = await returned(ctx, key, object, String(turn), anyRun);
      if (decided === undefined) return;
      await finishGiveBack(ctx, sessionId, { name, storedAs, object, ...decided }, session, given);
    } catch (error) {
      ctx.log({ level: 'warn', message: `notice consumed by closed turn ${turn} not given back`, key, error });
    }
  });
  if (session === undefined || given.length === 0 || (await sameIncarnation(ctx, sessionId, session))) return;
  await mapLimit(given, CONCURRENCY, async ({ key, noticeIdPrefix }) => {
    try {
      if ((await ctx.store.head(key))?.metadata[META.noticeId]?.startsWith(noticeIdPrefix)) await ctx.store.delete(key);
    } catch (error) {
      ctx.log({ level: 'warn', message: 'notice given back to a deleted session not removed', key, error });
    }
  });
}

/**
 * Whether the give-back of delivery record `object` (at `key`, naming `turn`) has the notice on
 * its chain of decision keys: a notice the turn took over is given back past the key it confirmed
 * its hold through, as a successor's walk; given `anyRun`, past every key runs of the turn created.
 * The decision key, and whether it was `found` created by a give-back (this one again, or another
 * run's, which may have died before it was done: this one finishes it, lib/inbox/give-back.ts).
 */
async function returned(
  ctx: InboxContext,
  key: string,
  object: StoredObject,
  turn: string,
  anyRun: boolean,
): Promise<{ decision: string; found: boolean } | undefined> {
  if (anyRun) {
    const decided = await decide(ctx, key, decisionOf(object), { turn: RETURNED, runner: undefined }, new Set([turn]));
    if (decided === undefined) return undefined;
    return 'givenBack' in decided
      ? { decision: decided.givenBack, found: true }
      : { decision: decided.decision, found: false };
  }
  const taken = takenAs(object);
  const decision = taken === undefined ? decisionOf(object) : after(after(taken, turn), turn);
  const decided = await firstToCreate(ctx.store, `${key}/${decision}`, RETURNED);
  if (decided.first) return { decision, found: false };
  // A give-back of the turn (this one again, or another run's) that may have died before it was done.
  return takerOf(decided.found) === RETURNED ? { decision, found: true } : undefined;
}

/**
 * Removes the delivery records of notices turn `turn` consumed before its session was deleted:
 * they went with the session, but a move that landed after the delete's sweep passed
 * `inbox_removed/` left its record there. Removed only while the id names no session (a session
 * created again keeps the id's inbox, as the delete's sweep does). Failures are logged: the next
 * delete of the id removes what is left.
 */
export async function forget(
  ctx: InboxContext,
  sessionId: string,
  notices: readonly { stored_as: string }[],
  turn: number,
): Promise<void> {
  const removedPrefix = ctx.removedPrefix(sessionId);
  try {
    const named = await mapLimit(notices, CONCURRENCY, async ({ stored_as: storedAs }) => {
      const info = await ctx.store.head(removedPrefix + storedAs);
      return info?.metadata[META.turn] === String(turn) ? info.key : null;
    });
    const keys = named.filter((key) => key !== null);
    if (keys.length > 0 && !(await ctx.sessionExists(sessionId))) await ctx.store.delete(keys);
  } catch (error) {
    ctx.log({ level: 'warn', message: `notices consumed by turn ${turn} of a deleted session not removed`, error });
  }
}

/** Whether the id still names incarnation `session` (a failed read says yes). */
async function sameIncarnation(ctx: InboxContext, sessionId: string, session: SessionMark): Promise<boolean> {
  const found = await ctx.sessionExists(sessionId).catch(() => true);
  if (found === true) return true;
  const mark = markOf(found);
  return (
    mark !== undefined &&
    !namesOther(markMetadata(mark), { since: session.created_at, incarnation: session.incarnation })
  );
}

/**
 * Rewrites the delivery records of notices an earlier turn consumed so that they name the
 * turn that finally carried them to a model. Two operations per notice; failures are logged.
 */
export async function recordCarrier(
  ctx: InboxContext,
  sessionId: string,
  notices: readonly { stored_as: string }[],
  turn: number,
): Promise<void> {
  const removedPrefix = ctx.removedPrefix(sessionId);
  await mapLimit(notices, CONCURRENCY, async ({ stored_as: storedAs }) => {
    const key = removedPrefix + storedAs;
    try {
      const object = await ctx.store.get(key);
      if (!object) return;
      await ctx.store.put(key, object.body, { metadata: { ...object.metadata, [META.turn]: String(turn) } });
    } catch (error) {
      ctx.log({ level: 'warn', message: `delivery record not updated to name turn ${turn}`, key, error });
    }
  });
}
