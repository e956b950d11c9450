import { z } from 'zod';
import { InvalidRequestError, NotFoundError, StorageError } from '../errors.ts';
import { sessionConfigKey, sessionPrefix } from '../session/keys.ts';
import { putCreateOnly } from '../store/create-only.ts';
import { decodeUtf8, toBytes, type ObjectInfo, type ObjectStore } from '../store/object-store.ts';
import { NameTakenError, PayloadTooLargeError } from './inbox-errors.ts';
import {
  ABORT_NOTICE_NAME,
  compareBytes,
  createNameGenerator,
  isNoticeName,
  noticeNameSchema,
  parseSlot,
  slotName,
  splitExtension,
} from './notice-name.ts';

export { NameTakenError, PayloadTooLargeError } from './inbox-errors.ts';
export { ABORT_NOTICE_NAME, noticeNameSchema } from './notice-name.ts';

/** The API's notice limit: 256 KiB of UTF-8 content. */
export const DEFAULT_MAX_NOTICE_BYTES = 262_144;

/** The body of `POST .../inbox`, for the router to validate with. */
export const postNoticeSchema = z
  .object({
    content: z.string(),
    name: noticeNameSchema.optional(),
  })
  .strict();

export type PostNotice = z.infer<typeof postNoticeSchema>;

/** One line of the inbox's log: a notice skipped, left in place, or cleaned up. */
export interface InboxLogEvent {
  level: 'warn' | 'info';
  message: string;
  key?: string;
  error?: unknown;
}

export interface InboxOptions {
  /** Prefix of every key (`KEY_PREFIX`), e.g. `prod/`. Default: none. */
  keyPrefix?: string;
  /** The service clock: posted_at of API posts and delivered_at of deliveries. */
  clock?: () => Date;
  /** Receives per-notice problems. Default: warnings to console.warn, info dropped. */
  log?: (event: InboxLogEvent) => void;
  /** Largest notice content in bytes, for posting and for consuming. Default 262144. */
  maxNoticeBytes?: number;
}

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
}

export interface ConsumeResult {
  /** Delivered notices in name order (byte order). Present also when the turn aborts. */
  delivered: DeliveredNotice[];
  abort?: InboxAbort;
}

export interface ConsumeOptions {
  /** The turn number that consumes, recorded with each delivery. */
  turn: number;
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
}

/** A notice the prompt preview shows as pending. */
export interface PreviewNotice {
  name: string;
  content: string;
}

/** Metadata keys (lowercase with hyphens: S3 lowercases user metadata, R2 keeps it). */
const META = {
  name: 'notice-name',
  postedAt: 'posted-at',
  noticeId: 'notice-id',
  deliveredAt: 'delivered-at',
  turn: 'turn',
  sourceEtag: 'source-etag',
  sourceUploaded: 'source-uploaded',
  /** Random per claim attempt: a claim whose put answer was lost is recognised as ours. */
  claimId: 'claim-id',
} as const;

/** Parallel storage calls per operation: a Worker has 6 simultaneous connections. */
const CONCURRENCY = 6;
/** A claim older than this whose original still exists was left by a consumer that failed. */
const STALE_CLAIM_MS = 60_000;
/** Tolerance between storage timestamps when deciding which slots could hold a claim. */
const CLOCK_TOLERANCE_MS = 5_000;
/** Bound on create-only attempts at successive slots of one name within one consume. */
const MAX_SLOT_ATTEMPTS = 50;
const GENERATED_NAME_ATTEMPTS = 5;

const isoTimeSchema = z.iso.datetime({ offset: true });
const turnSchema = z
  .string()
  .regex(/^(0|[1-9][0-9]{0,15})$/)
  .transform(Number);

/** Names generated in this isolate sort after every earlier one, across Inbox instances. */
const generateName = createNameGenerator();

interface Identity {
  etag: string;
  uploaded: string;
  noticeId: string;
}

type ClaimOutcome =
  | { kind: 'claimed'; storedAs: string; content: string; postedAt: string }
  /** Left in place (unreadable, too large, or the move failed) and logged. */
  | { kind: 'skipped' }
  /** Gone before we could take it: withdrawn, or claimed by a concurrent consumer. */
  | { kind: 'taken' };

/**
 * The session inbox: one-shot notices for the model (docs/ARCHITECTURE.md, "Inbox").
 *
 * Notices live at `<keyPrefix>sessions/<id>/inbox/<name>`, posted through `post` or written
 * straight into the bucket by any R2 or S3 client. `consume` delivers them at most once, in
 * byte order of their names, by moving each into `inbox_removed/<stored_as>` before using
 * its content. Names starting with "." and keys with a further "/" are not notices and are
 * left alone.
 *
 * How a move stays at-most-once without rename or copy (the R2 binding has neither):
 * 1. `get` the notice. A body that is too large or not valid UTF-8 is skipped in place.
 * 2. Claim: a create-only `put` of the same bytes to `inbox_removed/<name>`, with metadata
 *    naming the original (its etag, upload time and, for API posts, a random notice id), the
 *    posted time, the delivery time and the turn. The create-only put is the commit point.
 *    When the key is taken, the occupant is compared with the original: the same original
 *    means another consumer already claimed this very notice, and we back off. Otherwise an
 *    earlier delivery holds the name and we try `<stem>.1<ext>`, `<stem>.2<ext>` ... (after
 *    one listing of the taken slots, checking any slot written since the notice was uploaded
 *    for a claim of it), so no earlier delivery is overwritten and no notice is claimed under
 *    two names.
 * 3. Delete the original.
 * 4. Deliver the content read in step 1, now owned by the claim.
 *
 * The content is read and checked before the claim (there is no server-side copy, so the
 * bytes are in hand anyway): an unreadable notice is never moved, and a claimed notice is
 * always deliverable. A crash, or a claim whose answer is lost, after step 2 loses the
 * notice (never delivers it twice). When step 3 fails, the notice is still delivered (it was
 * claimed) and the leftover original is recognised as claimed by every later consume; after
 * a minute a later consume deletes it. Identity is etag + upload time (+ notice id): a
 * client that rewrites the same bytes under a delivered name within the storage clock's
 * resolution (a second on S3) is taken for the delivered notice, and that rewrite is dropped.
 *
 * The cost is a list plus three operations per notice (get, put, delete). A name delivered
 * before adds a head and a list, and on S3 (listings carry no metadata) a head per slot
 * written in the last seconds.
 *
 * @example
 * const inbox = new Inbox(store, { keyPrefix: 'prod/' });
 * await inbox.post('s1', { name: '0001-budget.md', content: 'Budget left: 2 USD' });
 * const { delivered, abort } = await inbox.consume('s1', { turn: 7 });
 */
export class Inbox {
  readonly #store: ObjectStore;
  readonly #keyPrefix: string;
  readonly #clock: () => Date;
  readonly #log: (event: InboxLogEvent) => void;
  readonly #maxNoticeBytes: number;

  constructor(store: ObjectStore, options: InboxOptions = {}) {
    this.#store = store;
    this.#keyPrefix = options.keyPrefix ?? '';
    this.#clock = options.clock ?? (() => new Date());
    this.#log = options.log ?? defaultLog;
    this.#maxNoticeBytes = options.maxNoticeBytes ?? DEFAULT_MAX_NOTICE_BYTES;
  }

  /**
   * Posts a notice (the API, `POST .../inbox`). Without a name, one is generated that sorts
   * after every earlier generated name. The name `abort` is allowed: it aborts the next turn.
   * The put is create-only, so a pending notice is never overwritten.
   *
   * @throws InvalidRequestError for a bad session id or name, PayloadTooLargeError above the
   *   limit, NotFoundError for a missing session, NameTakenError when the name is pending.
   */
  async post(sessionId: string, notice: { content: string; name?: string }): Promise<PostedNotice> {
    const inboxPrefix = this.#inboxPrefix(sessionId);
    if (typeof notice?.content !== 'string') throw new InvalidRequestError('content must be a string');
    const body = toBytes(notice.content);
    if (body.length > this.#maxNoticeBytes) {
      throw new PayloadTooLargeError(`notice content has ${body.length} bytes, more than the limit of ${this.#maxNoticeBytes}`, {
        limit: this.#maxNoticeBytes,
      });
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
    await this.#requireSession(sessionId);
    const now = this.#clock();
    const postedAt = now.toISOString();
    const metadata = { [META.postedAt]: postedAt, [META.noticeId]: randomId() };
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
   * Lists pending notices sorted by name (byte order), as the API's `GET .../inbox` answers.
   * `posted_at` is the time stored by `post`, or the upload time for a notice written
   * straight into the bucket. Costs one list (per 1000 notices), plus a head per notice when
   * the store's listing carries no metadata (S3).
   *
   * @throws NotFoundError for a missing session.
   */
  async listPending(sessionId: string): Promise<PendingNotice[]> {
    const inboxPrefix = this.#inboxPrefix(sessionId);
    await this.#requireSession(sessionId);
    const notices = await this.#listNotices(inboxPrefix);
    return mapLimit(notices, CONCURRENCY, async ({ name, info }) => {
      const described = await this.#withMetadata(info);
      return { name, size: described.size, posted_at: postedAtOf(described) };
    });
  }

  /**
   * Withdraws a pending notice (the API, `DELETE .../inbox/:name`). A notice a concurrent
   * consume has already fetched may still be delivered: object stores have no conditional
   * delete.
   *
   * @throws NotFoundError when the session is missing or no such notice is pending.
   */
  async withdraw(sessionId: string, name: string): Promise<void> {
    const inboxPrefix = this.#inboxPrefix(sessionId);
    await this.#requireSession(sessionId);
    if (!isNoticeName(name) || !(await this.#store.head(inboxPrefix + name))) {
      throw new NotFoundError(`no pending notice named ${name}`, { name });
    }
    await this.#store.delete(inboxPrefix + name);
  }

  /**
   * Lists the record of deliveries (the API, `GET .../inbox/delivered`), in `stored_as` byte
   * order. Costs one list (per 1000 records), plus a head per record when the listing
   * carries no metadata (S3). An object put into `inbox_removed/` by something else is
   * listed with its upload time and `turn: null`.
   *
   * @throws NotFoundError for a missing session.
   */
  async listDelivered(sessionId: string): Promise<DeliveryRecord[]> {
    const removedPrefix = this.#removedPrefix(sessionId);
    await this.#requireSession(sessionId);
    const objects = await listAll(this.#store, removedPrefix);
    const records = objects.filter((info) => !info.key.slice(removedPrefix.length).includes('/'));
    return mapLimit(records, CONCURRENCY, async (listed) => {
      const info = await this.#withMetadata(listed);
      const storedAs = info.key.slice(removedPrefix.length);
      const uploaded = info.uploaded.toISOString();
      const turn = turnSchema.safeParse(info.metadata[META.turn]);
      return {
        name: decodeName(info.metadata[META.name]) ?? storedAs,
        stored_as: storedAs,
        posted_at: postedAtOf(info),
        delivered_at: validTime(info.metadata[META.deliveredAt]) ?? uploaded,
        turn: turn.success ? turn.data : null,
      };
    });
  }

  /**
   * Consumes the pending notices for one real inference: moves each into `inbox_removed/`
   * (see the class comment), then returns its content, in byte order of names. At the
   * reserved notice `abort` (exact, case-sensitive) it stops: the notices before it are
   * delivered, `abort` itself is consumed once and its trimmed content is the reason (blank:
   * `aborted by inbox notice abort`), and the notices after it stay for the next turn.
   *
   * Never throws for storage trouble: a notice that cannot be read (too large, not UTF-8) or
   * moved is skipped in place and logged, and the rest are delivered. An `abort` that cannot
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
    let notices: ListedNotice[];
    try {
      notices = await this.#listNotices(inboxPrefix);
      if (options.since !== undefined) notices = await this.#dropStale(notices, Date.parse(options.since) - CLOCK_TOLERANCE_MS);
      if (notices.length === 0) return { delivered: [] };
      if (!options.sessionExists && !(await this.#store.head(sessionConfigKey(this.#keyPrefix, sessionId)))) {
        return { delivered: [] };
      }
    } catch (error) {
      this.#log({ level: 'warn', message: 'inbox not consumed: listing failed', key: inboxPrefix, error });
      return { delivered: [] };
    }
    const deliveredAt = this.#clock().toISOString();
    const context = { removedPrefix, turn: options.turn, deliveredAt };
    const abortIndex = notices.findIndex((notice) => notice.name === ABORT_NOTICE_NAME);
    const delivered = await this.#deliverAll(abortIndex < 0 ? notices : notices.slice(0, abortIndex), context);
    if (abortIndex < 0) return { delivered };
    const abortNotice = notices[abortIndex]!;
    const outcome = await this.#take(abortNotice, context, true);
    if (outcome.kind === 'skipped') return { delivered };
    if (outcome.kind === 'taken') {
      // Withdrawn, or consumed by an earlier turn (which aborted): what follows is ours.
      delivered.push(...(await this.#deliverAll(notices.slice(abortIndex + 1), context)));
      return { delivered };
    }
    const reason = outcome.content.trim() || `aborted by inbox notice ${abortNotice.name}`;
    return { delivered, abort: { name: abortNotice.name, stored_as: outcome.storedAs, reason } };
  }

  async #deliverAll(notices: ListedNotice[], context: TakeContext): Promise<DeliveredNotice[]> {
    const outcomes = await mapLimit(notices, CONCURRENCY, (notice) => this.#take(notice, context, false));
    const delivered: DeliveredNotice[] = [];
    outcomes.forEach((outcome, index) => {
      if (outcome.kind !== 'claimed') return;
      delivered.push({ name: notices[index]!.name, stored_as: outcome.storedAs, content: outcome.content, posted_at: outcome.postedAt });
    });
    return delivered;
  }

  /**
   * What `consume` would deliver now, without side effects (for the prompt preview): the
   * pending notices before `abort` in name order, minus those that cannot be read. Costs one
   * list and one get per notice; never writes. A missing session shows nothing.
   */
  async peek(sessionId: string): Promise<PreviewNotice[]> {
    const inboxPrefix = this.#inboxPrefix(sessionId);
    const notices = await this.#listNotices(inboxPrefix);
    const abortIndex = notices.findIndex((notice) => notice.name === ABORT_NOTICE_NAME);
    const shown = abortIndex < 0 ? notices : notices.slice(0, abortIndex);
    const contents = await mapLimit(shown, CONCURRENCY, async ({ info }) => {
      if (info.size > this.#maxNoticeBytes) return undefined;
      try {
        const object = await this.#store.get(info.key);
        if (!object || object.body.length > this.#maxNoticeBytes) return undefined;
        return decodeUtf8(object.body);
      } catch (error) {
        this.#log({ level: 'info', message: 'pending notice not previewed: unreadable', key: info.key, error });
        return undefined;
      }
    });
    const preview: PreviewNotice[] = [];
    contents.forEach((content, index) => {
      if (content !== undefined) preview.push({ name: shown[index]!.name, content });
    });
    return preview;
  }

  /**
   * Takes over, for turn `turn`, the notices turns closed by someone else consumed (for each
   * `{turn, since}`: the delivery records written for that turn after `since`, its claim
   * time), so they reach a model instead of being lost. Each record is rewritten to name
   * `turn` with If-Match, so a notice the dead turn's owner returns meanwhile (see
   * `giveBack`) is taken by one of them only. In name order; an `abort` among them is not
   * returned (it ended the turn that took it). Costs one listing of `inbox_removed/` (per
   * 1000 records), a head per recent record where listings carry no metadata (S3), and a get
   * and a put per notice found. Only turns that did not close themselves need it.
   */
  async recover(sessionId: string, lost: readonly { turn: number; since: string }[], turn: number): Promise<DeliveredNotice[]> {
    const removedPrefix = this.#removedPrefix(sessionId);
    const horizon = Math.min(...lost.map((entry) => Date.parse(entry.since))) - CLOCK_TOLERANCE_MS;
    const turns = new Map(lost.map((entry) => [entry.turn, Date.parse(entry.since) - CLOCK_TOLERANCE_MS]));
    const recent = (await listAll(this.#store, removedPrefix)).filter(
      (info) => info.uploaded.getTime() >= horizon && !info.key.slice(removedPrefix.length).includes('/'),
    );
    const found = await mapLimit(recent, CONCURRENCY, async (listed) => {
      const info = await this.#withMetadata(listed);
      const owner = turnSchema.safeParse(info.metadata[META.turn]);
      const from = owner.success ? turns.get(owner.data) : undefined;
      if (from === undefined || info.uploaded.getTime() < from) return null;
      const name = decodeName(info.metadata[META.name]) ?? info.key.slice(removedPrefix.length);
      if (name === ABORT_NOTICE_NAME) return null;
      const object = await this.#store.get(info.key);
      if (!object || object.metadata[META.turn] !== info.metadata[META.turn]) return null;
      const ours = String(turn);
      const taken = await this.#store
        .put(info.key, object.body, { ifMatch: object.etag, metadata: { ...object.metadata, [META.turn]: ours } })
        .catch(() => null);
      // Refused, or a write whose answer was lost: the record says who holds the notice now.
      if (!taken && (await this.#store.head(info.key))?.metadata[META.turn] !== ours) return null;
      return { name, stored_as: info.key.slice(removedPrefix.length), content: decodeUtf8(object.body), posted_at: postedAtOf(info) };
    });
    return found.filter((notice): notice is DeliveredNotice => notice !== null).sort((left, right) => compareBytes(left.name, right.name));
  }

  /**
   * Gives notices back to the inbox: turn `turn` consumed them but was closed by someone else
   * (its lease expired, it was cancelled) before a model's answer was stored. Each delivery
   * record still naming `turn` is rewritten with If-Match (so a later turn that took it over
   * keeps it), the notice is posted again under its name (or a generated one when the name
   * is taken), and the record is deleted. Failures are logged.
   */
  async giveBack(sessionId: string, notices: readonly { name: string; stored_as: string }[], turn: number): Promise<void> {
    const removedPrefix = this.#removedPrefix(sessionId);
    const inboxPrefix = this.#inboxPrefix(sessionId);
    await mapLimit(notices, CONCURRENCY, async ({ name, stored_as: storedAs }) => {
      const key = removedPrefix + storedAs;
      try {
        const object = await this.#store.get(key);
        if (!object || object.metadata[META.turn] !== String(turn)) return;
        const metadata = { ...object.metadata, [META.turn]: 'returned' };
        if (!(await this.#store.put(key, object.body, { ifMatch: object.etag, metadata }))) return;
        const posted = { [META.postedAt]: postedAtOf(object), [META.noticeId]: randomId() };
        if (!(await this.#store.put(inboxPrefix + name, object.body, { onlyIfAbsent: true, metadata: posted }))) {
          await this.#store.put(inboxPrefix + generateName(this.#clock()), object.body, { onlyIfAbsent: true, metadata: posted });
        }
        await this.#store.delete(key);
      } catch (error) {
        this.#log({ level: 'warn', message: `notice consumed by closed turn ${turn} not given back`, key, error });
      }
    });
  }

  /**
   * Rewrites the delivery records of notices an earlier turn consumed so that they name the
   * turn that finally carried them to a model. Two operations per notice; failures are logged.
   */
  async recordCarrier(sessionId: string, notices: readonly { stored_as: string }[], turn: number): Promise<void> {
    const removedPrefix = this.#removedPrefix(sessionId);
    await mapLimit(notices, CONCURRENCY, async ({ stored_as: storedAs }) => {
      const key = removedPrefix + storedAs;
      try {
        const object = await this.#store.get(key);
        if (!object) return;
        await this.#store.put(key, object.body, { metadata: { ...object.metadata, [META.turn]: String(turn) } });
      } catch (error) {
        this.#log({ level: 'warn', message: `delivery record not updated to name turn ${turn}`, key, error });
      }
    });
  }

  /** Moves one notice (claim, delete original) and returns its content, or why not. */
  async #take(notice: ListedNotice, context: TakeContext, isAbort: boolean): Promise<ClaimOutcome> {
    const { key } = notice.info;
    const tooLarge = () => {
      this.#log({ level: 'warn', message: `notice left in place: larger than ${this.#maxNoticeBytes} bytes`, key });
      return { kind: 'skipped' } as const;
    };
    if (notice.info.size > this.#maxNoticeBytes) return tooLarge();
    let object;
    try {
      object = await this.#store.get(key);
    } catch (error) {
      this.#log({ level: 'warn', message: 'notice left in place: read failed', key, error });
      return { kind: 'skipped' };
    }
    if (!object) return { kind: 'taken' };
    if (object.body.length > this.#maxNoticeBytes) return tooLarge();
    let content: string;
    try {
      content = decodeUtf8(object.body);
    } catch (error) {
      if (!isAbort) {
        this.#log({ level: 'warn', message: 'notice left in place: content is not valid UTF-8', key, error });
        return { kind: 'skipped' };
      }
      // An abort's content is only its reason: the intent is in the name.
      content = new TextDecoder().decode(object.body);
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
    let claim: SlotClaim;
    try {
      claim = await this.#claimSlot(context.removedPrefix, notice.name, object.body, metadata, identity, object.uploaded);
    } catch (error) {
      this.#log({ level: 'warn', message: 'notice left in place: move failed', key, error });
      return { kind: 'skipped' };
    }
    if ('claimedBy' in claim) {
      await this.#removeStaleOriginal(key, claim.claimedBy);
      return { kind: 'taken' };
    }
    try {
      await this.#store.delete(key);
    } catch (error) {
      this.#log({
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
  async #claimSlot(
    removedPrefix: string,
    name: string,
    body: Uint8Array,
    metadata: Record<string, string>,
    identity: Identity,
    uploaded: Date,
  ): Promise<SlotClaim> {
    const claim = { ...metadata, [META.claimId]: randomId() };
    const first = await this.#putClaim(removedPrefix + name, body, claim);
    if (first === 'ours') return { storedAs: name };
    if (first && sameIdentity(first, identity)) return { claimedBy: first };

    // The name was delivered before: learn which slots are taken with one listing.
    const [stem] = splitExtension(name);
    const taken = new Map<number, ObjectInfo>();
    // Every slot from 1 on starts with `<stem>.`, whether or not the name has an extension.
    for (const info of await listAll(this.#store, `${removedPrefix}${stem}.`)) {
      const slot = parseSlot(name, info.key.slice(removedPrefix.length));
      if (slot !== undefined && slot > 0) taken.set(slot, info);
    }
    // A claim of this notice was written after the notice was: only those slots can hold one.
    const horizon = uploaded.getTime() - CLOCK_TOLERANCE_MS;
    const recent = [...taken.entries()]
      .filter(([, info]) => info.uploaded.getTime() >= horizon)
      .sort(([left], [right]) => left - right);
    for (const [, listed] of recent) {
      const info = await this.#withMetadata(listed);
      if (sameIdentity(info, identity)) return { claimedBy: info };
    }
    let slot = 1;
    for (let attempt = 0; attempt < MAX_SLOT_ATTEMPTS; attempt++) {
      while (taken.has(slot)) slot += 1;
      const storedAs = slotName(name, slot);
      const occupant = await this.#putClaim(removedPrefix + storedAs, body, claim);
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
   */
  async #putClaim(key: string, body: Uint8Array, metadata: Record<string, string>): Promise<'ours' | ObjectInfo | null> {
    let failure: { error: unknown } | null = null;
    try {
      if (await this.#store.put(key, body, { onlyIfAbsent: true, metadata })) return 'ours';
    } catch (error) {
      failure = { error };
    }
    const occupant = await this.#store.head(key);
    if (occupant && occupant.metadata[META.claimId] === metadata[META.claimId]) return 'ours';
    if (failure) throw failure.error;
    return occupant;
  }

  /**
   * A claim exists for the original we just read. Normally its consumer is deleting the
   * original right now; a claim older than a minute means that consumer failed, so the
   * leftover original (claimed, hence never to be delivered) is removed here.
   */
  async #removeStaleOriginal(key: string, claim: ObjectInfo): Promise<void> {
    const claimedAt = Date.parse(claim.metadata[META.deliveredAt] ?? '');
    if (!Number.isFinite(claimedAt) || this.#clock().getTime() - claimedAt < STALE_CLAIM_MS) return;
    try {
      await this.#store.delete(key);
      this.#log({ level: 'info', message: `removed a notice already delivered as ${claim.key}`, key });
    } catch (error) {
      this.#log({ level: 'warn', message: 'could not remove a notice that was already delivered', key, error });
    }
  }

  /** The notices uploaded at or after `horizon`; older ones are deleted (failures logged). */
  async #dropStale(notices: ListedNotice[], horizon: number): Promise<ListedNotice[]> {
    const stale = notices.filter(({ info }) => info.uploaded.getTime() < horizon);
    if (stale.length === 0) return notices;
    try {
      await this.#store.delete(stale.map(({ info }) => info.key));
      this.#log({ level: 'info', message: `removed ${stale.length} notices older than the session` });
    } catch (error) {
      this.#log({ level: 'warn', message: 'could not remove notices older than the session', error });
    }
    return notices.filter(({ info }) => info.uploaded.getTime() >= horizon);
  }

  /** Returns listed info with metadata, heading the object when the listing carried none. */
  async #withMetadata(info: ObjectInfo): Promise<ObjectInfo> {
    if (Object.keys(info.metadata).length > 0) return info;
    return (await this.#store.head(info.key)) ?? info;
  }

  async #listNotices(inboxPrefix: string): Promise<ListedNotice[]> {
    const objects = await listAll(this.#store, inboxPrefix);
    return objects
      .map((info) => ({ name: info.key.slice(inboxPrefix.length), info }))
      .filter(({ name }) => isNoticeName(name))
      .sort((left, right) => compareBytes(left.name, right.name));
  }

  async #requireSession(sessionId: string): Promise<void> {
    if (!(await this.#store.head(sessionConfigKey(this.#keyPrefix, sessionId)))) {
      throw new NotFoundError(`session ${sessionId} does not exist`, { session_id: sessionId });
    }
  }

  #inboxPrefix(sessionId: string): string {
    return `${sessionPrefix(this.#keyPrefix, sessionId)}inbox/`;
  }

  #removedPrefix(sessionId: string): string {
    return `${sessionPrefix(this.#keyPrefix, sessionId)}inbox_removed/`;
  }
}

interface TakeContext {
  removedPrefix: string;
  turn: number;
  deliveredAt: string;
}

interface ListedNotice {
  name: string;
  info: ObjectInfo;
}

type SlotClaim = { storedAs: string } | { claimedBy: ObjectInfo };

function sameIdentity(claim: ObjectInfo, identity: Identity): boolean {
  return (
    claim.metadata[META.sourceEtag] === identity.etag &&
    claim.metadata[META.sourceUploaded] === identity.uploaded &&
    (claim.metadata[META.noticeId] ?? '') === identity.noticeId
  );
}

/** Etags without quotes or a weak marker: a metadata value need not keep them intact. */
function plainEtag(etag: string): string {
  return etag.replace(/^W\//, '').replaceAll('"', '');
}

function postedAtOf(info: ObjectInfo): string {
  return validTime(info.metadata[META.postedAt]) ?? info.uploaded.toISOString();
}

function validTime(value: string | undefined): string | undefined {
  return value !== undefined && isoTimeSchema.safeParse(value).success ? value : undefined;
}

function decodeName(value: string | undefined): string | undefined {
  if (value === undefined || value === '') return undefined;
  try {
    return decodeURIComponent(value);
  } catch {
    return undefined;
  }
}

async function listAll(store: ObjectStore, prefix: string): Promise<ObjectInfo[]> {
  const objects: ObjectInfo[] = [];
  let cursor: string | undefined;
  do {
    const page = await store.list(prefix, cursor === undefined ? {} : { cursor });
    objects.push(...page.objects);
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor !== undefined);
  return objects;
}

/** Maps with at most `limit` calls in flight, keeping the input order in the result. */
async function mapLimit<T, R>(items: readonly T[], limit: number, map: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await map(items[index]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

function randomId(): string {
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('');
}

function defaultLog(event: InboxLogEvent): void {
  if (event.level === 'warn') console.warn(`inbox: ${event.message}`, event.key ?? '', event.error ?? '');
}
