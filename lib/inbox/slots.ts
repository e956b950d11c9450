import { StorageError } from '../errors.ts';
import { canonicalEtag } from '../store/etag.ts';
import { listAll, type ObjectInfo, type ObjectStore } from '../store/object-store.ts';
import {
  CLOCK_TOLERANCE_MS,
  META,
  randomId,
  sameIdentity,
  turnSchema,
  withMetadata,
  type Identity,
  type SlotClaim,
} from './delivery-records.ts';
import { parseSlot, slotName, splitExtension } from './notice-name.ts';
import type { InboxLogEvent } from './types.ts';

/**
 * The slots a notice is moved into (a delivery's claim in `inbox_removed/`, a set-aside in
 * `inbox_unreadable/`): create-only puts at `<name>`, `<stem>.1<ext>` ..., each naming the
 * original it holds, and the removal of an original left behind by a consumer whose delete failed.
 */

/** What claiming a slot uses of the inbox (`InboxContext`, lib/inbox/move.ts). */
export interface SlotContext {
  store: ObjectStore;
  clock: () => Date;
  log: (event: InboxLogEvent) => void;
}

/** A claim older than this whose original still exists was left by a consumer that failed. */
const STALE_CLAIM_MS = 60_000;
/** Bound on create-only attempts at successive slots of one name within one consume. */
const MAX_SLOT_ATTEMPTS = 50;

/**
 * Claims a slot in `inbox_removed/` for one notice with create-only puts, or finds the
 * claim another consumer already holds for this same original (same identity). A post of a
 * give-back (lib/inbox/give-back.ts) never takes the slot of the record it was given back from
 * (`avoid`, the record's `stored_as`): that give-back, stalled between its head of the record
 * and its delete while another finished it, would delete the new claim (a head of the slot
 * instead, which may hold a claim of it all the same).
 */
export async function claimSlot(
  ctx: SlotContext,
  removedPrefix: string,
  name: string,
  body: Uint8Array,
  metadata: Record<string, string>,
  identity: Identity,
  uploaded: Date,
  avoid?: string,
): Promise<SlotClaim> {
  const claim = { ...metadata, [META.claimId]: randomId() };
  const key = removedPrefix + name;
  const first = avoid === name ? await ctx.store.head(key) : await putClaim(ctx, key, body, claim);
  if (first === 'ours') return { storedAs: name };
  if (first && sameIdentity(first, identity)) return { claimedBy: first };

  // The name was delivered before: learn which slots are taken with one listing.
  const { taken, claimedBy } = await laterSlots(ctx.store, removedPrefix, name, identity, uploaded);
  if (claimedBy) return { claimedBy };
  let slot = 1;
  for (let attempt = 0; attempt < MAX_SLOT_ATTEMPTS; attempt++) {
    while (taken.has(slot) || slotName(name, slot) === avoid) slot += 1;
    const storedAs = slotName(name, slot);
    const occupant = await putClaim(ctx, removedPrefix + storedAs, body, claim);
    if (occupant === 'ours') return { storedAs };
    if (occupant && sameIdentity(occupant, identity)) return { claimedBy: occupant };
    // Taken by another notice meanwhile (or deleted again: then retry the same slot).
    if (occupant) taken.set(slot, occupant);
  }
  throw new StorageError(`no free slot in ${removedPrefix} for ${name} after ${MAX_SLOT_ATTEMPTS} attempts`);
}

/**
 * Whether a claim of the original `identity` names (uploaded at `uploaded`) is held in a slot
 * of `name` already, without side effects (for the prompt preview): what `claimSlot` would find,
 * the original left by a consumer whose delete failed, which the next consume removes instead of
 * delivering. A head of the name's first slot; when another notice holds it, a listing of the other
 * slots and a head of each recent one where listings carry no metadata (S3).
 */
export async function claimedAlready(
  store: ObjectStore,
  removedPrefix: string,
  name: string,
  identity: Identity,
  uploaded: Date,
  avoid?: string,
): Promise<boolean> {
  const first = await store.head(removedPrefix + name);
  if (first && sameIdentity(first, identity)) return true;
  // A post of a give-back is claimed in a later slot when `avoid` is its name (`claimSlot`).
  if (!first && avoid !== name) return false;
  return (await laterSlots(store, removedPrefix, name, identity, uploaded)).claimedBy !== undefined;
}

/**
 * The slots of `name` from 1 on, by one listing, and the claim of `identity` among them if one
 * holds it: only a slot written after the original (uploaded at `uploaded`) can, each read with
 * its metadata (a head where listings carry none, S3), lowest slot first.
 */
async function laterSlots(
  store: ObjectStore,
  removedPrefix: string,
  name: string,
  identity: Identity,
  uploaded: Date,
): Promise<{ taken: Map<number, ObjectInfo>; claimedBy?: ObjectInfo }> {
  const [stem] = splitExtension(name);
  const taken = new Map<number, ObjectInfo>();
  // Every slot from 1 on starts with `<stem>.`, whether or not the name has an extension.
  for (const info of await listAll(store, `${removedPrefix}${stem}.`)) {
    const slot = parseSlot(name, info.key.slice(removedPrefix.length));
    if (slot !== undefined && slot > 0) taken.set(slot, info);
  }
  const horizon = uploaded.getTime() - CLOCK_TOLERANCE_MS;
  const recent = [...taken.entries()]
    .filter(([, info]) => info.uploaded.getTime() >= horizon)
    .sort(([left], [right]) => left - right);
  for (const [, listed] of recent) {
    const info = await withMetadata(store, listed);
    if (sameIdentity(info, identity)) return { taken, claimedBy: info };
  }
  return { taken };
}

/**
 * A create-only put of a claim: `ours` when it landed (also when its answer was lost: the
 * object there carries our claim id), else what occupies the key (null: nothing, try again).
 * Not `putCreateOnly` (lib/store/create-only.ts), which only says whether the object is ours:
 * a claim slot taken by someone else must name its occupant (`claimSlot` compares its identity
 * and records the slot as taken), and a head is enough to tell, where that reads the body back.
 */
export async function putClaim(
  ctx: SlotContext,
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
  ctx: SlotContext,
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
      current.etag !== canonicalEtag(claim.metadata[META.sourceEtag]) ||
      current.uploaded.toISOString() !== claim.metadata[META.sourceUploaded]
    )
      return;
    await ctx.store.delete(key);
    ctx.log({ level: 'info', message: `removed a notice already delivered as ${claim.key}`, key });
  } catch (error) {
    ctx.log({ level: 'warn', message: 'could not remove a notice that was already delivered', key, error });
  }
}
