import { StorageError } from '../errors.ts';
import { decodeUtf8, listAll, mapLimit, type ObjectInfo, type ObjectStore } from '../store/object-store.ts';
import { parseSlot, slotName, splitExtension } from './notice-name.ts';
import type { DeliveredNotice, InboxLogEvent } from './types.ts';
import {
  CLOCK_TOLERANCE_MS,
  CONCURRENCY,
  META,
  plainEtag,
  postedAtOf,
  randomId,
  sameIdentity,
  turnSchema,
  withMetadata,
  type ClaimOutcome,
  type FetchedNotice,
  type Identity,
  type ListedNotice,
  type NoticeRead,
  type SlotClaim,
  type TakeContext,
} from './delivery-records.ts';

/**
 * Moving one notice out of the inbox: the create-only claim in `inbox_removed/` that is the
 * commit point of a delivery, then the delete of the original (see `Inbox`).
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
  sessionExists: (sessionId: string) => Promise<boolean | string>;
}

/** A claim older than this whose original still exists was left by a consumer that failed. */
const STALE_CLAIM_MS = 60_000;
/** Bound on create-only attempts at successive slots of one name within one consume. */
const MAX_SLOT_ATTEMPTS = 50;

/** Reads one notice for its move: too large, unreadable or not UTF-8 (but an abort's) is skipped. */
export async function readNotice(ctx: InboxContext, notice: ListedNotice, isAbort: boolean): Promise<NoticeRead> {
  const { key } = notice.info;
  const tooLarge = () => {
    ctx.log({ level: 'warn', message: `notice left in place: larger than ${ctx.maxNoticeBytes} bytes`, key });
    return { kind: 'skipped' } as const;
  };
  if (notice.info.size > ctx.maxNoticeBytes) return tooLarge();
  let object: Awaited<ReturnType<typeof ctx.store.get>>;
  try {
    object = await ctx.store.get(key);
  } catch (error) {
    ctx.log({ level: 'warn', message: 'notice left in place: read failed', key, error });
    return { kind: 'skipped' };
  }
  if (!object) return { kind: 'taken' };
  if (object.body.length > ctx.maxNoticeBytes) return tooLarge();
  try {
    return { kind: 'read', object, content: decodeUtf8(object.body) };
  } catch (error) {
    if (!isAbort) {
      ctx.log({ level: 'warn', message: 'notice left in place: content is not valid UTF-8', key, error });
      return { kind: 'skipped' };
    }
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
  if (read.kind !== 'read') return read;
  const { object, content } = read;
  // Posted to an incarnation of the id deleted since (the post checked it just before the
  // delete): not this session's.
  const postedTo = object.metadata[META.sessionCreated];
  if (postedTo !== undefined && context.since !== undefined && postedTo !== context.since) {
    await ctx.store.delete(key).catch((error: unknown) => {
      ctx.log({ level: 'warn', message: 'could not remove a notice of a deleted session', key, error });
    });
    return { kind: 'taken' };
  }
  // Read a while ago: the original must still be the one read, or it may have been taken
  // and given back (posted again) since, and its old claim deleted.
  if ('read' in notice) {
    let current: Awaited<ReturnType<typeof ctx.store.head>>;
    try {
      current = await ctx.store.head(key);
    } catch (error) {
      // As a failed move: left in place for a later turn, the notices moved beside it kept.
      ctx.log({ level: 'warn', message: 'notice left in place: its check before the move failed', key, error });
      return { kind: 'skipped' };
    }
    if (!current || plainEtag(current.etag) !== plainEtag(object.etag)) return { kind: 'taken' };
  }
  const identity: Identity = {
    etag: plainEtag(object.etag),
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
    claim = await claimSlot(ctx, context.removedPrefix, notice.name, object.body, metadata, identity, object.uploaded);
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

/**
 * Claims a slot in `inbox_removed/` for one notice with create-only puts, or finds the
 * claim another consumer already holds for this same original (same identity).
 */
export async function claimSlot(
  ctx: InboxContext,
  removedPrefix: string,
  name: string,
  body: Uint8Array,
  metadata: Record<string, string>,
  identity: Identity,
  uploaded: Date,
): Promise<SlotClaim> {
  const claim = { ...metadata, [META.claimId]: randomId() };
  const first = await putClaim(ctx, removedPrefix + name, body, claim);
  if (first === 'ours') return { storedAs: name };
  if (first && sameIdentity(first, identity)) return { claimedBy: first };

  // The name was delivered before: learn which slots are taken with one listing.
  const [stem] = splitExtension(name);
  const taken = new Map<number, ObjectInfo>();
  // Every slot from 1 on starts with `<stem>.`, whether or not the name has an extension.
  for (const info of await listAll(ctx.store, `${removedPrefix}${stem}.`)) {
    const slot = parseSlot(name, info.key.slice(removedPrefix.length));
    if (slot !== undefined && slot > 0) taken.set(slot, info);
  }
  // A claim of this notice was written after the notice was: only those slots can hold one.
  const horizon = uploaded.getTime() - CLOCK_TOLERANCE_MS;
  const recent = [...taken.entries()]
    .filter(([, info]) => info.uploaded.getTime() >= horizon)
    .sort(([left], [right]) => left - right);
  for (const [, listed] of recent) {
    const info = await withMetadata(ctx.store, listed);
    if (sameIdentity(info, identity)) return { claimedBy: info };
  }
  let slot = 1;
  for (let attempt = 0; attempt < MAX_SLOT_ATTEMPTS; attempt++) {
    while (taken.has(slot)) slot += 1;
    const storedAs = slotName(name, slot);
    const occupant = await putClaim(ctx, removedPrefix + storedAs, body, claim);
    if (occupant === 'ours') return { storedAs };
    if (occupant && sameIdentity(occupant, identity)) return { claimedBy: occupant };
    // Taken by another notice meanwhile (or deleted again: then retry the same slot).
    if (occupant) taken.set(slot, occupant);
  }
  throw new StorageError(`no free slot in inbox_removed/ for ${name} after ${MAX_SLOT_ATTEMPTS} attempts`);
}

/**
 * A create-only put of a claim: `ours` when it landed (also when its answer was lost: the
 * object there carries our claim id), else what occupies the key (null: nothing, try again).
 * Not `putCreateOnly` (lib/store/create-only.ts), which only says whether the object is ours:
 * a claim slot taken by someone else must name its occupant (`claimSlot` compares its identity
 * and records the slot as taken), and a head is enough to tell, where that reads the body back.
 */
export async function putClaim(
  ctx: InboxContext,
  key: string,
  body: Uint8Array,
  metadata: Record<string, string>,
): Promise<'ours' | ObjectInfo | null> {
  let failure: { error: unknown } | null = null;
  try {
    if (await ctx.store.put(key, body, { onlyIfAbsent: true, metadata })) return 'ours';
  } catch (error) {
    failure = { error };
  }
  const occupant = await ctx.store.head(key);
  if (occupant && occupant.metadata[META.claimId] === metadata[META.claimId]) return 'ours';
  if (failure) throw failure.error;
  return occupant;
}

/**
 * A claim exists for the original we just read. The leftover original (claimed, hence never
 * to be delivered, yet listed as pending and holding its name) is removed here once its
 * consumer is done with it: the claim names an earlier turn than `turn` (a session's turns
 * run one at a time, so that one has moved on: its delete failed), or it is older than a
 * minute (that consumer failed). A claim of this same turn is left to its consumer, which is
 * deleting the original right now. The original must still be the one claimed (a head just
 * before the delete): one withdrawn and posted again meanwhile is another notice.
 */
export async function removeStaleOriginal(
  ctx: InboxContext,
  key: string,
  claim: ObjectInfo,
  turn: number,
): Promise<void> {
  const claimedAt = Date.parse(claim.metadata[META.deliveredAt] ?? '');
  const claimedIn = turnSchema.safeParse(claim.metadata[META.turn]);
  const earlierTurn = claimedIn.success && Number(claimedIn.data) < turn;
  const old = Number.isFinite(claimedAt) && ctx.clock().getTime() - claimedAt >= STALE_CLAIM_MS;
  if (!earlierTurn && !old) return;
  try {
    const current = await ctx.store.head(key);
    if (
      !current ||
      plainEtag(current.etag) !== claim.metadata[META.sourceEtag] ||
      current.uploaded.toISOString() !== claim.metadata[META.sourceUploaded]
    )
      return;
    await ctx.store.delete(key);
    ctx.log({ level: 'info', message: `removed a notice already delivered as ${claim.key}`, key });
  } catch (error) {
    ctx.log({ level: 'warn', message: 'could not remove a notice that was already delivered', key, error });
  }
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
