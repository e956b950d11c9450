import { DEFAULTS } from '../defaults.ts';
import {
  InboxFullError,
  InvalidRequestError,
  NotFoundError,
  StorageError,
  NameTakenError,
  PayloadTooLargeError,
} from '../errors.ts';
import { inboxPrefix, inboxRemovedPrefix, inboxUnreadablePrefix } from '../session/keys.ts';
import { putCreateOnly } from '../store/create-only.ts';
import { toBytes, type ObjectInfo, type ObjectStore } from '../store/object-store.ts';
import { ABORT_NOTICE_NAME, isNoticeName, noticeNameSchema } from './notice-name.ts';
import { dropStale, holdsAtLeast, inNameOrder, listWindow, previewShare, splitAtAbort } from './listing.ts';
import { deliveredPage, everyPage, pendingPage, unreadablePage, type PageRequest } from './pages.ts';
import { exportDelivered, importDelivered, type ImportedNotices } from './transfer.ts';
import type { ExportNotice } from '../session/export-format.ts';
import type {
  ConsumeOptions,
  ConsumeResult,
  DeliveredNotice,
  DeliveryRecord,
  InboxLogEvent,
  InboxOptions,
  Page,
  PendingNotice,
  PostedNotice,
  PreviewNotice,
  SessionMark,
  UnreadableNotice,
} from './types.ts';
import { generateName, markMetadata, markOf, META, randomId, type ListedNotice } from './delivery-records.ts';
import type { FetchedNotice } from './delivery-records.ts';
import { abortPassedOver, deliverAll, previewNotices, readNotice, take, type InboxContext } from './move.ts';
import { withdrawNotice } from './post-back.ts';
import { previewLost } from './lost-preview.ts';
import { passOverOversized, setAsideLimit } from './set-aside.ts';
import { loggable } from '../loggable.ts';
import { forget, giveBack, type LostTurn, recordCarrier, recover, type Runner, tookNothing } from './carry.ts';

const GENERATED_NAME_ATTEMPTS = 5;

/** Notices a closed turn consumed, to give back (or found so: carry.ts `Unaccounted`). */
type Given = Parameters<typeof giveBack>[2];

/**
 * The session inbox: one-shot notices for the model (docs/ARCHITECTURE.md, "Inbox").
 *
 * Notices live at `<keyPrefix>sessions/<id>/inbox/<name>`, posted through `post` or written
 * straight into the bucket by any R2 or S3 client. `consume` delivers them at most once, in
 * byte order of their names, by moving each into `inbox_removed/<stored_as>` before using
 * its content. Names starting with "." and keys with a further "/" are not notices and are
 * left alone.
 *
 * How a move stays at-most-once without rename or copy, and what it costs: lib/inbox/move.ts.
 *
 * @example
 * const inbox = new Inbox(store, { keyPrefix: 'prod/', sessionExists: sessionExistsIn(store, 'prod/') });
 * await inbox.post('s1', { name: '0001-budget.md', content: 'Budget left: 2 USD' });
 * const { delivered, abort } = await inbox.consume('s1', { turn: 7 });
 */
export class Inbox {
  readonly #store: ObjectStore;
  readonly #keyPrefix: string;
  readonly #clock: () => Date;
  readonly #log: (event: InboxLogEvent) => void;
  readonly #maxNoticeBytes: number;
  readonly #maxPending: number;
  /** The most notices one turn takes from the inbox (`MAX_NOTICES_PER_TURN`). */
  readonly noticesPerTurn: number;
  readonly #sessionExists: InboxOptions['sessionExists'];
  readonly #checkedSession: InboxOptions['sessionExists'];
  readonly #context: InboxContext;

  constructor(store: ObjectStore, options: InboxOptions) {
    this.#store = store;
    this.#keyPrefix = options.keyPrefix ?? '';
    this.#clock = options.clock ?? (() => new Date());
    this.#log = options.log ?? defaultLog;
    this.#maxNoticeBytes = options.maxNoticeBytes ?? DEFAULTS.maxNoticeBytes;
    this.#maxPending = options.maxPendingNotices ?? DEFAULTS.maxPendingNotices;
    this.noticesPerTurn = options.maxNoticesPerTurn ?? DEFAULTS.maxNoticesPerTurn;
    this.#sessionExists = options.sessionExists;
    this.#checkedSession = options.checkedSession ?? options.sessionExists;
    this.#context = {
      store,
      clock: this.#clock,
      log: this.#log,
      maxNoticeBytes: this.#maxNoticeBytes,
      inboxPrefix: (sessionId) => this.#inboxPrefix(sessionId),
      removedPrefix: (sessionId) => this.#removedPrefix(sessionId),
      sessionExists: this.#sessionExists,
    };
  }

  /**
   * Posts a notice (docs/API.md, `POST .../inbox`). Without a name, one is generated that sorts
   * after every earlier generated name. The name `abort` is allowed: it aborts the next turn.
   * The put is create-only, so a pending notice is never overwritten. An inbox holding
   * `MAX_PENDING_NOTICES` pending refuses every notice but `abort` (one listing more a post; a
   * notice larger than a consume reads, which no turn takes, is not counted).
   *
   * @throws InvalidRequestError for a bad session id or name, PayloadTooLargeError above the
   *   limit, NotFoundError for a missing session, NameTakenError when the name is pending,
   *   InboxFullError when the inbox is full.
   */
  async post(sessionId: string, notice: { content: string; name?: string | undefined }): Promise<PostedNotice> {
    const inboxPrefix = this.#inboxPrefix(sessionId);
    if (typeof notice?.content !== 'string') throw new InvalidRequestError('content must be a string');
    const body = toBytes(notice.content);
    if (body.length > this.#maxNoticeBytes) {
      throw new PayloadTooLargeError(
        `notice content has ${body.length} bytes, more than the limit of ${this.#maxNoticeBytes}`,
        {
          limit: this.#maxNoticeBytes,
        },
      );
    }
    let name: string | undefined;
    if (notice.name !== undefined) {
      const parsed = noticeNameSchema.safeParse(notice.name);
      if (!parsed.success) {
        throw new InvalidRequestError(`invalid notice name: ${parsed.error.issues[0]?.message ?? 'bad name'}`, {
          field: 'name',
        });
      }
      name = parsed.data;
    }
    const created = await this.#requireSession(sessionId);
    const full = () => holdsAtLeast(this.#store, inboxPrefix, this.#maxPending, setAsideLimit(this.#maxNoticeBytes));
    if (name !== ABORT_NOTICE_NAME && (await full())) {
      // A repost of a pending name is refused as it always was.
      if (name !== undefined && (await this.#store.head(inboxPrefix + name))) throw new NameTakenError(name);
      throw new InboxFullError(this.#maxPending);
    }
    const now = this.#clock();
    const postedAt = now.toISOString();
    const metadata: Record<string, string> = { [META.postedAt]: postedAt, [META.noticeId]: randomId() };
    Object.assign(metadata, markMetadata(markOf(created)));
    // The notice id is random: a notice carrying ours is our write, whatever its put answered.
    const ours = (object: ObjectInfo) => object.metadata[META.noticeId] === metadata[META.noticeId];
    if (name !== undefined) {
      const written = await putCreateOnly(this.#store, inboxPrefix + name, body, { metadata }, ours);
      if (!written) throw new NameTakenError(name);
      return { name, posted_at: postedAt };
    }
    for (let attempt = 0; attempt < GENERATED_NAME_ATTEMPTS; attempt++) {
      const generated = generateName(now);
      const written = await putCreateOnly(this.#store, inboxPrefix + generated, body, { metadata }, ours);
      if (written) return { name: generated, posted_at: postedAt };
    }
    throw new StorageError('could not find a free generated notice name');
  }

  /**
   * A page of pending notices (docs/API.md, `GET .../inbox`; lib/inbox/pages.ts).
   *
   * @throws NotFoundError for a missing session.
   */
  async pendingPage(sessionId: string, page: PageRequest = {}): Promise<Page<'pending', PendingNotice>> {
    await this.#requireSession(sessionId);
    return pendingPage(this.#store, this.#inboxPrefix(sessionId), page);
  }

  /** Every pending notice, page after page (`pendingPage`). */
  async listPending(sessionId: string): Promise<PendingNotice[]> {
    return everyPage((after) => this.pendingPage(sessionId, { after, limit: 1000 }), 'pending');
  }

  /**
   * Withdraws a pending notice (docs/API.md, `DELETE .../inbox/:name`). A notice a concurrent
   * consume has already fetched may still be delivered: object stores have no conditional
   * delete. A post of a give-back is withdrawn with its other posts (lib/inbox/post-back.ts).
   *
   * @throws NotFoundError when the session is missing or no such notice is pending.
   */
  async withdraw(sessionId: string, name: string): Promise<void> {
    await this.#requireSession(sessionId);
    const key = this.#inboxPrefix(sessionId) + name;
    if (!isNoticeName(name) || !(await withdrawNotice(this.#store, key, this.#removedPrefix(sessionId))))
      throw new NotFoundError(`session ${sessionId} has no pending notice named ${name}`, { id: sessionId, name });
  }

  /**
   * A page of the record of deliveries (docs/API.md, `GET .../inbox/delivered`; lib/inbox/pages.ts),
   * given `lost`, the turns closed by someone else, their records listed under no turn.
   *
   * @throws NotFoundError for a missing session.
   */
  async deliveredPage(
    sessionId: string,
    page: PageRequest = {},
    lost?: () => Promise<readonly LostTurn[]>,
  ): Promise<Page<'delivered', DeliveryRecord>> {
    await this.#requireSession(sessionId);
    return deliveredPage(this.#store, this.#removedPrefix(sessionId), page, lost);
  }

  /**
   * A page of the notices set aside as unreadable (docs/API.md, `GET .../inbox/unreadable`;
   * lib/inbox/pages.ts).
   *
   * @throws NotFoundError for a missing session.
   */
  async unreadablePage(sessionId: string, page: PageRequest = {}): Promise<Page<'unreadable', UnreadableNotice>> {
    await this.#requireSession(sessionId);
    return unreadablePage(this.#store, inboxUnreadablePrefix(this.#keyPrefix, sessionId), page);
  }

  /** Every delivery record, page after page (`deliveredPage`). */
  async listDelivered(sessionId: string): Promise<DeliveryRecord[]> {
    return everyPage((after) => this.deliveredPage(sessionId, { after, limit: 1000 }), 'delivered');
  }

  /**
   * Consumes the pending notices for one real inference: moves each into `inbox_removed/`
   * (see the class comment), then returns its content, in byte order of names: the first
   * `room` of them (default `noticesPerTurn`), the rest staying for the next turns. The
   * reserved notice `abort` (exact, case-sensitive), wherever it is in the inbox, stops it: the
   * notices before it (of those first `room`) are delivered, `abort` itself is consumed once
   * and its trimmed content is the reason (blank: `aborted by inbox notice abort`), and the
   * notices after it stay for the next turn.
   *
   * Never throws for storage trouble: a notice that can never be delivered (too large, not
   * UTF-8) is set aside in `inbox_unreadable/`, one whose read or move fails is skipped in place,
   * both logged, and the rest are delivered. An `abort` that cannot
   * be moved stays in place, and consume stops before it without aborting (its content need
   * not be UTF-8: it is only the reason). An `abort` already claimed by another consume (an
   * earlier turn aborted, and its delete of the original failed) is passed over. A missing
   * session or empty inbox is a no-op that writes nothing; a failed listing is logged and
   * treated as an empty inbox.
   *
   * @throws InvalidRequestError for a malformed session id only.
   */
  async consume(sessionId: string, options: ConsumeOptions): Promise<ConsumeResult> {
    const inboxPrefix = this.#inboxPrefix(sessionId);
    const removedPrefix = this.#removedPrefix(sessionId);
    let share: ReturnType<typeof splitAtAbort<ListedNotice | FetchedNotice>>;
    try {
      let notices: (ListedNotice | FetchedNotice)[] = await (options.fetched ?? this.#listNotices(inboxPrefix));
      if (options.since !== undefined) notices = await dropStale(this.#context, notices, options.since);
      // Larger than a consume reads: left pending, unread, logged (docs/API.md, "Inbox").
      notices = passOverOversized(this.#context, notices);
      if (notices.length === 0) return { delivered: [] };
      // The turn's share: the inbox was listed so already, and `room` may take fewer.
      share = splitAtAbort(notices, options.room ?? this.noticesPerTurn);
      if (!options.sessionExists && !(await this.#sessionExists(sessionId))) {
        return { delivered: [] };
      }
    } catch (error) {
      this.#log({ level: 'warn', message: 'inbox not consumed: listing failed', key: inboxPrefix, error });
      return { delivered: [] };
    }
    const deliveredAt = this.#clock().toISOString();
    const context = {
      removedPrefix,
      unreadablePrefix: inboxUnreadablePrefix(this.#keyPrefix, sessionId),
      sessionId,
      turn: options.turn,
      ...(options.runner === undefined ? {} : { runner: options.runner }),
      deliveredAt,
      ...(options.since ? { since: options.since } : {}),
      ...(options.incarnation ? { incarnation: options.incarnation } : {}),
    };
    const { before, abort, after } = share;
    const delivered = await deliverAll(this.#context, before, context);
    if (!abort) return { delivered };
    const outcome = await take(this.#context, abort, context, true);
    if (outcome.kind === 'skipped') return { delivered };
    if (outcome.kind === 'taken') {
      // Withdrawn, or consumed by an earlier turn (which aborted): what follows is ours.
      delivered.push(...(await deliverAll(this.#context, after, context)));
      return { delivered };
    }
    const { name } = abort;
    const reason = outcome.content.trim() || `aborted by inbox notice ${name}`;
    return { delivered, abort: { name, stored_as: outcome.storedAs, reason, posted_at: outcome.postedAt } };
  }

  /**
   * Lists the notices a turn takes (`noticesPerTurn` and the `abort`) and starts reading them,
   * without side effects: what `consume` takes as `fetched`, so a turn reads its notices
   * before it knows its number.
   */
  async fetch(sessionId: string): Promise<FetchedNotice[]> {
    const notices = await this.#listNotices(this.#inboxPrefix(sessionId));
    return notices.map((notice) => {
      const read: FetchedNotice['read'] = notice.oversized
        ? Promise.resolve({ kind: 'skipped' })
        : readNotice(this.#context, notice, notice.name === ABORT_NOTICE_NAME);
      return { ...notice, read };
    });
  }

  /**
   * What `consume` with `room` would deliver now, without side effects (for the prompt
   * preview): the pending notices it takes before `abort` in name order, minus those that
   * cannot be read and the posts of a give-back it drops. Given `session` (its creation time
   * and `incarnation`, as a turn's consume has them: `consumeForModelCall`), also minus the
   * notices that are not that session's, which the consume removes: uploaded before it was
   * created, or posted to another incarnation of the id; and an original claimed already (the
   * delete of the consume that moved it failed); past an `abort` the consume passes over (one such
   * original, or not the session's) the notices after it too. Costs one list, a get and a head per notice (a
   * get more for a post of a give-back, a listing more for a name delivered before); never
   * writes. A missing session shows nothing.
   */
  async peek(sessionId: string, room = this.noticesPerTurn, session?: SessionMark): Promise<PreviewNotice[]> {
    const listed = await this.#listNotices(this.#inboxPrefix(sessionId));
    const { before, abort, after } = previewShare(listed, room, session?.created_at);
    const mark = session ? { since: session.created_at, incarnation: session.incarnation } : {};
    const passed = abort !== undefined && (await abortPassedOver(this.#context, sessionId, abort, mark));
    return previewNotices(this.#context, sessionId, passed ? [...before, ...after] : before, mark);
  }

  /**
   * What `recover` would take over now from turns closed by someone else, without side effects
   * (for the prompt preview; lib/inbox/lost-preview.ts `previewLost`).
   */
  async peekLost(sessionId: string, lost: readonly LostTurn[]): Promise<PreviewNotice[]> {
    return previewLost(this.#context, sessionId, lost);
  }

  /** Takes over, for turn `turn`, what turns closed by someone else consumed (lib/inbox/carry.ts `recover`). */
  async recover(
    id: string,
    lost: readonly LostTurn[],
    turn: number,
    runner?: string,
    held?: Set<string>,
    session?: SessionMark,
  ): Promise<DeliveredNotice[]> {
    return recover(this.#context, id, lost, turn, runner, held, session);
  }

  /** Whether turns closed by someone else consumed no notice (lib/inbox/carry.ts `tookNothing`). */
  async tookNothing(sessionId: string, lost: readonly { turn: number; since: string }[]): Promise<boolean> {
    return tookNothing(this.#context, sessionId, lost);
  }

  /** Gives notices a closed turn consumed back to the inbox (lib/inbox/carry.ts `giveBack`). */
  async giveBack(id: string, notices: Given, turn: number, session?: SessionMark, runner?: Runner) {
    return giveBack(this.#context, id, notices, turn, session, runner);
  }

  /** Removes what a turn of a deleted session consumed (lib/inbox/carry.ts `forget`). */
  async forget(sessionId: string, notices: readonly { stored_as: string }[], turn: number): Promise<void> {
    return forget(this.#context, sessionId, notices, turn);
  }

  /** Names the turn that finally carried notices in their delivery records (lib/inbox/carry.ts). */
  async recordCarrier(sessionId: string, notices: readonly { stored_as: string }[], turn: number): Promise<void> {
    return recordCarrier(this.#context, sessionId, notices, turn);
  }

  /** The delivered-notice records as lines of a session export (lib/inbox/transfer.ts). */
  exportDelivered(sessionId: string): AsyncGenerator<string> {
    return exportDelivered(this.#store, this.#keyPrefix, sessionId);
  }

  /** Writes the delivered-notice records of an imported session (lib/inbox/transfer.ts). */
  async importDelivered(
    sessionId: string,
    notices: readonly ExportNotice[],
    generation?: string,
  ): Promise<ImportedNotices> {
    return importDelivered(this.#store, this.#keyPrefix, sessionId, notices, generation);
  }

  /**
   * The notices a turn takes, and the `abort`, in name order, then those passed over as larger
   * than a consume reads, marked `oversized` (lib/inbox/listing.ts `listWindow`).
   */
  async #listNotices(inboxPrefix: string): Promise<ListedNotice[]> {
    const limit = setAsideLimit(this.#maxNoticeBytes);
    const window = await listWindow(this.#store, inboxPrefix, this.noticesPerTurn, limit);
    return [...inNameOrder(window), ...window.oversized];
  }

  /** The session's incarnation when `checkedSession` tells it, else true; NotFoundError when none. */
  async #requireSession(sessionId: string): Promise<true | string | SessionMark> {
    const found = await this.#checkedSession(sessionId);
    if (!found) throw new NotFoundError(`session ${sessionId} not found`, { id: sessionId });
    return found;
  }

  #inboxPrefix(sessionId: string): string {
    return inboxPrefix(this.#keyPrefix, sessionId);
  }

  #removedPrefix(sessionId: string): string {
    return inboxRemovedPrefix(this.#keyPrefix, sessionId);
  }
}

function defaultLog(event: InboxLogEvent): void {
  if (event.level === 'warn') console.warn(`inbox: ${event.message}`, event.key ?? '', loggable(event.error) ?? '');
}
