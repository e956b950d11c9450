import { CorruptObjectError } from '../errors.ts';
import type { Item } from '../items.ts';
import type { ObjectStore } from '../store/object-store.ts';
import { DEFAULTS } from '../defaults.ts';
import { type AttachmentLimits, checkAttachments, contentOf, hasInlineMedia, storeAttachments } from './attachments.ts';
import { mediaParts } from '../content.ts';
import { mapLimit } from '../store/object-store.ts';
import { PARALLEL_GETS } from './log/context.ts';
import { blobKey, type LogScope } from './keys.ts';
import {
  createSession,
  deleteSession,
  getSession,
  revokeTokens,
  sessionConfig,
  sessionExists,
  sessionScope,
  tokenBinding,
  updateSession,
} from './log/config-object.ts';
import { getSessionWithNewestTurn } from './log/newest-turn.ts';
import { logContext, type LogContext } from './log/context.ts';
import { exportSession } from './log/export.ts';
import { forkSession, type ForkOptions } from './log/fork.ts';
import { listForks, type ForkRow } from './log/children.ts';
import { importSession, type ImportOptions } from './log/import.ts';
import { deleteNewestTurn, type RewindOptions } from './log/rewind.ts';
import type { ExportHeader } from './export-format.ts';
import { payloadKey } from './log/item-pages.ts';
import type { NewSession, SessionLogOptions, SessionRecord } from './log/types.ts';
import type { SessionConfig, Undelivered } from './records.ts';
import { readHead, undeliveredOf } from './log/head.ts';
import { listSessions, type SessionRow } from './log/listing.ts';
import { refreshIndex, type IndexState } from './log/session-index.ts';
import { sweepExpired, type SweepResult } from './log/retention.ts';

/**
 * What a session log does with whole sessions (lib/session/session-log.ts extends it with the
 * turn path): create, fork, read, change, delete, list, export and import, retention, token
 * generations, attachments. One LogContext (store, key prefix, clock, caches) serves both.
 */
export class SessionLogBase {
  protected readonly log: LogContext;
  protected readonly limits: AttachmentLimits;

  constructor(store: ObjectStore, options: SessionLogOptions) {
    this.log = logContext(store, options);
    this.limits = options.attachmentLimits ?? {
      maxImageBytes: DEFAULTS.maxImageBytes,
      maxFileBytes: DEFAULTS.maxFileBytes,
    };
  }

  /**
   * Stores the `data:` images and `file_data` files of `items` as blobs of the session's
   * current generation (lib/session/attachments.ts) and returns the items with references in
   * their place, before they are appended or claimed. A part refused (size, media type) throws
   * a 4xx and nothing is stored. Items without such payloads cost no storage call.
   */
  async storeAttachments(id: string, items: Item[]): Promise<Item[]> {
    if (!hasInlineMedia(items)) return items;
    const scope = await this.scope(id);
    return storeAttachments(this.log.store, items, this.limits, (sha256) => blobKey(scope, sha256));
  }

  /**
   * {@link storeAttachments} for a turn, whose claim may still refuse it (a spent budget stores
   * nothing): the items checked now (a refused part named by its place in the turn's `input`,
   * `input[1].output[0]`), with references in place of their payloads, and `store`,
   * which writes the blobs under the `scope` the claim read, after its checks (no storage call
   * when there are none), and `bytesOf`, each payload's decoded bytes by its SHA-256.
   */
  checkAttachments(items: Item[]): {
    items: Item[];
    /** Writes the payloads under `scope`; undefined when the items carry none. */
    store: ((scope: LogScope) => Promise<void>) | undefined;
    bytesOf: (sha256: string) => Uint8Array | undefined;
  } {
    if (!hasInlineMedia(items)) return { items, store: undefined, bytesOf: () => undefined };
    const checked = checkAttachments(items, this.limits, (index) => `input[${index}]`);
    return {
      items: checked.items,
      store: (scope) => checked.store(this.log.store, (sha256) => blobKey(scope, sha256)),
      bytesOf: checked.bytesOf,
    };
  }

  /**
   * Copies the blobs `items` reference from generation `from` into the session's current one
   * (create-only; none when they are the same): the images and files of a queued input stored
   * under a generation a delete of the newest turn left, before it is taken up in the next.
   */
  async copyBlobs(id: string, from: string, items: readonly Item[]): Promise<void> {
    const blobs = new Set(items.flatMap((item) => mediaParts(contentOf(item)).flatMap((part) => part.blob ?? [])));
    if (blobs.size === 0) return;
    const scope = await this.scope(id);
    if (scope.generation === from) return;
    await mapLimit([...blobs], PARALLEL_GETS, async (sha256) => {
      const to = blobKey(scope, sha256);
      if (await this.log.store.head(to)) return;
      const object = await this.log.store.get(blobKey({ ...scope, generation: from }, sha256));
      if (object) await this.log.store.put(to, object.body, { onlyIfAbsent: true });
    });
  }

  /** The bytes of blob `sha256` of the session's current generation, or null when there is none. */
  async readBlob(id: string, sha256: string): Promise<Uint8Array | null> {
    const scope = await this.scope(id);
    return (await this.log.store.get(await payloadKey(this.log, scope, sha256)))?.body ?? null;
  }

  /**
   * Creates a session (create-only put of its config). An existing id: SessionExistsError.
   * `requestHash`: the SHA-256 of the keyed request creating it, kept as the config's `request_sha256`.
   */
  async create(input: NewSession, requestHash?: string): Promise<SessionRecord> {
    return createSession(this.log, input, requestHash);
  }

  /**
   * A copy-on-write fork (log/fork.ts): a new session whose history is this one's up to a
   * turn or a seq, read from this session's objects, none of them copied.
   */
  async fork(id: string, options: ForkOptions): Promise<SessionRecord> {
    return forkSession(this.log, id, options);
  }

  /** GET /v1/sessions/{id}/forks: a page of its live forks (log/children.ts). A missing session: NotFoundError. */
  async listForks(
    id: string,
    options: { limit: number; after?: string; idPrefix?: string },
  ): Promise<{ forks: ForkRow[]; has_more: boolean; next_after: string | null }> {
    return listForks(this.log, id, options);
  }

  /**
   * Deletes the session's newest turn (log/rewind.ts): the session goes back to the record
   * before it, as a fork of itself there; its id, config and usage totals stay. A turn that is
   * not the newest, still running, or whose previous record is packed: DeleteRefusedError; a
   * turn the session does not have: NotFoundError.
   */
  async deleteTurn(id: string, turn: number, options?: RewindOptions): Promise<SessionRecord> {
    return deleteNewestTurn(this.log, id, turn, options);
  }

  /** The session with its counts. A missing session: NotFoundError. */
  async get(id: string): Promise<SessionRecord> {
    return readAgainIfGone(() => getSession(this.log, id));
  }

  /**
   * The session as `get` reads it (the same reads), and its newest record's model turn when that
   * record is one (NewestTurn: its number, status, output's seqs and calls), or the one behind
   * the fence of a delete cut short whose lease ran out (log/fence.ts behindLapsedFence, two gets
   * more); and where its current incarnation keeps its objects (`scope`).
   */
  async getWithNewestTurn(id: string): ReturnType<typeof getSessionWithNewestTurn> {
    return readAgainIfGone(() => getSessionWithNewestTurn(this.log, id));
  }

  /**
   * The turns closed by someone else (a lapsed lease, a cancel) whose notices the next turn takes
   * over: the `undelivered.lost_turns` of the session's newest object (its head, as `get` reads it).
   */
  async lostTurns(id: string): Promise<Undelivered['lost_turns']> {
    return readAgainIfGone(async () => undeliveredOf((await readHead(this.log, id)).newest).lost_turns);
  }

  /** The session's config object alone (one get): its settings, without the log's counts. */
  async config(id: string): Promise<SessionConfig> {
    return sessionConfig(this.log, id);
  }

  /** Where the session's current incarnation keeps its objects (reads the config). */
  async scope(id: string): Promise<LogScope> {
    return sessionScope(this.log, id);
  }

  /**
   * Whether the incarnation a turn was claimed in still exists (the id was not deleted, nor
   * deleted and created again). One get of the config.
   */
  async exists(scope: LogScope): Promise<boolean> {
    return sessionExists(this.log, scope);
  }

  /**
   * Changes config fields (PATCH). A conditional put (If-Match on the etag read), retried
   * when another update won in between, so no concurrent change is lost. `check` throws to refuse
   * the config it would write (each attempt's), nothing written.
   */
  async update(
    id: string,
    patch: Omit<NewSession, 'id'>,
    check?: (config: SessionConfig) => void,
  ): Promise<SessionRecord> {
    return updateSession(this.log, id, patch, check);
  }

  /**
   * Deletes a session. An open turn is closed first (`session_deleted`), so its owner's
   * completion is refused and answered 404 (that completion stays behind as the fence, until
   * the refused owner removes it: see `liftFence` in log/claim.ts). The
   * config goes next: from then on the id is free, and every object of the deleted
   * incarnation is under a generation no config names, so a turn or a packer still running
   * writes only where nobody reads. Then everything under the session's prefix that no
   * current config names is deleted, page by page (the inbox too, unless the id was created
   * again meanwhile). An interrupted sweep leaves unreachable objects, which the next delete
   * of the same id removes (a delete answered 404 sweeps too). A manual compaction of it
   * running in this process is then stopped (`onDeleted`, log/config-object.ts deleteSession).
   */
  async delete(id: string): Promise<void> {
    await deleteSession(this.log, id);
  }

  /**
   * A page of sessions, newest created first: one listing of the session index (log/listing.ts).
   * Duplicate entries it meets are removed through `background`.
   */
  async listSessions(options: {
    after?: string;
    limit: number;
    counts?: boolean;
    background?: (task: Promise<unknown>) => void;
  }): Promise<{ sessions: SessionRow[]; has_more: boolean; next_after: string | null }> {
    return listSessions(this.log, options);
  }

  /**
   * Writes the session's index entry (its listing row) from its config and newest record (as
   * read now, with the totals a read of the session shows, or `known`: what an append just
   * wrote), and removes the entry it replaces. Call it after a turn or an append, and once a
   * stopped turn's spend or a charge was stored, in the background. Gives the config the entry
   * was written from (null: the id names no session).
   */
  async refreshIndex(id: string, known?: IndexState): Promise<SessionConfig | null> {
    return refreshIndex(this.log, id, known);
  }

  /**
   * The export of a session as of its newest record (lib/session/export-format.ts): its header
   * now, and the lines (header, items oldest first, compaction) read one segment at a time as
   * they are consumed. The delivered-notice records are the inbox's (lib/inbox/transfer.ts).
   * A missing session: NotFoundError.
   */
  async export(id: string): Promise<{ header: ExportHeader; lines: AsyncGenerator<string> }> {
    return exportSession(this.log, id);
  }

  /**
   * Creates a session from an export, written as packed segments under a new generation and
   * made visible by its config, created last (log/import.ts). A bad line: a 4xx naming it,
   * with nothing stored; an id taken: SessionExistsError.
   */
  async import(options: Omit<ImportOptions, 'attachmentLimits'>): Promise<SessionRecord> {
    return importSession(this.log, { ...options, attachmentLimits: this.limits });
  }

  /**
   * Deletes the sessions idle longer than their `expires_after_days` or `sessionTtlDays`
   * (log/retention.ts): a walk of the session index, a head read per expired entry, and the
   * ordinary delete. At most `maxDeletes` (default 100) a run.
   */
  async sweepExpired(options: { maxDeletes?: number } = {}): Promise<SweepResult> {
    return sweepExpired(this.log, options);
  }

  /**
   * What a token bound to the session names: its token generation (0 until tokens are first
   * revoked) and its incarnation (records.ts `incarnation`); one config read.
   */
  async tokenBinding(id: string): Promise<{ generation: number; incarnation: string }> {
    return tokenBinding(this.log, id);
  }

  /**
   * Revokes the session's scoped tokens: bumps `token_generation` in its config with a
   * conditional put (If-Match on the etag read), retried when another update won in between.
   * Returns the new generation; tokens minted before it are refused from then on.
   */
  async revokeTokens(id: string): Promise<number> {
    return revokeTokens(this.log, id);
  }
}

/**
 * Runs a read once more when it found the log inconsistent: a delete sweeping the session
 * meanwhile looks like that, and the second read then finds no session (404). A log that is
 * really corrupt fails again (500).
 */
export async function readAgainIfGone<Result>(read: () => Promise<Result>): Promise<Result> {
  try {
    return await read();
  } catch (error) {
    if (!(error instanceof CorruptObjectError)) throw error;
    return read();
  }
}
