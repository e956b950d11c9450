import type { ObjectStore } from '../store/object-store.ts';
import type { ListedNotice } from './delivery-records.ts';
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
}

/**
 * Lists the first `size` notices under `inboxPrefix` and finds the `abort`: one list call for
 * an inbox of up to 1000 keys; past that, pages until `size` notices are in hand, then a head
 * of `abort` when the pages read did not reach it. A notice larger than `maxBytes` is passed
 * over (a consume would not read it, lib/inbox/set-aside.ts): it holds no place in the window.
 */
export async function listWindow(
  store: ObjectStore,
  inboxPrefix: string,
  size: number,
  maxBytes = Number.POSITIVE_INFINITY,
): Promise<NoticeWindow> {
  const notices: ListedNotice[] = [];
  let abort: ListedNotice | undefined;
  let cursor: string | undefined;
  let truncated = false;
  do {
    const page = await store.list(inboxPrefix, { delimiter: '/', ...(cursor === undefined ? {} : { cursor }) });
    for (const info of page.objects) {
      const name = info.key.slice(inboxPrefix.length);
      if (name === ABORT_NOTICE_NAME) abort = { name, info };
      else if (isNoticeName(name) && info.size <= maxBytes) notices.push({ name, info });
    }
    truncated = page.truncated;
    cursor = page.cursor;
  } while (truncated && cursor !== undefined && notices.length < size);
  if (!abort && truncated) {
    const info = await store.head(inboxPrefix + ABORT_NOTICE_NAME);
    if (info) abort = { name: ABORT_NOTICE_NAME, info };
  }
  notices.sort((left, right) => compareBytes(left.name, right.name));
  return { notices: notices.slice(0, size), ...(abort ? { abort } : {}) };
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

/** Whether at least `limit` notices are pending under `inboxPrefix` (pages until it knows). */
export async function holdsAtLeast(store: ObjectStore, inboxPrefix: string, limit: number): Promise<boolean> {
  let count = 0;
  let cursor: string | undefined;
  do {
    const page = await store.list(inboxPrefix, { delimiter: '/', ...(cursor === undefined ? {} : { cursor }) });
    count += page.objects.filter((info) => isNoticeName(info.key.slice(inboxPrefix.length))).length;
    if (count >= limit) return true;
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor !== undefined);
  return false;
}
