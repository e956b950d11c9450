import { decodeUtf8, type StoredObject } from '../store/object-store.ts';
import type { SessionMark } from './types.ts';
import {
  META,
  nameTooLong,
  postedAtOf,
  type ClaimOutcome,
  type FetchedNotice,
  type Identity,
  type ListedNotice,
  type NoticeRead,
  type SlotClaim,
  type TakeContext,
  type UnreadableReason,
} from './delivery-records.ts';
import { claimSlot, removeStaleOriginal, type SlotContext } from './slots.ts';

/**
 * Notices that can never be delivered (larger than `MAX_NOTICE_BYTES`, content not UTF-8, a
 * direct writer's name over `MAX_NOTICE_NAME_BYTES`, lib/session/export-format.ts),
 * set aside in `inbox_unreadable/` by the consume that meets them, so they hold no later turn's
 * place (docs/STORAGE.md, "Unreadable notices").
 */

/**
 * A notice set aside as unreadable is read whole to be moved: one larger than this many times
 * `maxNoticeBytes` is never read, and passed over in place (lib/inbox/listing.ts `listWindow`).
 */
const SET_ASIDE_FACTOR = 4;

/** The largest notice a consume reads to set it aside (`SET_ASIDE_FACTOR` x `maxNoticeBytes`). */
export function setAsideLimit(maxNoticeBytes: number): number {
  return SET_ASIDE_FACTOR * maxNoticeBytes;
}

const LATER = 'a later consume removes it';

/**
 * The notices of `notices` a consume reads: one larger than it reads (`setAsideLimit`, which the
 * listing marks `oversized`) stays pending, unread, logged as left in place as one grown past it
 * after the listing is (`setAside`).
 */
export function passOverOversized<Notice extends ListedNotice>(
  ctx: Pick<SetAsideContext, 'log' | 'maxNoticeBytes'>,
  notices: Notice[],
): Notice[] {
  const limit = setAsideLimit(ctx.maxNoticeBytes);
  for (const { info } of notices.filter((notice) => notice.oversized)) {
    ctx.log({ level: 'warn', message: `unreadable notice left in place: larger than ${limit} bytes`, key: info.key });
  }
  return notices.filter((notice) => !notice.oversized);
}

const REASONS: Record<UnreadableReason, string> = {
  too_large: 'larger than the notice limit',
  not_utf8: 'content is not valid UTF-8',
  name_too_long: 'name longer than an import takes',
};

/** What setting aside uses of the inbox (`InboxContext`, lib/inbox/move.ts). */
type SetAsideContext = SlotContext & {
  maxNoticeBytes: number;
  sessionExists: (sessionId: string) => Promise<boolean | string | SessionMark>;
};

/**
 * Sets aside a notice that can never be delivered, so it holds no later turn's place: claims
 * a slot for its bytes in `inbox_unreadable/` as a delivery claims one in `inbox_removed/`
 * (create-only, `<stem>.1<ext>` ... when the name is taken), then deletes the original, and
 * logs a warning. A notice read a while ago (fetched ahead) is read again, and set aside only
 * if it still cannot be delivered. Never delivers it; when a step fails it is left in place
 * (logged), for a later consume.
 */
export async function setAside(
  ctx: SetAsideContext,
  notice: ListedNotice | FetchedNotice,
  read: Extract<NoticeRead, { kind: 'unreadable' }>,
  context: TakeContext,
): Promise<ClaimOutcome> {
  const { key } = notice.info;
  const limit = setAsideLimit(ctx.maxNoticeBytes);
  let object: StoredObject | null | undefined = 'read' in notice ? undefined : read.object;
  let reason = read.reason;
  if (!object) {
    if (notice.info.size > limit) return { kind: 'skipped' };
    try {
      object = await ctx.store.get(key);
    } catch (error) {
      ctx.log({ level: 'warn', message: 'unreadable notice left in place: read failed', key, error });
      return { kind: 'skipped' };
    }
    if (!object) return { kind: 'taken' };
    const now = unreadableReason(notice.name, object.body, ctx.maxNoticeBytes);
    // Replaced meanwhile by a notice a later consume delivers.
    if (now === undefined) return { kind: 'skipped' };
    reason = now;
  }
  // Grown past what a consume reads since the listing: left in place, as the listing of the
  // next turn's window passes over it.
  if (object.body.length > limit) {
    ctx.log({ level: 'warn', message: `unreadable notice left in place: larger than ${limit} bytes`, key });
    return { kind: 'skipped' };
  }
  const identity: Identity = {
    etag: object.etag,
    uploaded: object.uploaded.toISOString(),
    noticeId: object.metadata[META.noticeId] ?? '',
  };
  const metadata: Record<string, string> = {
    // A name too long for metadata is only in the key (a listing shows `stored_as` for it).
    ...(reason === 'name_too_long' ? {} : { [META.name]: encodeURIComponent(notice.name) }),
    [META.postedAt]: postedAtOf(object),
    [META.deliveredAt]: context.deliveredAt,
    [META.turn]: String(context.turn),
    [META.sourceEtag]: identity.etag,
    [META.sourceUploaded]: identity.uploaded,
    [META.unreadable]: reason,
  };
  if (identity.noticeId) metadata[META.noticeId] = identity.noticeId;
  let claim: SlotClaim;
  try {
    claim = await claimSlot(
      ctx,
      context.unreadablePrefix,
      notice.name,
      object.body,
      metadata,
      identity,
      object.uploaded,
    );
  } catch (error) {
    ctx.log({
      level: 'warn',
      message: `unreadable notice left in place (${REASONS[reason]}): set aside failed`,
      key,
      error,
    });
    return { kind: 'skipped' };
  }
  if ('claimedBy' in claim) {
    await removeStaleOriginal(ctx, key, claim.claimedBy, context.turn);
    return { kind: 'skipped' };
  }
  const storedAs = `inbox_unreadable/${claim.storedAs}`;
  try {
    await ctx.store.delete(key);
  } catch (error) {
    ctx.log({
      level: 'warn',
      message: `notice set aside as ${storedAs} (${REASONS[reason]}), but its original was not deleted; ${LATER}`,
      key,
      error,
    });
    return { kind: 'skipped' };
  }
  ctx.log({ level: 'warn', message: `notice set aside as ${storedAs}: ${REASONS[reason]}`, key });
  await forgetIfDeleted(ctx, context, context.unreadablePrefix + claim.storedAs);
  return { kind: 'skipped' };
}

/**
 * A set-aside of a session deleted since the turn read it may land after the delete's sweep
 * passed `inbox_unreadable/`: it goes with the session, removed here (as lib/inbox/carry.ts
 * `forget` removes a delivery's record) while the id names no session. One get of the config,
 * paid by set-asides only; a failure keeps it (the next delete of the id removes it).
 */
async function forgetIfDeleted(ctx: SetAsideContext, context: TakeContext, slotKey: string): Promise<void> {
  try {
    if (await ctx.sessionExists(context.sessionId)) return;
    await ctx.store.delete(slotKey);
  } catch (error) {
    ctx.log({ level: 'warn', message: 'notice set aside for a deleted session not removed', key: slotKey, error });
  }
}

/** Why notice `name` of `body` can never be delivered, or undefined when it can. */
function unreadableReason(name: string, body: Uint8Array, maxNoticeBytes: number): UnreadableReason | undefined {
  if (nameTooLong(name)) return 'name_too_long';
  if (body.length > maxNoticeBytes) return 'too_large';
  try {
    decodeUtf8(body);
    return undefined;
  } catch {
    return 'not_utf8';
  }
}
