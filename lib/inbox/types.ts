import type { FetchedNotice, UnreadableReason } from './delivery-records.ts';
/** The inbox's public shapes: what its methods take and answer. */

/**
 * The incarnation of a session id that exists, as `sessionExists` may tell it: its creation time
 * and, when its config has one, its `incarnation` (the generation it started with). An import
 * keeps the creation time of the session it was exported from, not its incarnation.
 */
export interface SessionMark {
  created_at: string;
  incarnation?: string | undefined;
}

/** One line of the inbox's log: a notice skipped, left in place, or cleaned up. */
export interface InboxLogEvent {
  level: 'warn' | 'info';
  message: string;
  key?: string;
  error?: unknown;
}

export interface InboxOptions {
  /**
   * Whether a session with this id exists: the inbox's one question to the session log
   * (`sessionExistsIn`, or `sessionCreatedIn` in lib/session/log/config-object.ts), asked before
   * posting and listing, and by consume when the caller has not just read the session. A string
   * (its creation time) or a `SessionMark` names the incarnation that exists: a notice posted
   * then names it, and a consume of another incarnation of the id drops it (a post racing a
   * delete and a create or an import).
   */
  sessionExists: (sessionId: string) => Promise<boolean | string | SessionMark>;
  /**
   * What posting, listing and withdrawing ask instead of `sessionExists`: the same question,
   * with the request's token check run on the config it reads (`sessionCreatedIn`'s `check`),
   * so a token bound to a deleted incarnation is refused by the read whose answer a notice
   * names, not only by a check before it. Default: `sessionExists`.
   */
  checkedSession?: (sessionId: string) => Promise<boolean | string | SessionMark>;
  /** Prefix of every key (`KEY_PREFIX`), e.g. `prod/`. Default: none. */
  keyPrefix?: string;
  /** The service clock: posted_at of API posts and delivered_at of deliveries. */
  clock?: () => Date;
  /** Receives per-notice problems. Default: warnings to console.warn, info dropped. */
  log?: (event: InboxLogEvent) => void;
  /**
   * Largest notice content in bytes, for posting and for consuming.
   * Default `DEFAULTS.maxNoticeBytes` (lib/defaults.ts).
   */
  maxNoticeBytes?: number;
  /** The most notices one turn takes (`MAX_NOTICES_PER_TURN`). Default `DEFAULTS.maxNoticesPerTurn`. */
  maxNoticesPerTurn?: number;
  /** Pending notices past which a post is refused (`MAX_PENDING_NOTICES`). Default `DEFAULTS.maxPendingNotices`. */
  maxPendingNotices?: number;
}

/** A page of a listing (`GET .../inbox`, `.../inbox/delivered`): its items under `Key`. */
export type Page<Key extends string, Item> = { [key in Key]: Item[] } & {
  has_more: boolean;
  /** The `after` of the next page (the last name of this one); null on the last page. */
  next_after: string | null;
};

/** What `post` answers: the API's 201 body. */
export interface PostedNotice {
  name: string;
  posted_at: string;
}

/** A notice waiting in `inbox/`. */
export interface PendingNotice {
  name: string;
  size: number;
  posted_at: string;
}

/** A record of one delivery, read back from `inbox_removed/`. */
export interface DeliveryRecord {
  name: string;
  stored_as: string;
  posted_at: string;
  delivered_at: string;
  /** The turn that consumed it, or null for an object in `inbox_removed/` not written here. */
  turn: number | null;
}

/** A notice set aside in `inbox_unreadable/` (never delivered), read back from there. */
export interface UnreadableNotice {
  name: string;
  stored_as: string;
  /** Its bytes, kept as they were in `inbox/`. */
  size: number;
  /** Why it cannot be delivered; null for an object there not written by the inbox. */
  reason: UnreadableReason | null;
  posted_at: string;
  set_aside_at: string;
  /** The turn (0: a chat completion) whose consume set it aside; null as for `reason`. */
  turn: number | null;
}

/** A notice consume delivered: the turn appends `{role: 'user', content}` to the prompt. */
export interface DeliveredNotice {
  name: string;
  stored_as: string;
  content: string;
  posted_at: string;
}

/** The `abort` notice consume took: the turn ends as `aborted` with this reason. */
export interface InboxAbort {
  name: string;
  stored_as: string;
  reason: string;
  posted_at: string;
}

export interface ConsumeResult {
  /** Delivered notices in name order (byte order). Present also when the turn aborts. */
  delivered: DeliveredNotice[];
  abort?: InboxAbort;
}

export interface ConsumeOptions {
  /** The turn number that consumes, recorded with each delivery. */
  turn: number;
  /** The random `writer` of the turn's run, recorded with each delivery (its runner, lib/inbox/carry.ts). */
  runner?: string;
  /**
   * Set when the caller has just read the session config (the turn has), to save the
   * existence check. Without it, consume checks `session.json` once, only when the inbox
   * holds something, and is a no-op for a missing session.
   */
  sessionExists?: boolean;
  /**
   * When the session was created: a notice uploaded before it (by more than the clock
   * tolerance) was left by a delete that did not finish, for an earlier session with the same
   * id, and is removed instead of delivered.
   */
  since?: string;
  /**
   * The consuming session's `incarnation` (its config's), where it has one: a notice posted to
   * another incarnation is removed instead of delivered, also one created at the same time (an
   * import keeps the creation time of the session it was exported from).
   */
  incarnation?: string | undefined;
  /**
   * How many notices the turn takes at most (default `Inbox.noticesPerTurn`): fewer when it
   * delivers notices earlier turns took first. The `abort` is taken whatever the room.
   */
  room?: number;
  /** The inbox as `Inbox.fetch` read it: moved as read then, without listing again. */
  fetched?: Promise<FetchedNotice[]>;
}

/** A notice the prompt preview shows as pending. */
export interface PreviewNotice {
  name: string;
  content: string;
}
