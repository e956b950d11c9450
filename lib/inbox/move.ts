import { decodeUtf8, mapLimit, type ObjectInfo, type ObjectStore, type StoredObject } from '../store/object-store.ts';
import type { DeliveredNotice, InboxLogEvent, PreviewNotice, SessionMark } from './types.ts';
import {
  CONCURRENCY,
  META,
  namesOther,
  nameTooLong,
  postedAtOf,
  type ClaimOutcome,
  type FetchedNotice,
  type Identity,
  type ListedNotice,
  type NoticeRead,
  type SlotClaim,
  type TakeContext,
} from './delivery-records.ts';
import { firstPostBack, givenBackFrom, postBackDelivered } from './post-back.ts';
import { setAside } from './set-aside.ts';
import { claimedAlready, claimSlot, removeStaleOriginal } from './slots.ts';

export { removeStaleOriginal } from './slots.ts';

/**
 * Moving one notice out of the inbox: the create-only claim in `inbox_removed/` that is the
 * commit point of a delivery, then the delete of the original (`Inbox.consume`).
 *
 * How a move stays at-most-once without rename or copy (the R2 binding has neither):
 * 1. `get` the notice. One too large or not valid UTF-8 is set aside (lib/inbox/set-aside.ts).
 * 2. Claim: a create-only `put` of the same bytes to `inbox_removed/<name>`, with metadata
 *    naming the original (its etag, upload time and, for API posts, a random notice id), the
 *    posted time, the delivery time and the turn. The create-only put is the commit point.
 *    When the key is taken, the occupant is compared with the original: the same original
 *    means another consumer already claimed this very notice, and we back off. Otherwise an
 *    earlier delivery holds the name and we try `<stem>.1<ext>`, `<stem>.2<ext>` ... (after
 *    one listing of the taken slots, checking any slot written since the notice was uploaded
 *    for a claim of it), so no earlier delivery is overwritten and no notice is claimed under
 *    two names. A post of a give-back skips the slot of the record it was given back from, which
 *    a stalled give-back may still delete (lib/inbox/slots.ts `claimSlot`).
 * 3. Delete the original.
 * 4. Deliver the content read in step 1, now owned by the claim.
 *
 * The content is read and checked before the claim (there is no server-side copy, so the
 * bytes are in hand anyway): an unreadable notice is never claimed, and a claimed notice is
 * always deliverable. A crash, or a claim whose answer is lost, after step 2 loses the
 * notice (never delivers it twice). When step 3 fails, the notice is still delivered (it was
 * claimed) and the leftover original is recognised as claimed by every later consume; the
 * next turn's consume deletes it (any consume, once the claim is a minute old: see
 * `removeStaleOriginal`, lib/inbox/slots.ts). Identity is etag + upload time (+ notice id): a
 * client that rewrites the same bytes under a delivered name within the storage clock's
 * resolution (a second on S3) is taken for the delivered notice, and that rewrite is dropped.
 *
 * The cost is a list plus three operations per notice (get, put, delete), and a head before
 * the move of a notice read earlier (`Inbox.fetch`, as a turn reads its notices). A name
 * delivered before adds the refused put, a head of what holds the name and a list of its
 * slots, and on S3 (listings carry no metadata) a head per slot uploaded since
 * CLOCK_TOLERANCE_MS before the notice (lib/inbox/slots.ts `claimSlot`).
 */

/** What the inbox's functions work with: its store, settings and where a session's notices are. */
export interface InboxContext {
  store: ObjectStore;
  clock: () => Date;
  log: (event: InboxLogEvent) => void;
  maxNoticeBytes: number;
  inboxPrefix: (sessionId: string) => string;
  removedPrefix: (sessionId: string) => string;
  /** Whether the id names a session: its creation time when the check tells it (InboxOptions). */
  sessionExists: (sessionId: string) => Promise<boolean | string | SessionMark>;
}

/**
 * Reads one notice for its move. A notice that can never be delivered (too large, content not
 * UTF-8, a name over `MAX_NOTICE_NAME_BYTES`, unread) is `unreadable`, for the move to set aside;
 * but an `abort` too large is left in place (skipped), and an `abort` whose content is not UTF-8
 * is read all the same. A failed read (maybe passing) is skipped, left in place for a later turn.
 */
export async function readNotice(ctx: InboxContext, notice: ListedNotice, isAbort: boolean): Promise<NoticeRead> {
  const { key } = notice.info;
  const tooLarge = (object?: StoredObject): NoticeRead => {
    if (!isAbort) return { kind: 'unreadable', reason: 'too_large', ...(object ? { object } : {}) };
    ctx.log({ level: 'warn', message: `notice left in place: larger than ${ctx.maxNoticeBytes} bytes`, key });
    return { kind: 'skipped' };
  };
  // A direct writer's: its delivery record's metadata would not fit it, nor an import its export.
  if (!isAbort && nameTooLong(notice.name)) return { kind: 'unreadable', reason: 'name_too_long' };
  if (notice.info.size > ctx.maxNoticeBytes) return tooLarge();
  let object: Awaited<ReturnType<typeof ctx.store.get>>;
  try {
    object = await ctx.store.get(key);
  } catch (error) {
    ctx.log({ level: 'warn', message: 'notice left in place: read failed', key, error });
    return { kind: 'skipped' };
  }
  if (!object) return { kind: 'taken' };
  if (object.body.length > ctx.maxNoticeBytes) return tooLarge(object);
  try {
    return { kind: 'read', object, content: decodeUtf8(object.body) };
  } catch {
    if (!isAbort) return { kind: 'unreadable', reason: 'not_utf8', object };
    // An abort's content is only its reason: the intent is in the name.
    return { kind: 'read', object, content: new TextDecoder().decode(object.body) };
  }
}

/**
 * Moves one notice (claim, delete original) and returns its content, or why not. A notice
 * fetched earlier is moved as it was read then.
 */
export async function take(
  ctx: InboxContext,
  notice: ListedNotice | FetchedNotice,
  context: TakeContext,
  isAbort: boolean,
): Promise<ClaimOutcome> {
  const { key } = notice.info;
  const read = await ('read' in notice ? notice.read : readNotice(ctx, notice, isAbort));
  if (read.kind === 'unreadable') return setAside(ctx, notice, read, context);
  if (read.kind !== 'read') return read;
  const { object, content } = read;
  // Posted to an incarnation of the id deleted since (the post checked it just before the
  // delete): not this session's.
  if (namesOther(object.metadata, context)) {
    await ctx.store.delete(key).catch((error: unknown) => {
      ctx.log({ level: 'warn', message: 'could not remove a notice of a deleted session', key, error });
    });
    return { kind: 'taken' };
  }
  // Read a while ago: the original must still be the one read, or it may have been taken
  // and given back (posted again) since, and its old claim deleted. A post of a give-back has
  // the same bytes, so the same etag where the etag is the body's (S3, R2): the upload time and
  // notice id tell it apart, a new notice this consume did not read (nor its `returned-as`).
  if ('read' in notice) {
    let current: Awaited<ReturnType<typeof ctx.store.head>>;
    try {
      current = await ctx.store.head(key);
    } catch (error) {
      // As a failed move: left in place for a later turn, the notices moved beside it kept.
      ctx.log({ level: 'warn', message: 'notice left in place: its check before the move failed', key, error });
      return { kind: 'skipped' };
    }
    if (!current || !sameObject(current, object)) return { kind: 'taken' };
  }
  const identity: Identity = {
    etag: object.etag,
    uploaded: object.uploaded.toISOString(),
    noticeId: object.metadata[META.noticeId] ?? '',
  };
  const postedAt = postedAtOf(object);
  const metadata: Record<string, string> = {
    [META.name]: encodeURIComponent(notice.name),
    [META.postedAt]: postedAt,
    [META.deliveredAt]: context.deliveredAt,
    [META.turn]: String(context.turn),
    [META.sourceEtag]: identity.etag,
    [META.sourceUploaded]: identity.uploaded,
  };
  if (identity.noticeId) metadata[META.noticeId] = identity.noticeId;
  if (context.runner !== undefined) metadata[META.runner] = context.runner;
  let claim: SlotClaim;
  try {
    // Posted back by a give-back that may have posted it more than once: one post is delivered.
    if (!(await firstPostBack(ctx, context.removedPrefix, key, object, identity))) return { kind: 'taken' };
    const from = givenBackFrom(object);
    claim = await claimSlot(
      ctx,
      context.removedPrefix,
      notice.name,
      object.body,
      metadata,
      identity,
      object.uploaded,
      from,
    );
  } catch (error) {
    ctx.log({ level: 'warn', message: 'notice left in place: move failed', key, error });
    return { kind: 'skipped' };
  }
  if ('claimedBy' in claim) {
    await removeStaleOriginal(ctx, key, claim.claimedBy, context.turn);
    return { kind: 'taken' };
  }
  // Right after the claim, not with the other notices' originals at the end of the consume:
  // the delete is unconditional, and the longer it waits the likelier the name is freed
  // (withdrawn, or a leftover removed) and posted again meanwhile, a notice it would delete.
  try {
    await ctx.store.delete(key);
  } catch (error) {
    ctx.log({
      level: 'warn',
      message: `notice delivered as ${claim.storedAs}, but its original was not deleted; a later consume removes it`,
      key,
      error,
    });
  }
  return { kind: 'claimed', storedAs: claim.storedAs, content, postedAt };
}

/** Whether `current`, the notice now under the name, is `object` as read: etag, upload time, notice id. */
function sameObject(current: ObjectInfo, object: ObjectInfo): boolean {
  return (
    current.etag === object.etag &&
    current.uploaded.getTime() === object.uploaded.getTime() &&
    (current.metadata[META.noticeId] ?? '') === (object.metadata[META.noticeId] ?? '')
  );
}

/** Moves notices (a few at a time) and returns those delivered, in the order given. */
export async function deliverAll(
  ctx: InboxContext,
  notices: (ListedNotice | FetchedNotice)[],
  context: TakeContext,
): Promise<DeliveredNotice[]> {
  const outcomes = await mapLimit(notices, CONCURRENCY, (notice) => take(ctx, notice, context, false));
  const delivered: DeliveredNotice[] = [];
  outcomes.forEach((outcome, index) => {
    if (outcome.kind !== 'claimed') return;
    delivered.push({
      name: notices[index]!.name,
      stored_as: outcome.storedAs,
      content: outcome.content,
      posted_at: outcome.postedAt,
    });
  });
  return delivered;
}

/**
 * The content of each of `shown` that a consume would deliver, without side effects (`Inbox.peek`):
 * those that cannot be read now or ever are left out, one posted to an incarnation of the id other than
 * `session` (as `take` removes it), an original claimed already (its consumer's delete failed:
 * `claimedAlready`, a head more), and a post of a give-back that a consume drops (another post of its
 * give-back delivered, or withdrawn: `postBackDelivered`, a get more for such a post).
 */
export async function previewNotices(
  ctx: InboxContext,
  sessionId: string,
  shown: readonly ListedNotice[],
  session: { since?: string | undefined; incarnation?: string | undefined } = {},
): Promise<PreviewNotice[]> {
  const removedPrefix = ctx.removedPrefix(sessionId);
  const contents = await mapLimit(shown, CONCURRENCY, async ({ name, info }) => {
    if (info.size > ctx.maxNoticeBytes || nameTooLong(name)) return undefined;
    try {
      const object = await ctx.store.get(info.key);
      if (!object || object.body.length > ctx.maxNoticeBytes || namesOther(object.metadata, session)) return undefined;
      const content = decodeUtf8(object.body);
      const identity = {
        etag: object.etag,
        uploaded: object.uploaded.toISOString(),
        noticeId: object.metadata[META.noticeId] ?? '',
      };
      const from = givenBackFrom(object);
      if (await claimedAlready(ctx.store, removedPrefix, name, identity, object.uploaded, from)) return undefined;
      return (await postBackDelivered(ctx.store, removedPrefix, object, identity)) ? content : undefined;
    } catch (error) {
      ctx.log({ level: 'info', message: 'pending notice not previewed: unreadable', key: info.key, error });
      return undefined;
    }
  });
  const preview: PreviewNotice[] = [];
  contents.forEach((content, index) => {
    if (content !== undefined) preview.push({ name: shown[index]!.name, content });
  });
  return preview;
}

/**
 * Whether a consume passes over the pending `abort` (`take` answers `taken`), going on with the
 * notices after it, without side effects (`Inbox.peek`): one gone since the listing, posted to an
 * incarnation of the id other than `session`, an original claimed already (an earlier turn aborted,
 * its delete failed: `claimedAlready`) or a post of a give-back a consume drops. One too large, or
 * whose head fails, stops the consume as it stays in place. A head, and the checks' calls.
 */
export async function abortPassedOver(
  ctx: InboxContext,
  sessionId: string,
  abort: ListedNotice,
  session: { since?: string | undefined; incarnation?: string | undefined },
): Promise<boolean> {
  if (abort.info.size > ctx.maxNoticeBytes) return false;
  const removedPrefix = ctx.removedPrefix(sessionId);
  try {
    const object = await ctx.store.head(abort.info.key);
    if (!object) return true;
    if (object.size > ctx.maxNoticeBytes) return false;
    if (namesOther(object.metadata, session)) return true;
    const identity = {
      etag: object.etag,
      uploaded: object.uploaded.toISOString(),
      noticeId: object.metadata[META.noticeId] ?? '',
    };
    const from = givenBackFrom(object);
    if (await claimedAlready(ctx.store, removedPrefix, abort.name, identity, object.uploaded, from)) return true;
    return !(await postBackDelivered(ctx.store, removedPrefix, object, identity));
  } catch (error) {
    ctx.log({ level: 'info', message: 'pending abort not previewed: its check failed', key: abort.info.key, error });
    return false;
  }
}
