import { firstToCreate } from '../store/create-only.ts';
import { decodeUtf8, listAll, mapLimit, type StoredObject } from '../store/object-store.ts';
import { ABORT_NOTICE_NAME, compareBytes } from './notice-name.ts';
import type { DeliveredNotice } from './types.ts';
import {
  CLOCK_TOLERANCE_MS,
  CONCURRENCY,
  decodeName,
  generateName,
  META,
  postedAtOf,
  randomId,
  turnSchema,
  withMetadata,
} from './delivery-records.ts';
import type { InboxContext } from './move.ts';

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
 * metadata (S3), and a get and three puts per notice found. Only turns that did not close
 * themselves need it.
 */
export async function recover(
  ctx: InboxContext,
  sessionId: string,
  lost: readonly LostTurn[],
  turn: number,
): Promise<DeliveredNotice[]> {
  const removedPrefix = ctx.removedPrefix(sessionId);
  const lostTurns = new Set(lost.map((entry) => String(entry.turn)));
  const found = await mapLimit(await lostDeliveries(ctx, sessionId, lost), CONCURRENCY, async (info) => {
    const name = decodeName(info.metadata[META.name]) ?? info.key.slice(removedPrefix.length);
    if (name === ABORT_NOTICE_NAME) return null;
    const object = await takeOver(ctx, info.key, info.metadata[META.turn], String(turn), lostTurns);
    if (!object) return null;
    return {
      name,
      stored_as: info.key.slice(removedPrefix.length),
      content: decodeUtf8(object.body),
      posted_at: postedAtOf(info),
    };
  });
  return found
    .filter((notice): notice is DeliveredNotice => notice !== null)
    .sort((left, right) => compareBytes(left.name, right.name));
}

/**
 * Takes the delivery record at `key`, as it names closed turn `from`, over for turn `ours`: the
 * record as read when it is ours, or null. When a taker `decide` passed over (among `lost`)
 * kept it, that taker's rewrite landed: the record is taken over from that taker as it names
 * it now, through a new decision key (the record's upload time changed), which that taker's
 * give-back creates too.
 */
async function takeOver(
  ctx: InboxContext,
  key: string,
  from: string | undefined,
  ours: string,
  lost: ReadonlySet<string>,
): Promise<StoredObject | null> {
  const object = await ctx.store.get(key);
  if (!object || object.metadata[META.turn] !== from) return null;
  const decided = await decide(ctx, key, from, object.uploaded, ours, lost);
  if (decided.kept !== undefined) return takeOver(ctx, key, decided.kept, ours, lost);
  if (decided.key === undefined) return null;
  const taken = await ctx.store
    .put(key, object.body, { ifMatch: object.etag, metadata: { ...object.metadata, [META.turn]: ours } })
    .catch(() => null);
  // Refused, or a write whose answer was lost: the record says who holds the notice now.
  if (!taken && (await ctx.store.head(key))?.metadata[META.turn] !== ours) return null;
  return (await kept(ctx, key, decided.key, ours)) ? object : null;
}

/**
 * Whether the delivery record at `key` is ours to take (`key`: the decision key created), or
 * none's (neither set), or kept by `kept`, a taker passed over. Of a turn taking it over
 * (`recover`) and the closed turn `from` it names (written at `uploaded`) giving it back
 * (`giveBack`), only the first to create `<key>/taken-<from>-<uploaded ms>` (create-only) goes
 * on. Their if-match rewrites alone do not decide it: S3 and R2 give an object the etag of its
 * body (its MD5), and a rewrite of a record's metadata keeps its body, so both would land and
 * the notice reach a model twice. The key's body names its `taker` (a turn, or `returned` for a
 * giveBack); a refused create (or one whose answer was lost) reads it. When it names a turn the
 * caller knows was closed by someone else (among `lost`, the turns it recovers), that taker may
 * have died before its rewrite: the caller tries `<decision key>-after-<that turn>`, so exactly
 * one successor takes the notice over. A taker that did rewrite creates that key itself (`kept`):
 * found there, it kept the notice.
 */
async function decide(
  ctx: InboxContext,
  key: string,
  from: string | undefined,
  uploaded: Date,
  taker: string,
  lost: ReadonlySet<string> = new Set(),
): Promise<{ key?: string; kept?: string }> {
  let decision = `${key}/taken-${from}-${uploaded.getTime()}`;
  let passed: string | undefined;
  for (;;) {
    const decided = await firstToCreate(ctx.store, decision, taker);
    if (decided.first) return { key: decision };
    const holder = takerOf(decided.found);
    if (holder !== undefined && holder === passed) return { kept: holder };
    if (holder === undefined || !lost.has(holder)) return {};
    passed = holder;
    decision = `${decision}-after-${holder}`;
  }
}

/**
 * Whether taker `ours`, its rewrite of the delivery record at `key` landed, still has the
 * notice: it creates the key a successor would take the notice over through (`decision`-after-
 * `ours`, see `decide`). A successor that created it first took the notice over while this
 * taker stalled before its rewrite, which landed all the same (the etag is the body's): the
 * taker gives the notice up and puts the record, when it still names the taker, back to name
 * that successor (a failure there is logged).
 */
async function kept(ctx: InboxContext, key: string, decision: string, ours: string): Promise<boolean> {
  const confirmed = await firstToCreate(ctx.store, `${decision}-after-${ours}`, ours);
  if (confirmed.first) return true;
  const successor = takerOf(confirmed.found);
  try {
    const record = successor === undefined ? null : await ctx.store.get(key);
    if (successor !== undefined && record?.metadata[META.turn] === ours) {
      const metadata = { ...record.metadata, [META.turn]: successor };
      await ctx.store.put(key, record.body, { ifMatch: record.etag, metadata });
    }
  } catch (error) {
    ctx.log({ level: 'warn', message: `delivery record not put back to name turn ${successor}`, key, error });
  }
  return false;
}

/** Who created a decision key (its body `<taker>:<random>`), or undefined when it is gone. */
function takerOf(found: StoredObject | null): string | undefined {
  return found ? decodeUtf8(found.body).split(':')[0] : undefined;
}

/** A turn closed by someone else, which may have consumed notices since its claim (`since`). */
type LostTurn = { turn: number; since: string };

/**
 * The delivery records that name one of the `lost` turns, written after its claim: the notices
 * (an `abort` among them) those turns consumed. One listing of `inbox_removed/` per 1000
 * records, and a head per recent record where listings carry no metadata (S3).
 */
async function lostDeliveries(ctx: InboxContext, sessionId: string, lost: readonly LostTurn[]) {
  const removedPrefix = ctx.removedPrefix(sessionId);
  const horizon = Math.min(...lost.map((entry) => Date.parse(entry.since))) - CLOCK_TOLERANCE_MS;
  const turns = new Map(lost.map((entry) => [entry.turn, Date.parse(entry.since) - CLOCK_TOLERANCE_MS]));
  const recent = (await listAll(ctx.store, removedPrefix)).filter(
    (info) => info.uploaded.getTime() >= horizon && !info.key.slice(removedPrefix.length).includes('/'),
  );
  const named = await mapLimit(recent, CONCURRENCY, async (listed) => {
    const info = await withMetadata(ctx.store, listed);
    const owner = turnSchema.safeParse(info.metadata[META.turn]);
    const from = owner.success ? turns.get(owner.data) : undefined;
    return from === undefined || info.uploaded.getTime() < from ? null : info;
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
 * record still naming `turn` is rewritten with If-Match (so a later turn that took it over
 * keeps it), the notice is posted again under its name (or a generated one when the name
 * is taken), and the record is deleted. Given `incarnation` (the creation time of the session
 * the turn ran in), a notice posted again names it as a post does, so a session created
 * again under the id drops it (lib/inbox/move.ts `take`); and when, once they are posted, the
 * id names another incarnation or none (a delete ran meanwhile, its sweep perhaps past the
 * inbox already), they are removed again: nothing lands in a deleted session. Failures are
 * logged.
 */
export async function giveBack(
  ctx: InboxContext,
  sessionId: string,
  notices: readonly { name: string; stored_as: string }[],
  turn: number,
  incarnation?: string,
): Promise<void> {
  const removedPrefix = ctx.removedPrefix(sessionId);
  const inboxPrefix = ctx.inboxPrefix(sessionId);
  const given: { key: string; noticeId: string }[] = [];
  await mapLimit(notices, CONCURRENCY, async ({ name, stored_as: storedAs }) => {
    const key = removedPrefix + storedAs;
    try {
      const object = await ctx.store.get(key);
      if (!object || object.metadata[META.turn] !== String(turn)) return;
      if (!(await decide(ctx, key, String(turn), object.uploaded, 'returned')).key) return;
      const metadata = { ...object.metadata, [META.turn]: 'returned' };
      if (!(await ctx.store.put(key, object.body, { ifMatch: object.etag, metadata }))) return;
      const noticeId = randomId();
      const posted = {
        [META.postedAt]: postedAtOf(object),
        [META.noticeId]: noticeId,
        ...(incarnation === undefined ? {} : { [META.sessionCreated]: incarnation }),
      };
      const post = async (at: string) => {
        // Before the put: a removal after a delete must know it even when the put's answer is lost.
        given.push({ key: at, noticeId });
        return ctx.store.put(at, object.body, { onlyIfAbsent: true, metadata: posted });
      };
      if (!(await post(inboxPrefix + name))) await post(inboxPrefix + generateName(ctx.clock()));
      await ctx.store.delete(key);
    } catch (error) {
      ctx.log({ level: 'warn', message: `notice consumed by closed turn ${turn} not given back`, key, error });
    }
  });
  if (incarnation === undefined || given.length === 0 || (await sameIncarnation(ctx, sessionId, incarnation))) return;
  await mapLimit(given, CONCURRENCY, async ({ key, noticeId }) => {
    try {
      if ((await ctx.store.head(key))?.metadata[META.noticeId] === noticeId) await ctx.store.delete(key);
    } catch (error) {
      ctx.log({ level: 'warn', message: 'notice given back to a deleted session not removed', key, error });
    }
  });
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

/** Whether the id still names the incarnation created at `incarnation` (a failed read says yes). */
async function sameIncarnation(ctx: InboxContext, sessionId: string, incarnation: string): Promise<boolean> {
  const found = await ctx.sessionExists(sessionId).catch(() => true);
  return found === true || found === incarnation;
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
