import { firstToCreate } from '../store/create-only.ts';
import { decodeUtf8, type ObjectInfo, type ObjectStore, type StoredObject } from '../store/object-store.ts';
import { decodeName, type Identity, META } from './delivery-records.ts';
import type { InboxLogEvent } from './types.ts';

/**
 * A consume's check of a notice a give-back posted back (lib/inbox/give-back.ts): of the posts of
 * one give-back (a give-back that died, finished by another, may have posted it twice), one is delivered.
 */

/**
 * Whether notice `object` (at `key`, read as `identity`), when a give-back posted it, is the post of
 * that give-back to deliver: the first to create the key its metadata `returned-as` names, or the one
 * that created it (a consume of it that died before its claim). Another post of the same give-back is
 * removed while it is still the object read (its etag, upload time and notice id), and false. A
 * notice no give-back posted is delivered as any: true, no call.
 */
export async function firstPostBack(
  ctx: { store: ObjectStore; log: (event: InboxLogEvent) => void },
  removedPrefix: string,
  key: string,
  object: StoredObject,
  identity: Identity,
): Promise<boolean> {
  const returnedAs = returnedAsOf(object);
  if (returnedAs === undefined) return true;
  const self = selfOf(identity);
  const decided = await firstToCreate(ctx.store, removedPrefix + returnedAs, self);
  if (decided.first || (decided.found && decidedFor(decided.found.body, self))) return true;
  // Its notice id too: a notice posted under the name since may have its bytes and upload second.
  const current = await ctx.store.head(key);
  if (
    current &&
    current.etag === identity.etag &&
    current.uploaded.toISOString() === identity.uploaded &&
    (current.metadata[META.noticeId] ?? '') === identity.noticeId
  ) {
    await ctx.store.delete(key);
    const withdrawn =
      'found' in decided && decided.found !== null && decodeUtf8(decided.found.body).startsWith('withdrawn:');
    const why = withdrawn ? 'withdrawn' : 'delivered already';
    ctx.log({ level: 'info', message: `removed a notice a give-back posted again, ${why}`, key });
  }
  return false;
}

/**
 * Whether a consume of notice `object` (read as `identity`) would deliver it as `firstPostBack`
 * tells, without side effects (for the prompt preview, `Inbox.peek`): a post of a give-back is
 * dropped once the key its `returned-as` names holds another post's id (delivered) or a withdrawal.
 * A get of that key for a post of a give-back; no call for any other notice.
 */
export async function postBackDelivered(
  store: ObjectStore,
  removedPrefix: string,
  object: ObjectInfo,
  identity: Identity,
): Promise<boolean> {
  const returnedAs = returnedAsOf(object);
  if (returnedAs === undefined) return true;
  const decided = await store.get(removedPrefix + returnedAs);
  return decided === null || decidedFor(decided.body, selfOf(identity));
}

/** How a consume names a post in the key its `returned-as` names (its notice id, else its bytes and upload). */
function selfOf(identity: Identity): string {
  // Two posts of one give-back may share their bytes and upload second: the notice id tells them apart.
  return identity.noticeId || `${identity.etag}-${Date.parse(identity.uploaded)}`;
}

/** Whether the key a post's `returned-as` names, holding `body`, was created by a consume of post `self`. */
function decidedFor(body: Uint8Array, self: string): boolean {
  return decodeUtf8(body).split(':')[0] === self;
}

/** The `stored_as` of the record a post of a give-back was given back from, if it is one. */
export function givenBackFrom(object: ObjectInfo): string | undefined {
  return returnedAsOf(object)?.split('/')[0];
}

/** The key (after `inbox_removed/`) a post of a give-back names in its metadata `returned-as`, if it is one. */
function returnedAsOf(object: ObjectInfo): string | undefined {
  const returnedAs = decodeName(object.metadata[META.returnedAs]);
  return returnedAs !== undefined && /^[^/]+\/taken-[^/]+$/.test(returnedAs) ? returnedAs : undefined;
}

/**
 * Withdraws the pending notice at `key` (`Inbox.withdraw`): false when none is there. A post of a
 * give-back first creates the key its `returned-as` names (body `withdrawn:<random>`), so that no post
 * of that give-back is delivered since: one another finished later (it finds the key there) or one
 * pending under another name (a consume refused there removes it). A consume that created the key
 * first has fetched it, and may still deliver it, as any notice a consume fetched.
 */
export async function withdrawNotice(store: ObjectStore, key: string, removedPrefix: string): Promise<boolean> {
  const pending = await store.head(key);
  if (!pending) return false;
  const returnedAs = returnedAsOf(pending);
  if (returnedAs !== undefined) await firstToCreate(store, removedPrefix + returnedAs, 'withdrawn');
  await store.delete(key);
  return true;
}
