import { z } from 'zod';
import { parseStoredOrUndefined } from '../session/records.ts';
import { holderOf } from '../session/log/rewind.ts';
import { withdrawDead } from './dead-turn.ts';
import { NotFoundError } from '../errors.ts';
import type { ClientItem, Item } from '../items.ts';
import type { SessionRecord } from '../session/fields.ts';
import type { Facade, IndexFacade } from './facade.ts';
import type { PreparedRequest } from './request.ts';
import { retriedSince, type RetriedSteps } from './failed-steps.ts';
import { asStored, canonical } from './history-items.ts';
import { isOutput } from './sessions.ts';

/**
 * A client's tool loop is one conversation. Clients that resend the whole history on every
 * step, without `previous_response_id` (the AI SDK's `generateText` with tools,
 * `@openai/agents`), send an input that begins with a stored conversation's whole history, up
 * to and including its newest response's output. When a response ends, its conversation's
 * history (what its input held, and the output) is indexed under a keyed hash of it:
 * `<keyPrefix>openai/history/<HMAC-SHA256 hex>` holding `{session_id, created_at, generation,
 * turn}`. A request with neither `previous_response_id` nor `conversation` looks up the hash
 * of its input up to its last model output (one get); a match continues that session when it
 * is still there (same incarnation, and the history's last item still of the generation that
 * wrote it: no delete of that turn since) and that turn is still its newest, and the caller may
 * use it. An input that edits the
 * history hashes differently and starts a new conversation. A client that drops everything
 * before a compaction item (OpenAI's advice) sends that item first: its history is what follows
 * it, and right after the compaction the empty history, or the items the compaction kept (what
 * its conversation lists after the compaction item), both indexed when the compaction ended
 * (lib/openai/compaction-index.ts) in the compaction's own scope; kept items after the last
 * model output are named by the entry before them (`kept_after`), and the resend holds them next.
 *
 * The hash covers the request fields a loop sends the same on every step, which tell callers
 * apart (the loop's scope: see loopScope), besides the history. Two conversations that reach
 * the same history in the same scope share a key: the second writer finds it held by a
 * conversation a resend would still continue, and marks it shared (`{shared: true}`), which
 * matches nothing, so neither caller's resend can land in the other's conversation.
 *
 * The key is TOKEN_SIGNING_KEY (else a fixed one, never API_TOKEN: see historyKey): with it,
 * whoever lists the bucket cannot tell which history an entry stands for. Changing the key
 * starts new conversations for the loops that were running. Entries of a deleted session stay
 * until overwritten; a match checks them.
 */

const historyEntrySchema = z
  .object({
    session_id: z.string(),
    created_at: z.string(),
    /**
     * The session's generation when the turn ended. A delete of the newest turn moves the session
     * to a new one, and the next turn takes the deleted one's number: an entry of another
     * generation names a history the session no longer has (absent in entries written before).
     */
    generation: z.string().optional(),
    turn: z.number().int().positive(),
    /**
     * The session's items once the turn ended (its last output's seq): items appended since
     * (POST .../items, a conversation's items.create) are a history the input does not hold
     * (absent in entries written before).
     */
    items: z.number().int().positive().optional(),
    /**
     * A compaction's entry (lib/openai/compaction-index.ts) whose kept items go on after this
     * history with items that are no model output (appended after its last response): how many,
     * and their keyed hash. A resend continues only with them next (its history then ends there).
     */
    kept_after: z.object({ items: z.number().int().positive(), hash: z.string() }).strict().optional(),
  })
  .strict();
export type HistoryEntry = z.infer<typeof historyEntrySchema>;

/** A key two live conversations reached: it matches neither (nor any later one). */
const sharedEntrySchema = z.object({ shared: z.literal(true) }).strict();
const indexEntrySchema = z.union([historyEntrySchema, sharedEntrySchema]);

/** A stored conversation the input continues: its session, and how many input items it already holds. */
export interface HistoryMatch {
  session: SessionRecord;
  turn: number;
  /** Input items that are the stored history; the rest are new. */
  known: number;
  /** The seq of the history's last item (undefined for entries written before they named it). */
  lastSeq?: number;
  /**
   * Input items after the history that a failed attempt of this step stored, answering calls:
   * not stored again (lib/openai/failed-steps.ts, RetriedSteps.taken).
   */
  taken?: number;
  key: string;
  /** `turn` refused this very input for good (an `abort` notice, a cancel): the resend is its retry. */
  refused?: true;
}

const encoder = new TextEncoder();

/**
 * What a client's loop sends the same on every step and tells callers apart, as part of the
 * history's key: the caller (a budgeted token's id), `metadata`, `user`, `safety_identifier` and
 * `prompt_cache_key`. A request whose fields differ from the step before starts a new
 * conversation. Not the instructions: an agent handing off to another sends the other's in the
 * same loop (and the conversation takes them, as any request's).
 */
export function loopScope(facade: Facade, prepared: PreparedRequest): string {
  const { body } = prepared;
  const metadata = Object.entries(body.metadata ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const fields = [
    facade.caller ?? '',
    metadata,
    body.user ?? null,
    body.safety_identifier ?? null,
    body.prompt_cache_key ?? null,
  ];
  // A loop that dropped what came before a compaction item: its history is what follows that item.
  const { anchor } = prepared;
  return JSON.stringify(anchor ? [...fields, [anchor.id, anchor.summary]] : fields);
}

/**
 * The keyed hash of the items a compaction kept after the history an entry of its scope `start`
 * names (HistoryEntry.kept_after), as stored; '' when a part is not one the service stores.
 */
export async function keptHash(facade: IndexFacade, start: string, items: readonly ClientItem[]): Promise<string> {
  const stored = asStored(facade, items);
  return stored ? historyDigest(facade, JSON.stringify([start, 'kept after']), stored) : '';
}

/** The key of the entry of `items` in `scope`: their keyed hash (historyDigest) under `openai/history/`. */
export async function historyKey(facade: IndexFacade, scope: string, items: readonly Item[]): Promise<string> {
  return `${facade.config.keyPrefix}openai/history/${await historyDigest(facade, scope, items)}`;
}

/**
 * The keyed hash of `items` in `scope` (hex): this index's keys, and the messages of a chat
 * completion an abort refused (lib/openai/aborted-retry.ts).
 */
export async function historyDigest(facade: IndexFacade, scope: string, items: readonly Item[]): Promise<string> {
  // Never API_TOKEN: a bucket reader knows the histories an entry may stand for, so an entry
  // keyed with it would let them test guesses of it offline. Without TOKEN_SIGNING_KEY a fixed
  // key stands in (Web Crypto refuses an empty HMAC key on Workers).
  const secret = facade.config.tokenSigningKey ?? 'tailgate: no signing key configured';
  const key = await crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, [
    'sign',
  ]);
  const message = `tailgate openai history\n${scope}\n${JSON.stringify(items.map(canonical))}`;
  const digest = new Uint8Array(await crypto.subtle.sign('HMAC', key, encoder.encode(message)));
  return Array.from(digest, (byte) => byte.toString(16).padStart(2, '0')).join('');
}

/**
 * The stored conversation `items` continue, if any: the items up to the last model output, or up
 * to the last compaction item sent back (`compactedAt` items before it: a compaction item is
 * the end of a response's output), with at least one item after them, are looked up in the
 * loop's `scope` (one get, and the
 * session's config, which the turn reads anyway). An input that starts from a compaction item
 * and holds no output after it is looked up as the empty history in `start`, the scope of
 * that compaction (lib/openai/compaction-index.ts); one that holds an output after it, and
 * no other compaction item, is looked up in `start` too when the loop's scope has no entry for
 * it (a second get): the items the compaction kept, as stored. Undefined when nothing matches, the key is
 * shared, or the caller may not use the match.
 * A `keyed` request (Idempotency-Key) matches a conversation that has moved on too: its turn
 * must follow the matched one, which the claim judges after replaying a repeated key, so a
 * retried step is answered with its stored response.
 */
export async function findHistory(
  facade: Facade,
  scope: string,
  items: readonly ClientItem[],
  keyed: boolean,
  compactedAt = 0,
  start?: string,
): Promise<HistoryMatch | undefined> {
  let known = Math.max(items.findLastIndex(isOutput) + 1, compactedAt);
  if ((known === 0 && start === undefined) || known === items.length) return undefined;
  const history = items.slice(0, known);
  const { store } = facade.services;
  let key = await historyKey(facade, known === 0 ? start! : scope, history);
  let stored = await store.get(key);
  // No step went on from the compaction item yet: the items after it may be those the compaction
  // kept, indexed as stored (an image or file sent inline is a blob reference there).
  const kept = !stored && known > 0 && start !== undefined && compactedAt === 0 ? asStored(facade, history) : undefined;
  if (kept) {
    key = await historyKey(facade, start!, kept);
    stored = await store.get(key);
  }
  const entry = stored ? parsedEntry(stored.body) : undefined;
  if (!entry || 'shared' in entry) return undefined;
  if (entry.kept_after) {
    const next = items.slice(known, known + entry.kept_after.items);
    const same =
      next.length === entry.kept_after.items && (await keptHash(facade, start!, next)) === entry.kept_after.hash;
    // Held with nothing new after them: no step, as a resend of a whole history. Not held: only the
    // compaction item alone continues (the new items go after them).
    if (same && known + next.length === items.length) return undefined;
    if (same) known += next.length;
    else if (known > 0) return undefined;
  }
  try {
    facade.authorize(entry.session_id);
  } catch {
    return undefined;
  }
  const found = await continued(facade, entry, keyed, items.slice(known), true);
  return found ? { ...found, known, key, ...(entry.items !== undefined ? { lastSeq: entry.items } : {}) } : undefined;
}

/**
 * The session `entry` names when a resend of its history continues it: the same incarnation,
 * the history's last item still of the generation that wrote it, and (unless `keyed`) the
 * entry's turn and items still its newest, but for failed turns after it (see retriedSince).
 * The turn to continue after: the entry's, or the newest failed one; `aborted` when the newest
 * is the turn an `abort` notice refused this very request (the resend is refused again). A
 * session deleted meanwhile, found gone by any of these reads (its turns' too), continues nothing.
 */
async function continued(
  facade: IndexFacade,
  entry: HistoryEntry,
  keyed: boolean,
  /** The resend's items after the history (undefined: any). */
  added: readonly ClientItem[] | undefined,
  /** Takes out a turn after the entry's that its process left dead (./dead-turn.ts). */
  withdraw = false,
): Promise<({ session: SessionRecord; turn: number } & RetriedSteps) | undefined> {
  return continuedIn(facade, entry, keyed, added, withdraw).catch((error: unknown) => {
    if (error instanceof NotFoundError) return undefined;
    throw error;
  });
}

/** continued, but a session deleted meanwhile throws NotFoundError. */
async function continuedIn(
  facade: IndexFacade,
  entry: HistoryEntry,
  keyed: boolean,
  added: readonly ClientItem[] | undefined,
  withdraw: boolean,
): Promise<({ session: SessionRecord; turn: number } & RetriedSteps) | undefined> {
  const { sessions } = facade.services;
  const [session, scope] = await Promise.all([
    sessions.get(entry.session_id),
    entry.generation === undefined ? undefined : sessions.scope(entry.session_id),
  ]);
  if (!session || session.created_at !== entry.created_at) return undefined;
  // The generation that wrote the history's last item: a delete of a newer turn kept it (a failed
  // response is taken out so), one of its own turn did not.
  if (scope && (entry.items === undefined ? scope.generation : holderOf(scope, entry.items)) !== entry.generation)
    return undefined;
  // A turn after the entry's that its dead process left (./dead-turn.ts) is taken out first.
  const dead = withdraw && session.counts.turns === entry.turn + 1 && (await withdrawDead(facade, session.id));
  if (dead) return continued(facade, entry, keyed, added, false);
  if (session.counts.turns > entry.turn && entry.items !== undefined) {
    const since = await retriedSince(facade, session, entry, added, keyed);
    if (since) return { session, turn: session.counts.turns, ...since };
  }
  if (session.counts.turns !== entry.turn && !(keyed && session.counts.turns > entry.turn)) return undefined;
  if (session.counts.turns === entry.turn && entry.items !== undefined && session.counts.items !== entry.items)
    return undefined;
  return { session, turn: entry.turn };
}

/** An index entry as stored, or undefined when it is not one (it then matches nothing). */
function parsedEntry(body: Uint8Array): HistoryEntry | { shared: true } | undefined {
  return parseStoredOrUndefined(body, indexEntrySchema);
}

/**
 * Indexes a conversation's history after its turn `turn` ended (the items of every request of
 * the loop, then the output, in the loop's `scope`), replacing the entry the request matched
 * (`replaced`; a keyed request keeps it for its retries). A key another conversation holds,
 * which a resend would still continue, is marked shared instead. Failures are logged: the
 * client's next step then starts a new conversation.
 */
export async function indexHistory(
  facade: IndexFacade,
  session: { id: string; created_at: string },
  ended: Pick<HistoryEntry, 'generation' | 'turn' | 'items'> & { scope: string },
  history: readonly ClientItem[],
  replaced: string | undefined,
  /** A compaction's kept items after `history` that are no model output (HistoryEntry.kept_after). */
  keptAfter?: HistoryEntry['kept_after'],
): Promise<void> {
  const { log } = facade.services;
  try {
    const key = await historyKey(facade, ended.scope, history);
    const { generation, turn, items } = ended;
    const entry: HistoryEntry = {
      session_id: session.id,
      created_at: session.created_at,
      generation,
      turn,
      ...(items !== undefined ? { items } : {}),
      ...(keptAfter ? { kept_after: keptAfter } : {}),
    };
    await writeEntry(facade, key, entry);
    if (replaced !== undefined && replaced !== key) await facade.services.store.delete(replaced);
  } catch (error) {
    log('tailgate: could not index a conversation history', error);
  }
}

const JSON_TYPE = { contentType: 'application/json' };

/**
 * Writes `entry` under `key`: create-only, else over what is there (if-match) when it is this
 * session's, another's that no resend continues any more, or not an entry; over another live
 * conversation's, the key is marked shared. Racing writers read again, a few times.
 */
async function writeEntry(facade: IndexFacade, key: string, entry: HistoryEntry): Promise<void> {
  const { store } = facade.services;
  if (await store.put(key, JSON.stringify(entry), { ...JSON_TYPE, onlyIfAbsent: true })) return;
  for (let attempt = 0; attempt < 4; attempt++) {
    const current = await store.get(key);
    if (!current) {
      if (await store.put(key, JSON.stringify(entry), { ...JSON_TYPE, onlyIfAbsent: true })) return;
      continue;
    }
    const held = parsedEntry(current.body);
    if (held && 'shared' in held) return;
    const ours = held?.session_id === entry.session_id && held.created_at === entry.created_at;
    const live = held !== undefined && !ours && (await continued(facade, held, false, undefined)) !== undefined;
    const body = JSON.stringify(live ? { shared: true } : entry);
    if (await store.put(key, body, { ...JSON_TYPE, ifMatch: current.etag })) return;
  }
  throw new Error(`the history index entry ${key} kept changing`);
}
