import { mapLimit, type ObjectInfo, type ObjectStore } from '../store/object-store.ts';
import { decisionOf, type LostTurn } from './carry.ts';
import { peekDecision } from './decision-chain.ts';
import {
  CLOCK_TOLERANCE_MS,
  CONCURRENCY,
  decodeName,
  META,
  postedAtOf,
  turnSchema,
  validTime,
  withMetadata,
} from './delivery-records.ts';
import { isNoticeName } from './notice-name.ts';
import type { DeliveryRecord, Page, PendingNotice, UnreadableNotice } from './types.ts';

/**
 * The pages of `GET .../inbox` and `.../inbox/delivered` (docs/API.md, "Inbox"): `after` a name
 * (exclusive, byte order), `limit` (default `DEFAULT_PAGE_SIZE`). A page lists with the
 * delimiter "/", so the keys under a further "/" (never notices, nor records: the takeover
 * markers under `inbox_removed/<stored_as>/`) come back once per group.
 */

/** The default page of the inbox's listings, as of the other listings with `after` (forks). */
export const DEFAULT_PAGE_SIZE = 50;

/** The most keys one list call asks for (S3's and R2's page). */
const MAX_LIST_KEYS = 1000;

/** A page of a listing: after the name `after` (exclusive), at most `limit`. */
export interface PageRequest {
  after?: string | undefined;
  limit?: number | undefined;
}

/**
 * A page of pending notices sorted by name (byte order). `posted_at` is the time stored by
 * `post`, or the upload time for a notice written straight into the bucket. Costs a list (one
 * of `limit + 1` keys, more only past keys that are no notices), plus a head per notice of the
 * page when the store's listing carries no metadata (S3).
 */
export async function pendingPage(
  store: ObjectStore,
  inboxPrefix: string,
  page: PageRequest,
): Promise<Page<'pending', PendingNotice>> {
  const { objects, ...more } = await listPage(store, inboxPrefix, page, isNoticeName);
  const pending = await mapLimit(objects, CONCURRENCY, async (info) => {
    const described = await withMetadata(store, info);
    return { name: info.key.slice(inboxPrefix.length), size: described.size, posted_at: postedAtOf(described) };
  });
  return { pending, ...more };
}

/**
 * A page of the record of deliveries, in `stored_as` byte order. Costs a list, plus a head per
 * record of the page when the listing carries no metadata (S3). An object put into
 * `inbox_removed/` by something else is listed with its upload time and `turn: null`. So is a
 * record of a turn closed by someone else (`lost`, read once when the page lists a record),
 * written since its claim: that turn's receipt names none of its notices, and the next turn
 * takes the record over (lib/inbox/carry.ts `recover`) and delivers it. Unless a give-back ended
 * its chain of decision keys (lib/inbox/decision-chain.ts `peekDecision`, a get per key walked,
 * as the prompt preview tells it: lib/inbox/lost-preview.ts): the notice goes back to the inbox
 * (lib/inbox/give-back.ts), pending once it is posted back, so such a record, left by a give-back
 * that died before it deleted it, is left out (a page may then hold fewer than `limit`).
 */
export async function deliveredPage(
  store: ObjectStore,
  removedPrefix: string,
  page: PageRequest,
  lost: () => Promise<readonly LostTurn[]> = async () => [],
): Promise<Page<'delivered', DeliveryRecord>> {
  const { objects, ...more } = await listPage(store, removedPrefix, page, isRecordName);
  const closed = new Map((objects.length > 0 ? await lost() : []).map((entry) => [entry.turn, entry.since]));
  const closedTurns = new Set([...closed.keys()].map(String));
  const delivered = await mapLimit(objects, CONCURRENCY, async (listed): Promise<DeliveryRecord | null> => {
    const info = await withMetadata(store, listed);
    const storedAs = info.key.slice(removedPrefix.length);
    const uploaded = info.uploaded.toISOString();
    const owner = turnSchema.safeParse(info.metadata[META.turn]);
    const since = owner.success ? closed.get(owner.data) : undefined;
    // As lib/inbox/carry.ts finds the records of such a turn: written since its claim.
    const lostWith = since !== undefined && info.uploaded.getTime() >= Date.parse(since) - CLOCK_TOLERANCE_MS;
    if (lostWith && (await peekDecision({ store }, info.key, decisionOf(info), closedTurns)) === 'givenBack')
      return null;
    return {
      name: decodeName(info.metadata[META.name]) ?? storedAs,
      stored_as: storedAs,
      posted_at: postedAtOf(info),
      delivered_at: validTime(info.metadata[META.deliveredAt]) ?? uploaded,
      turn: owner.success && !lostWith ? owner.data : null,
    };
  });
  return { delivered: delivered.filter((record) => record !== null), ...more };
}

/**
 * A page of the notices set aside as unreadable (lib/inbox/set-aside.ts), in `stored_as` byte
 * order. Costs as `deliveredPage`. An object put into `inbox_unreadable/` by something else is
 * listed with its upload time, `turn: null` and `reason: null`.
 */
export async function unreadablePage(
  store: ObjectStore,
  unreadablePrefix: string,
  page: PageRequest,
): Promise<Page<'unreadable', UnreadableNotice>> {
  const { objects, ...more } = await listPage(store, unreadablePrefix, page, isRecordName);
  const unreadable = await mapLimit(objects, CONCURRENCY, async (listed): Promise<UnreadableNotice> => {
    const info = await withMetadata(store, listed);
    const storedAs = info.key.slice(unreadablePrefix.length);
    const turn = turnSchema.safeParse(info.metadata[META.turn]);
    const reason = info.metadata[META.unreadable];
    return {
      name: decodeName(info.metadata[META.name]) ?? storedAs,
      stored_as: storedAs,
      size: info.size,
      reason: reason === 'too_large' || reason === 'not_utf8' || reason === 'name_too_long' ? reason : null,
      posted_at: postedAtOf(info),
      set_aside_at: validTime(info.metadata[META.deliveredAt]) ?? info.uploaded.toISOString(),
      turn: turn.success ? turn.data : null,
    };
  });
  return { unreadable, ...more };
}

/** Every item of a paged listing, reading page after page. */
export async function everyPage<Key extends string, Item>(
  read: (after: string | undefined) => Promise<Page<Key, Item>>,
  key: Key,
): Promise<Item[]> {
  const items: Item[] = [];
  let after: string | undefined;
  do {
    const page = await read(after);
    items.push(...page[key]);
    after = page.next_after ?? undefined;
  } while (after !== undefined);
  return items;
}

/** The name of a delivery record (`inbox_removed/<stored_as>`, not a key under one). */
function isRecordName(name: string): boolean {
  return name.length > 0 && !name.includes('/');
}

/**
 * One page of the objects directly under `prefix` whose name `keep` accepts, in byte order,
 * after `after`: at most `limit` of them, listing `limit + 1` keys a call (at most 1000) until
 * it has one more than the page (then `has_more`) or the listing ends.
 */
async function listPage(
  store: ObjectStore,
  prefix: string,
  page: PageRequest,
  keep: (name: string) => boolean,
): Promise<{ objects: ObjectInfo[]; has_more: boolean; next_after: string | null }> {
  const limit = page.limit ?? DEFAULT_PAGE_SIZE;
  const objects: ObjectInfo[] = [];
  let cursor: string | undefined;
  do {
    const listed = await store.list(prefix, {
      delimiter: '/',
      limit: Math.min(limit + 1, MAX_LIST_KEYS),
      ...(cursor !== undefined ? { cursor } : page.after !== undefined ? { startAfter: prefix + page.after } : {}),
    });
    objects.push(...listed.objects.filter((info) => keep(info.key.slice(prefix.length))));
    cursor = listed.truncated ? listed.cursor : undefined;
  } while (cursor !== undefined && objects.length <= limit);
  const has_more = objects.length > limit;
  const shown = objects.slice(0, limit);
  const last = shown[shown.length - 1];
  return { objects: shown, has_more, next_after: has_more && last ? last.key.slice(prefix.length) : null };
}
