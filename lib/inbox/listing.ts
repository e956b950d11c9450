import type { ObjectStore } from '../store/object-store.ts';
import { currentNotices, type ListedNotice } from './delivery-records.ts';
import type { InboxLogEvent } from './types.ts';
import { ABORT_NOTICE_NAME, compareBytes, isNoticeName } from './notice-name.ts';

/**
 * The bounded listings of the inbox: the notices a turn takes (at most a window of them, and
 * the `abort` wherever it is) and the number pending (up to the limit a post checks). Each
 * lists with the delimiter "/", so the keys under a further "/" (never notices) come back once
 * per group.
 */

/** The notices a turn would take, as listed: at most `size` of them, and the `abort` if pending. */
export interface NoticeWindow {
  /** The first `size` notices in byte order of names, `abort` left out. */
  notices: ListedNotice[];
  abort?: ListedNotice;
  /** The notices larger than `maxBytes` in the pages listed, marked `oversized`, in no window. */
  oversized: ListedNotice[];
}

/**
 * Lists the first `size` notices under `inboxPrefix` and finds the `abort`: one list call for
 * an inbox of up to 1000 keys; past that, pages until `size` notices are in hand, then a head
 * of `abort` when the pages read did not reach it. A notice larger than `maxBytes` is passed
 * over (a consume would not read it, lib/inbox/set-aside.ts): it holds no place in the window,
 * and is answered in `oversized` (a consume still removes it when it is older than the session).
 */
export async function listWindow(
  store: ObjectStore,
  inboxPrefix: string,
  size: number,
  maxBytes = Number.POSITIVE_INFINITY,
): Promise<NoticeWindow> {
  const notices: ListedNotice[] = [];
  const oversized: ListedNotice[] = [];
  let abort: ListedNotice | undefined;
  let cursor: string | undefined;
  let truncated = false;
  do {
    const page = await store.list(inboxPrefix, { delimiter: '/', ...(cursor === undefined ? {} : { cursor }) });
    for (const info of page.objects) {
      const name = info.key.slice(inboxPrefix.length);
      if (name === ABORT_NOTICE_NAME) abort = { name, info };
      else if (!isNoticeName(name)) continue;
      else if (info.size <= maxBytes) notices.push({ name, info });
      else oversized.push({ name, info, oversized: true });
    }
    truncated = page.truncated;
    cursor = page.cursor;
  } while (truncated && cursor !== undefined && notices.length < size);
  if (!abort && truncated) {
    const info = await store.head(inboxPrefix + ABORT_NOTICE_NAME);
    if (info) abort = { name: ABORT_NOTICE_NAME, info };
  }
  notices.sort((left, right) => compareBytes(left.name, right.name));
  return { notices: notices.slice(0, size), ...(abort ? { abort } : {}), oversized };
}

/**
 * The notices uploaded since the session was created at `sessionCreatedAt` (within the clock
 * tolerance, `currentNotices`); the older ones, left by an unfinished delete of an earlier
 * session of the id, are deleted (whatever their size: the listing's upload time tells it,
 * nothing is read), failures logged.
 */
export async function dropStale<Notice extends ListedNotice>(
  ctx: { store: ObjectStore; log: (event: InboxLogEvent) => void },
  notices: Notice[],
  sessionCreatedAt: string,
): Promise<Notice[]> {
  const current = currentNotices(notices, sessionCreatedAt);
  const stale = notices.filter((notice) => !current.includes(notice));
  if (stale.length === 0) return notices;
  try {
    await ctx.store.delete(stale.map(({ info }) => info.key));
    ctx.log({ level: 'info', message: `removed ${stale.length} notices older than the session` });
  } catch (error) {
    ctx.log({ level: 'warn', message: 'could not remove notices older than the session', error });
  }
  return current;
}

/** The window and its `abort` as one list in byte order of names (what `consume` and `peek` walk). */
export function inNameOrder<Notice extends ListedNotice>(window: { notices: Notice[]; abort?: Notice }): Notice[] {
  const all = window.abort ? [...window.notices, window.abort] : [...window.notices];
  return all.sort((left, right) => compareBytes(left.name, right.name));
}

/**
 * What a turn with room for `room` notices takes of `listed` (in name order): the first `room`
 * notices but the `abort`, split at it. `after` is taken only when the `abort` is gone before
 * the turn takes it (withdrawn, or taken by an earlier turn).
 */
export function splitAtAbort<Notice extends ListedNotice>(
  listed: readonly Notice[],
  room: number,
): { before: Notice[]; abort?: Notice; after: Notice[] } {
  const abort = listed.find((notice) => notice.name === ABORT_NOTICE_NAME);
  const taken = listed.filter((notice) => notice !== abort).slice(0, Math.max(0, room));
  if (!abort) return { before: taken, after: [] };
  const before = taken.filter((notice) => compareBytes(notice.name, ABORT_NOTICE_NAME) < 0);
  return { before, abort, after: taken.slice(before.length) };
}

/**
 * The notices of `listed` that a consume with room for `room` takes, split at the `abort`, without
 * side effects (`Inbox.peek`): as `consume` does, those older than the session created at
 * `sessionCreatedAt` (when given, `dropStale`) and those larger than it reads are passed over.
 */
export function previewShare<Notice extends ListedNotice>(
  listed: readonly Notice[],
  room: number,
  sessionCreatedAt?: string,
): { before: Notice[]; abort?: Notice; after: Notice[] } {
  const current = sessionCreatedAt === undefined ? listed : currentNotices(listed, sessionCreatedAt);
  return splitAtAbort(
    current.filter((notice) => !notice.oversized),
    room,
  );
}

/**
 * Whether at least `limit` notices are pending under `inboxPrefix` (pages until it knows). A
 * notice larger than `maxBytes` is not counted: no turn takes it (`listWindow`), so it holds
 * no place that a post could wait for.
 */
export async function holdsAtLeast(
  store: ObjectStore,
  inboxPrefix: string,
  limit: number,
  maxBytes = Number.POSITIVE_INFINITY,
): Promise<boolean> {
  let count = 0;
  let cursor: string | undefined;
  do {
    const page = await store.list(inboxPrefix, { delimiter: '/', ...(cursor === undefined ? {} : { cursor }) });
    count += page.objects.filter(
      (info) => isNoticeName(info.key.slice(inboxPrefix.length)) && info.size <= maxBytes,
    ).length;
    if (count >= limit) return true;
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor !== undefined);
  return false;
}
