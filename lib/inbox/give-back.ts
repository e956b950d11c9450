import { StorageError } from '../errors.ts';
import { sha256Hex } from '../hash.ts';
import { putCreateOnly } from '../store/create-only.ts';
import type { ObjectInfo, StoredObject } from '../store/object-store.ts';
import { after, RETURNED } from './decision-chain.ts';
import { isClaimedOriginal, markMetadata, META, postedAtOf, randomId } from './delivery-records.ts';
import type { InboxContext } from './move.ts';
import type { SessionMark } from './types.ts';

/**
 * A notice given back to the inbox, crash-safe at every storage call (docs/STORAGE.md, "Notices").
 * The give-back's decision key (`returned:<random>`, lib/inbox/decision-chain.ts) says the notice
 * goes back; then it is posted back (create-only, with a notice id that begins with one derived from the
 * record and that key, so a repeat meets its own post), and only then the record is deleted, while it is
 * still the claim read. A process that dies in between leaves the record naming its turn: whoever finds it
 * (the next turn taking over that turn's notices, another run of the turn giving back, the give-back
 * again) walks the chain to the give-back's key and finishes the give-back, posting the notice
 * again. A notice found posted still is its own (create-only, same id); one posted and delivered
 * since is not delivered again: each post of one give-back names, in its metadata `returned-as`,
 * one create-only key beside the record, which the consume delivering it creates first, and a
 * consume refused there removes the post, delivering nothing (lib/inbox/post-back.ts).
 */

/**
 * A notice posted back: its key, and what the notice id of every post of its give-back begins with
 * (to remove it from a deleted session, whichever post of the give-back is there).
 */
export type Reposted = { key: string; noticeIdPrefix: string };

/**
 * Finishes the give-back of delivery record `object` (`storedAs`, of notice `name`) that decision key
 * `decision` (after `<record key>/`) holds for a give-back: posts the notice back under its name
 * (under a name derived from the record when its name is taken, then removes the record's original
 * if it is still there: `removeOriginal`), then deletes the record when a head finds it still the
 * claim read (a consume of the post may have claimed its key again once another finisher deleted it). `found`:
 * the caller found the give-back's key, not created it: the post may have been delivered already
 * (a head of the key its consume created tells it). Given `session`, the post names it as a post
 * does; `reposted` hears each post before it is put. Throws on storage failures, the record left
 * to whoever finds it next.
 */
export async function finishGiveBack(
  ctx: InboxContext,
  sessionId: string,
  notice: { name: string; storedAs: string; object: StoredObject; decision: string; found: boolean },
  session?: SessionMark,
  reposted?: Reposted[],
): Promise<void> {
  const { name, storedAs, object, decision } = notice;
  const key = ctx.removedPrefix(sessionId) + storedAs;
  const inboxPrefix = ctx.inboxPrefix(sessionId);
  const seed = sha256Hex(`${key}\n${decision}`);
  // Derived from the record and the key, and random: a repeat knows its own post, a consume tells two apart.
  const noticeId = `${seed.slice(0, 24)}-${randomId()}`;
  const delivered = `${storedAs}/${after(decision, RETURNED)}`;
  if (!notice.found || !(await ctx.store.head(ctx.removedPrefix(sessionId) + delivered))) {
    const metadata: Record<string, string> = {
      [META.postedAt]: postedAtOf(object),
      [META.noticeId]: noticeId,
      [META.returnedAs]: encodeURIComponent(delivered),
      ...markMetadata(session),
    };
    const ours = (found: StoredObject) => found.metadata[META.noticeId]?.startsWith(seed.slice(0, 24)) === true;
    const post = async (at: string) => {
      // Before the put: a removal after a delete must know it even when the put's answer is lost.
      reposted?.push({ key: at, noticeIdPrefix: seed.slice(0, 24) });
      return putCreateOnly(ctx.store, at, object.body, { metadata }, ours);
    };
    if (!(await post(inboxPrefix + name))) {
      const other = fallbackName(postedAtOf(object), seed);
      if (!(await post(inboxPrefix + other))) throw new StorageError(`notice name ${other} is taken`);
      await removeOriginal(ctx, inboxPrefix + name, object);
    }
  }
  // Only the claim read: once another finished this give-back and deleted the record, a consume of
  // the post may have claimed the key again, with the same bytes (the same etag on S3 and R2).
  const current = await ctx.store.head(key);
  if (current && sameClaim(current, object)) await ctx.store.delete(key);
}

/** Whether delivery record `current` is the claim `object` was: its claim id and the original it moved. */
function sameClaim(current: ObjectInfo, object: StoredObject): boolean {
  return [META.claimId, META.sourceEtag, META.sourceUploaded].every(
    (field) => current.metadata[field] === object.metadata[field],
  );
}

/**
 * The name a give-back posts a notice under when its own is taken: a generated name (lib/inbox/notice-name.ts)
 * of the time it was posted, its random part derived from the record, so a repeat finds its own post.
 */
function fallbackName(postedAt: string, seed: string): string {
  const millis = Math.max(0, Date.parse(postedAt) || 0);
  return `${String(millis).padStart(15, '0')}-0000-${seed.slice(24, 32)}`;
}

/**
 * Removes `key` when it is still the original notice delivery record `object` claims: the delete
 * of the run that moved it did not land (yet; it may never, its process gone). Once the give-back
 * deletes the claim, no later consume would know that original as claimed, and would deliver it again.
 */
async function removeOriginal(ctx: InboxContext, key: string, object: StoredObject): Promise<void> {
  const current = await ctx.store.head(key);
  if (current && isClaimedOriginal(current, object)) await ctx.store.delete(key);
}
