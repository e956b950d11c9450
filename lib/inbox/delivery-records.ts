import { z } from 'zod';
import { randomHex } from '../hash.ts';
import { canonicalEtag } from '../store/etag.ts';
import type { ObjectInfo, ObjectStore, StoredObject } from '../store/object-store.ts';
import { IMPORTED_IN_META, MAX_NOTICE_NAME_BYTES, noticeTimeSchema } from '../session/export-format.ts';
import { createNameGenerator } from './notice-name.ts';
import { utf8Bytes } from '../session/item-size.ts';

/**
 * The delivery records of `inbox_removed/`: the metadata a claim carries, how a claim is told
 * to be of a given original notice, and the values read back from it.
 */

/** Metadata keys (lowercase with hyphens: S3 lowercases user metadata, R2 keeps it). */
export const META = {
  name: 'notice-name',
  postedAt: 'posted-at',
  noticeId: 'notice-id',
  deliveredAt: 'delivered-at',
  turn: 'turn',
  sourceEtag: 'source-etag',
  sourceUploaded: 'source-uploaded',
  /** Random per claim attempt: a claim whose put answer was lost is recognised as ours. */
  claimId: 'claim-id',
  /** The creation time of the session incarnation a notice was posted to (API posts). */
  sessionCreated: 'session-created',
  /** The `incarnation` of the session a notice was posted to, when its config has one. */
  sessionIncarnation: 'session-incarnation',
  /**
   * On a delivery record a turn took over from a closed turn: the decision key it took the
   * notice through (after `<record key>/`), where a turn taking it over from that turn begins.
   */
  takenAs: 'taken-as',
  /**
   * The random `writer` of the turn's run that wrote the record (its claim, or its takeover):
   * two runs of one background turn (a runner that took the lease of one that died or stalled)
   * name the same turn, and only this tells their records apart.
   */
  runner: 'runner',
  /** On a notice set aside in `inbox_unreadable/`: why it cannot be delivered (`UnreadableReason`). */
  unreadable: 'unreadable',
  /**
   * On a notice a give-back posted again: the key (after `inbox_removed/`, URI-encoded) that the
   * consume delivering it creates first, so that it is delivered once however often it was posted
   * (lib/inbox/give-back.ts).
   */
  returnedAs: 'returned-as',
  /**
   * On a delivery record an import wrote (lib/inbox/transfer.ts): the generation of the session it
   * imported, which tells its records from those of another import of the same export under the id.
   */
  importedIn: IMPORTED_IN_META,
} as const;

/**
 * Why a notice is set aside: larger than `MAX_NOTICE_BYTES`, content that is not UTF-8, or a name
 * (a direct writer's) over `MAX_NOTICE_NAME_BYTES`, which a delivery record's metadata may not fit.
 */
export type UnreadableReason = 'too_large' | 'not_utf8' | 'name_too_long';

export const turnSchema = z
  .string()
  .regex(/^(0|[1-9][0-9]{0,15})$/)
  .transform(Number);

/** Tolerance between storage timestamps when deciding which slots could hold a claim. */
export const CLOCK_TOLERANCE_MS = 5_000;

export interface Identity {
  etag: string;
  uploaded: string;
  noticeId: string;
}

export interface TakeContext {
  removedPrefix: string;
  turn: number;
  /** The random `writer` of the turn's run (META.runner). */
  runner?: string;
  deliveredAt: string;
  /** The consuming session's creation time: a notice posted to another incarnation is dropped. */
  since?: string;
  /** The consuming session's `incarnation`, where its config has one (ConsumeOptions). */
  incarnation?: string;
  /** Where a notice that can never be delivered is set aside (`inbox_unreadable/`). */
  unreadablePrefix: string;
  /** The consuming session's id (a set-aside landing after its delete goes with it). */
  sessionId: string;
}

export interface ListedNotice {
  name: string;
  info: ObjectInfo;
  /**
   * Listed larger than a consume reads (lib/inbox/listing.ts `listWindow`): never read nor
   * taken, only removed when it is older than the session.
   */
  oversized?: true;
}

export type SlotClaim = { storedAs: string } | { claimedBy: ObjectInfo };

export type ClaimOutcome =
  | { kind: 'claimed'; storedAs: string; content: string; postedAt: string }
  /** Left in place (unreadable, too large, or the move failed) and logged. */
  | { kind: 'skipped' }
  /** Gone before we could take it: withdrawn, or claimed by a concurrent consumer. */
  | { kind: 'taken' };

export function sameIdentity(claim: Pick<ObjectInfo, 'metadata'>, identity: Identity): boolean {
  return (
    canonicalEtag(claim.metadata[META.sourceEtag]) === identity.etag &&
    claim.metadata[META.sourceUploaded] === identity.uploaded &&
    (claim.metadata[META.noticeId] ?? '') === identity.noticeId
  );
}

/**
 * Whether `current`, the notice now under a name, is the original delivery record `claim`
 * moved: its identity (etag, upload time, notice id), so a notice posted again under the name,
 * even with the same bytes within the storage clock's second, is another.
 */
export function isClaimedOriginal(current: ObjectInfo, claim: Pick<ObjectInfo, 'metadata'>): boolean {
  return sameIdentity(claim, {
    etag: current.etag,
    uploaded: current.uploaded.toISOString(),
    noticeId: current.metadata[META.noticeId] ?? '',
  });
}

export function postedAtOf(info: ObjectInfo): string {
  return validTime(info.metadata[META.postedAt]) ?? info.uploaded.toISOString();
}

/** Whether a notice's name is longer than an import takes (UTF-8 bytes): it is set aside, never delivered. */
export function nameTooLong(name: string): boolean {
  return utf8Bytes(name) > MAX_NOTICE_NAME_BYTES;
}

/** A time in a notice's metadata, when one an import takes (at most 9 fractional digits): else undefined. */
export function validTime(value: string | undefined): string | undefined {
  return value !== undefined && noticeTimeSchema.safeParse(value).success ? value : undefined;
}

export function decodeName(value: string | undefined): string | undefined {
  if (value === undefined || value === '') return undefined;
  try {
    return decodeURIComponent(value);
  } catch {
    return undefined;
  }
}

export function randomId(): string {
  return randomHex(12);
}

/** Parallel storage calls per operation: a Worker has 6 simultaneous connections. */
export const CONCURRENCY = 6;

/** Names generated in this isolate sort after every earlier one, across Inbox instances. */
export const generateName = createNameGenerator();

/** Returns listed info with metadata, heading the object when the listing carried none. */
export async function withMetadata(store: ObjectStore, info: ObjectInfo): Promise<ObjectInfo> {
  if (Object.keys(info.metadata).length > 0) return info;
  return (await store.head(info.key)) ?? info;
}

/** A notice read before its move: its content, or why it is not delivered. */
export type NoticeRead =
  | { kind: 'read'; object: StoredObject; content: string }
  /** Never deliverable: the move sets it aside (`object`: its bytes, when they were read). */
  | { kind: 'unreadable'; reason: UnreadableReason; object?: StoredObject }
  | Extract<ClaimOutcome, { kind: 'skipped' | 'taken' }>;

/** A listed notice whose read has started (see `Inbox.fetch`). */
export interface FetchedNotice extends ListedNotice {
  read: Promise<NoticeRead>;
}

/**
 * The notices posted since the session was created (within the clock tolerance): older ones
 * were left by an unfinished delete of an earlier session of the id and are never delivered.
 */
export function currentNotices<Notice extends { info: { uploaded: Date } }>(
  notices: readonly Notice[],
  sessionCreatedAt: string,
): Notice[] {
  const horizon = Date.parse(sessionCreatedAt) - CLOCK_TOLERANCE_MS;
  return notices.filter(({ info }) => info.uploaded.getTime() >= horizon);
}

/** A session incarnation as `sessionExists` tells it (InboxOptions): its creation time and `incarnation`. */
type Mark = { created_at: string; incarnation?: string | undefined };

/** The incarnation `found` names (a string: its creation time), or undefined when it names none. */
export function markOf(found: boolean | string | Mark | undefined): Mark | undefined {
  if (typeof found === 'string') return { created_at: found };
  return typeof found === 'object' ? found : undefined;
}

/** The metadata by which a notice posted (or given back) to incarnation `mark` names it. */
export function markMetadata(mark: Mark | undefined): Record<string, string> {
  if (mark === undefined) return {};
  const { created_at: created, incarnation } = mark;
  return {
    [META.sessionCreated]: created,
    ...(incarnation === undefined ? {} : { [META.sessionIncarnation]: incarnation }),
  };
}

/**
 * Whether a notice's metadata names an incarnation of its id other than `session`'s: by the
 * `incarnation` both have, else by the creation time both have (an import keeps a creation time,
 * but its config's `incarnation` is its own). Naming none, it is any incarnation's.
 */
export function namesOther(
  metadata: Record<string, string>,
  session: { since?: string | undefined; incarnation?: string | undefined },
): boolean {
  const incarnation = metadata[META.sessionIncarnation];
  if (incarnation !== undefined && session.incarnation !== undefined) return incarnation !== session.incarnation;
  const created = metadata[META.sessionCreated];
  return created !== undefined && session.since !== undefined && created !== session.since;
}
