import { firstToCreate } from '../store/create-only.ts';
import { decodeUtf8, type ObjectStore, type StoredObject } from '../store/object-store.ts';
import { decodeName, type Identity, META, plainEtag } from './delivery-records.ts';
import type { InboxLogEvent } from './types.ts';

/**
 * A consume's check of a notice a give-back posted back (lib/inbox/give-back.ts): of the posts of
 * one give-back (a give-back that died, finished by another, may have posted it twice), one is delivered.
 */

/**
 * Whether notice `object` (at `key`, read as `identity`), when a give-back posted it, is the post of
 * that give-back to deliver: the first to create the key its metadata `returned-as` names, or the one
 * that created it (a consume of it that died before its claim). Another post of the same give-back is
 * removed while it is still the object read, and false. A notice no give-back posted is delivered as
 * any: true, no call.
 */
export async function firstPostBack(
  ctx: { store: ObjectStore; log: (event: InboxLogEvent) => void },
  removedPrefix: string,
  key: string,
  object: StoredObject,
  identity: Identity,
): Promise<boolean> {
  const returnedAs = decodeName(object.metadata[META.returnedAs]);
  if (returnedAs === undefined || !/^[^/]+\/taken-[^/]+$/.test(returnedAs)) return true;
  // Two posts of one give-back may share their bytes and upload second: the notice id tells them apart.
  const self = identity.noticeId || `${identity.etag}-${Date.parse(identity.uploaded)}`;
  const decided = await firstToCreate(ctx.store, removedPrefix + returnedAs, self);
  if (decided.first || (decided.found && decodeUtf8(decided.found.body).split(':')[0] === self)) return true;
  const current = await ctx.store.head(key);
  if (current && plainEtag(current.etag) === identity.etag && current.uploaded.toISOString() === identity.uploaded) {
    await ctx.store.delete(key);
    ctx.log({ level: 'info', message: 'removed a notice a give-back posted again, delivered already', key });
  }
  return false;
}
