import { NotFoundError } from '../../errors.ts';
import type { ObjectInfo } from '../../store/object-store.ts';
import { sessionConfigKey, validateId } from '../keys.ts';
import { parseStored, sessionConfigSchema, type SessionConfig, type SessionCounts } from '../records.ts';
import type { LogContext } from './context.ts';
import { countsOf, ledgerOf, readHead, type Head } from './head.ts';
import { shownTotals } from './charges.ts';
import { compareEntries, disagree } from './index-rank.ts';
import { EMPTY_LEDGER, hasUsage, type Ledger } from '../../ledger/usage.ts';
import { NANO } from '../../ledger/prices.ts';

/**
 * The session index: one empty object per session whose key carries its listing row, so a
 * page of the listing is one list call (docs/STORAGE.md, "The session index").
 *
 *   `<keyPrefix>index/<inverted creation ms>-<id>/<state>`, the state being
 *   `<inverted turns>.<inverted items>.<tool calls>.<last ms>.[<days>d.][<generation>.][u<ledger>.]<metadata>`
 *
 * (13 digits of inverted creation time, 12 of each inverted count, the last activity in ms,
 * the session's own `expires_after_days` when it sets one, the config's generation, `g` for
 * none: absent in entries written before it). Once a turn completed,
 * `u<ledger>.` comes before `<metadata>`: the usage totals (lib/ledger/usage.ts) as base-36
 * integers joined by `-`, the cost in nano-dollars, each at most Number.MAX_SAFE_INTEGER.
 *
 * The inverted creation time lists the newest session first; the inverted counts list the
 * entry with the most turns (then items) first among entries of one session. `<metadata>` is
 * the base64url of the metadata's JSON, or `~` when it would make the key longer than the
 * 1,024 bytes S3 and R2 allow (the row then says `metadata_complete: false`).
 *
 * A writer puts its entry, lists the session's entries, reads the config again (a session
 * deleted or changed meanwhile keeps no stale entry of this writer, and the writer deletes no
 * other; a PATCH's `updated_at` is a change too, the last activity an entry says), then deletes
 * those it outranks and those of an older config's settings; it deletes its own when it is
 * outranked. Entries rank
 * by turns, then items, then completed turns in the totals, then the tokens and cost in them, then
 * last activity, then upload time (compareEntries). An entry written from a read of the session
 * carries the totals that read shows (log/charges.ts shownTotals: with what a stopped turn stored,
 * and the charges no record counts yet), so what lands after a turn closed counts in its row once
 * the session's entry is written again (after a stopped turn's spend or a charge is stored).
 */

const INVERT_TIME = 10_000_000_000_000;
const INVERT_COUNT = 999_999_999_999;
const MAX_KEY_BYTES = 1024;
const NO_METADATA = '~';
const positionPattern = /^(\d{13})-([A-Za-z0-9_-]{1,64})$/;
const statePattern = new RegExp(
  String.raw`^(\d{12})\.(\d{12})\.(\d{1,15})\.(\d{1,15})\.(?:(\d{1,5})d\.)?` +
    String.raw`(?:(g(?:\d{13}[0-9a-f]{8})?)\.)?(?:u([0-9a-z-]{1,200})\.)?([A-Za-z0-9_-]*|~)$`,
);
const LEDGER_FIELDS = [
  'turns',
  'input_tokens',
  'cached_input_tokens',
  'cache_write_tokens',
  'output_tokens',
  'reasoning_tokens',
  'cost_usd',
  'unpriced_turns',
] as const satisfies readonly (keyof Ledger)[];
const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/** What a session's index entry says. */
export interface IndexEntry {
  id: string;
  /** `<inverted creation ms>-<id>`: the listing's cursor. */
  position: string;
  createdMs: number;
  counts: SessionCounts;
  lastActivityMs: number;
  /** The usage totals (EMPTY_LEDGER in entries written before them). */
  ledger: Ledger;
  /** The session's own retention in idle days (null: the deployment's, SESSION_TTL_DAYS). */
  expiresAfterDays: number | null;
  /** The config's generation ('' for none; undefined: an entry written before entries named it). */
  generation?: string | undefined;
  /** null when the metadata did not fit in the key. */
  metadata: Record<string, unknown> | null;
}

/** `<keyPrefix>index/`: a listing of it gives every session's row, newest created first. */
export function indexPrefix(keyPrefix: string): string {
  return `${keyPrefix}index/`;
}

/** Where an incarnation created at `createdMs` lists: `<inverted creation ms>-<id>`. */
export function indexPosition(id: string, createdMs: number): string {
  return `${String(INVERT_TIME - createdMs).padStart(13, '0')}-${validateId(id)}`;
}

/** A cursor that is an index position (not a session id, as cursors were before the index). */
export function isIndexPosition(cursor: string): boolean {
  return positionPattern.test(cursor);
}

/** The key of a session's entry for this state. */
export function indexEntryKey(
  keyPrefix: string,
  entry: Pick<
    IndexEntry,
    'id' | 'createdMs' | 'counts' | 'lastActivityMs' | 'ledger' | 'expiresAfterDays' | 'metadata' | 'generation'
  >,
): string {
  const { counts, ledger } = entry;
  const inverted = (count: number) => String(INVERT_COUNT - Math.min(count, INVERT_COUNT)).padStart(12, '0');
  // Held to a safe integer (a cost over about 9e6 USD in nano-dollars is not one): parseLedger
  // refuses any other, and the session would not be listed.
  const integer = (field: (typeof LEDGER_FIELDS)[number]) => {
    const value = Math.round(field === 'cost_usd' ? ledger[field] * NANO : ledger[field]);
    return Math.min(value, Number.MAX_SAFE_INTEGER).toString(36);
  };
  const usage = hasUsage(ledger) ? `u${LEDGER_FIELDS.map(integer).join('-')}.` : '';
  const days = entry.expiresAfterDays === null ? '' : `${entry.expiresAfterDays}d.`;
  const generation = entry.generation === undefined ? '' : `${entry.generation || 'g'}.`;
  const counted = `${inverted(counts.turns)}.${inverted(counts.items)}.${counts.tool_calls}`;
  const state = `${counted}.${entry.lastActivityMs}.${days}${generation}${usage}`;
  const head = `${indexPrefix(keyPrefix)}${indexPosition(entry.id, entry.createdMs)}/${state}`;
  const metadata = entry.metadata === null ? NO_METADATA : base64url(JSON.stringify(entry.metadata));
  return encoder.encode(head).length + metadata.length <= MAX_KEY_BYTES ? head + metadata : head + NO_METADATA;
}

/** Parses a key listed under `indexPrefix`; null for a key the index did not write. */
export function parseIndexKey(keyPrefix: string, key: string): IndexEntry | null {
  const rest = key.slice(indexPrefix(keyPrefix).length);
  const slash = rest.indexOf('/');
  const position = positionPattern.exec(rest.slice(0, slash));
  const state = statePattern.exec(rest.slice(slash + 1));
  if (!key.startsWith(indexPrefix(keyPrefix)) || !position || !state) return null;
  let metadata: Record<string, unknown> | null = null;
  const ledger = state[7] === undefined ? EMPTY_LEDGER : parseLedger(state[7]);
  if (!ledger) return null;
  if (state[8] !== NO_METADATA) {
    try {
      const parsed: unknown = JSON.parse(decoder.decode(fromBase64url(state[8]!)));
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return null;
      metadata = parsed as Record<string, unknown>;
    } catch {
      return null;
    }
  }
  return {
    id: position[2]!,
    position: rest.slice(0, slash),
    createdMs: INVERT_TIME - Number(position[1]),
    counts: {
      turns: INVERT_COUNT - Number(state[1]),
      items: INVERT_COUNT - Number(state[2]),
      tool_calls: Number(state[3]),
    },
    lastActivityMs: Number(state[4]),
    ledger,
    expiresAfterDays: state[5] === undefined ? null : Number(state[5]),
    ...(state[6] === undefined ? {} : { generation: state[6] === 'g' ? '' : state[6] }),
    metadata,
  };
}

/** The `u` part of a state (without the `u`) as a ledger; null when it is not one. */
function parseLedger(text: string): Ledger | null {
  const numbers = text.split('-').map((part) => Number.parseInt(part, 36));
  if (numbers.length !== LEDGER_FIELDS.length || numbers.some((value) => !Number.isSafeInteger(value))) return null;
  const ledger = Object.fromEntries(LEDGER_FIELDS.map((field, index) => [field, numbers[index]!])) as Ledger;
  return { ...ledger, cost_usd: ledger.cost_usd / NANO };
}

/** The entry of a session just created: no records yet. */
export async function indexCreated(log: LogContext, config: SessionConfig): Promise<void> {
  const createdMs = Date.parse(config.created_at);
  await putEntry(
    log,
    indexEntryKey(log.keyPrefix, {
      id: config.id,
      createdMs,
      counts: { items: 0, turns: 0, tool_calls: 0 },
      lastActivityMs: createdMs,
      ledger: EMPTY_LEDGER,
      expiresAfterDays: config.expires_after_days ?? null,
      generation: config.generation ?? '',
      metadata: config.metadata,
    }),
  );
}

/**
 * Puts an entry create-only first: a state's key is almost always new, and a create takes no
 * key lock (the file store). A refusal is the same state's entry there already: it is put over
 * (its upload time is the tie-break of `compareEntries`), as an unconditional put would.
 */
async function putEntry(log: LogContext, key: string): Promise<void> {
  if ((await log.store.put(key, '', { onlyIfAbsent: true })) === null) await log.store.put(key, '');
}

/** The config and newest record an index entry is written from. */
export type IndexState = Pick<Head, 'config' | 'newest'>;

/**
 * Writes the session's entry from its config and newest record (after a turn or an append, or
 * once a stopped turn's spend or a charge was stored, in the background; a session gone
 * meanwhile is left alone): as they are now, with the totals a read of the session shows, or as
 * `known` says, the state its caller wrote (its record's totals). An entry of an older state is no
 * harm: a newer one outranks it (`compareEntries`), whenever either is written. `replacing`: see
 * writeIndexEntry. Gives the config the entry was written from (null: the id names no session).
 */
export async function refreshIndex(
  log: LogContext,
  id: string,
  known?: IndexState,
  replacing = false,
  again = false,
): Promise<SessionConfig | null> {
  let head: IndexState;
  let ledger: Ledger | undefined;
  try {
    if (known) head = known;
    else {
      const read = await readHead(log, id);
      head = read;
      ledger = await shownTotals(log, read.scope, read);
    }
  } catch (error) {
    if (error instanceof NotFoundError) return null;
    throw error;
  }
  // The config changed after the caller read it (a PATCH before its record landed, whose own
  // entry may predate that record), or an entry of one state missed what another counts (behind):
  // the entry is written again from the state as it is now (once more at most, for `behind`).
  const written = await writeIndexEntry(log, head.config, head.newest, replacing, ledger);
  if (written === false && known) return refreshIndex(log, id);
  if (written === 'behind' && !again) return refreshIndex(log, id, undefined, replacing, true);
  return head.config;
}

/**
 * Puts the entry for `config` and `newest`, then removes the entries it outranks (see above);
 * `replacing`: every other entry of the incarnation that names no generation (written before
 * entries named it), whatever its rank (a delete of the newest turn lowers the counts, and the
 * entries of the turns it took out would outrank its own; those naming the generation before are
 * deleted as any writer deletes them), or those of these keys (settleEntries). `ledger`: the
 * totals the entry says (a read's shownTotals), else the newest record's. False when the config is
 * not `config` any more (the entry was removed again); `behind` when an entry of the generation
 * listed beside it disagrees with it (index-rank.ts disagree): one missed spend the other counts.
 */
export async function writeIndexEntry(
  log: LogContext,
  config: SessionConfig,
  newest: Head['newest'],
  replacing: boolean | ReadonlySet<string> = false,
  ledger: Ledger = ledgerOf(newest),
): Promise<boolean | 'behind'> {
  const createdMs = Date.parse(config.created_at);
  const key = indexEntryKey(log.keyPrefix, {
    id: config.id,
    createdMs,
    counts: countsOf(newest),
    ledger,
    lastActivityMs: lastActivityOf(config, newest),
    expiresAfterDays: config.expires_after_days ?? null,
    generation: config.generation ?? '',
    metadata: config.metadata,
  });
  await putEntry(log, key);
  // Listed before the config is read again: an entry of a newer config (a PATCH's, or a delete
  // of the newest turn's, which moves the generation) is put only after that config landed, so
  // a writer that finds its config still current never lists one, and deletes none.
  const listed = await sessionEntries(log, config.id, createdMs);
  // Deleted, created again, given other metadata or PATCHed meanwhile: that writer's entry stands.
  const configKey = sessionConfigKey(log.keyPrefix, config.id);
  const current = await log.store.get(configKey);
  const now = current ? parseStored(configKey, current.body, sessionConfigSchema) : null;
  if (
    !now ||
    now.created_at !== config.created_at ||
    (now.generation ?? '') !== (config.generation ?? '') ||
    now.expires_after_days !== config.expires_after_days ||
    now.updated_at !== config.updated_at ||
    JSON.stringify(now.metadata) !== JSON.stringify(config.metadata)
  ) {
    await log.store.delete(key);
    return false;
  }
  const mine = listed.find((candidate) => candidate.info.key === key);
  if (!mine) return true;
  // An entry of another generation than the config read above is of one gone before it (it was
  // put after its config landed, so before that read): whatever its rank, it is stale (a refresh
  // that read the session before a delete of its newest turn, yet to find the config changed).
  const gone = (other: (typeof listed)[number]) =>
    other.entry.generation !== undefined && other.entry.generation !== (now.generation ?? '');
  // At equal rank (the same counts, written in the same ms), an entry that says other settings
  // than the config read above is the older one.
  const outdated = (other: (typeof listed)[number]) =>
    gone(other) ||
    other.entry.expiresAfterDays !== (now.expires_after_days ?? null) ||
    JSON.stringify(other.entry.metadata) !== JSON.stringify(mine.entry.metadata);
  // Replacing, an entry of this generation is ranked as any: one that outranks this one is of a
  // turn stored after the state read (a delete of the newest turn moves the generation).
  const replaced = (other: (typeof listed)[number]) =>
    replacing === true ? other.entry.generation === undefined : replacing !== false && replacing.has(other.info.key);
  // One of other settings is of an older config, whatever its rank: its writer finds it changed
  // and removes its own, and the row says the settings of the config read above.
  const stale = listed.filter(
    (other) => other !== mine && (replaced(other) || outdated(other) || compareEntries(mine, other) > 0),
  );
  // An entry of other settings than the config read above does not outrank this one: its writer
  // read an older config, finds it changed and removes its own (that writer's entry stands then).
  const outranked = listed.some(
    (other) => other !== mine && !replaced(other) && !outdated(other) && compareEntries(other, mine) > 0,
  );
  const doomed = [...stale.map((other) => other.info.key), ...(outranked ? [key] : [])];
  if (doomed.length > 0) await log.store.delete(doomed);
  // An older config's entry of this generation outranking this one counts what this writer's
  // read missed (a charge whose get failed, a record landed after it): read again.
  const missed = (other: (typeof listed)[number]) => !gone(other) && outdated(other) && compareEntries(other, mine) > 0;
  return listed.some(
    (other) => other !== mine && !replaced(other) && (disagree(mine.entry, other.entry) || missed(other)),
  )
    ? 'behind'
    : true;
}

/**
 * After a listing met several entries of one incarnation (`listed`, their keys): writes the
 * entry of the session as it is read now, then deletes every listed one but that. Each was put
 * after the state it says was stored, so before this read: none says a newer state, while the
 * one ranking first may be of a config gone since (a refresh that read the session before a
 * delete of its newest turn, yet to find it changed and delete its own). A config changed after
 * this read leaves them to that change's writer and the next listing; an incarnation deleted
 * (created again or not) has them deleted.
 */
export async function settleEntries(
  log: LogContext,
  id: string,
  createdMs: number,
  listed: readonly string[],
): Promise<void> {
  let head: Head | null;
  try {
    head = await readHead(log, id);
  } catch (error) {
    if (!(error instanceof NotFoundError)) throw error;
    head = null;
  }
  if (head && Date.parse(head.config.created_at) === createdMs)
    await writeIndexEntry(log, head.config, head.newest, new Set(listed), await shownTotals(log, head.scope, head));
  else await log.store.delete([...listed]);
}

/** When the session was last written to: its newest record or completion, a PATCH or its import, else its creation. */
export function lastActivityOf(config: SessionConfig, newest: Head['newest']): number {
  const written = Date.parse(config.updated_at ?? config.created_at);
  return newest ? Math.max(written, Date.parse(newest.done?.completed_at ?? newest.record.created_at)) : written;
}

/** Deletes every entry of one incarnation (a delete of the session). */
export async function removeIndexEntries(log: LogContext, config: SessionConfig): Promise<void> {
  const entries = await sessionEntries(log, config.id, Date.parse(config.created_at));
  if (entries.length > 0) await log.store.delete(entries.map((entry) => entry.info.key));
}

async function sessionEntries(
  log: LogContext,
  id: string,
  createdMs: number,
): Promise<{ entry: IndexEntry; info: ObjectInfo }[]> {
  const page = await log.store.list(`${indexPrefix(log.keyPrefix)}${indexPosition(id, createdMs)}/`, { limit: 1000 });
  return page.objects.flatMap((info) => {
    const entry = parseIndexKey(log.keyPrefix, info.key);
    return entry ? [{ entry, info }] : [];
  });
}

function base64url(text: string): string {
  let binary = '';
  for (const byte of encoder.encode(text)) binary += String.fromCharCode(byte);
  return btoa(binary).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '');
}

function fromBase64url(text: string): Uint8Array {
  const binary = atob(text.replaceAll('-', '+').replaceAll('_', '/'));
  return Uint8Array.from(binary, (character) => character.charCodeAt(0));
}
