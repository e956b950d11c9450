import { sha256Hex } from '../hash.ts';
import { firstToCreate } from '../store/create-only.ts';
import { decodeUtf8, type StoredObject } from '../store/object-store.ts';
import type { InboxContext } from './move.ts';

/**
 * The chain of create-only decision keys beside a delivery record (`inbox_removed/<stored_as>/taken-...`)
 * that says which turn, or run of a turn, has a notice taken over (lib/inbox/carry.ts; docs/STORAGE.md, "Notices").
 */

/**
 * The decision key (after `<key>/`) this `taker` created, beginning at `decision`, and whether
 * a run of its turn confirmed its hold on the chain before it (`heldBefore`); undefined when
 * another has the notice. Keys are created create-only, and only the first to create one
 * goes on: if-match rewrites of the record alone do not decide who has it, since S3 and R2 give
 * an object the etag of its body (its MD5), and a rewrite of a record's metadata keeps its
 * body, so every rewrite would land and the notice reach a model twice. A key's body names its
 * taker (`<turn>:<random>`, or `<turn>:<runner>:<random>` for a background turn's run;
 * `returned:<random>`, a give-back, ends the chain); a refused create
 * (or one whose answer was lost) reads it. When it names a turn the caller knows was closed by
 * someone else (among `lost`), the chain goes on at `<key>-after-<that turn>`: the key that
 * turn confirms its hold through once its rewrite landed (lib/inbox/carry.ts `takeOver`), or a successor
 * takes the notice over through when that turn died or stalled before; found confirmed, the
 * key after it again is where a successor and that turn's give-back decide who has it. A key a
 * give-back created (`givenBack`: the key) ends the chain: the notice goes back to the inbox, by
 * that give-back or, when it died before it was done, by whoever finds it (lib/inbox/give-back.ts).
 */
export async function decide(
  ctx: InboxContext,
  key: string,
  decision: string,
  taker: { turn: string; runner: string | undefined },
  lost: ReadonlySet<string>,
): Promise<{ decision: string; heldBefore: boolean } | { givenBack: string } | undefined> {
  // The creators of the last two keys found taken: a run's decision and its confirmation are
  // two keys in a row, so when both are one run of this turn, that run has the notice.
  let last: Creator | undefined;
  let before: Creator | undefined;
  for (;;) {
    const decided = await firstToCreate(ctx.store, `${key}/${decision}`, keyName(taker));
    if (decided.first) return { decision, heldBefore: heldBy(taker.turn, last, before) };
    const holder = takerOf(decided.found);
    if (holder === RETURNED) return { givenBack: decision };
    if (holder === undefined || !lost.has(holder)) return undefined;
    [before, last] = [last, { turn: holder, runner: runnerOf(decided.found) }];
    decision = after(decision, holder);
  }
}

/**
 * Where the chain at `<key>/<decision>` stands for a taker starting now, read only (the prompt
 * preview; `decide` creates the keys): `open` when the first key not yet created is its to take,
 * `givenBack` when a give-back's key ends the chain (the notice goes back to the inbox), undefined
 * when a taker not among `lost` holds it. A get per key walked. The prompt preview and the
 * delivered listing (lib/inbox/pages.ts) both tell by it.
 */
export async function peekDecision(
  ctx: Pick<InboxContext, 'store'>,
  key: string,
  decision: string,
  lost: ReadonlySet<string>,
): Promise<'open' | 'givenBack' | undefined> {
  for (;;) {
    const found = await ctx.store.get(`${key}/${decision}`);
    if (!found) return 'open';
    const holder = takerOf(found);
    if (holder === RETURNED) return 'givenBack';
    if (holder === undefined || !lost.has(holder)) return undefined;
    decision = after(decision, holder);
  }
}

/** The taker a give-back's decision key names (`returned:<random>`): the chain ends there. */
export const RETURNED = 'returned';

/** Who created a decision key: its taker's turn and, when it wrote one, its run's random `writer`. */
type Creator = { turn: string; runner: string | undefined };

/**
 * Whether a run of turn `ours` confirmed its hold on the key (`last`) right before the one a
 * successor created: the key before it (`before`) is that run's too. A key that names no run
 * (older code wrote it) may be a confirmation: held.
 */
function heldBy(ours: string, last: Creator | undefined, before: Creator | undefined): boolean {
  if (last?.turn !== ours) return false;
  return last.runner === undefined || (before?.turn === ours && before.runner === last.runner);
}

/** The name a decision key's body starts with: `<turn>`, or `<turn>:<runner>` for a run of a background turn. */
export function keyName(taker: { turn: string; runner: string | undefined }): string {
  return taker.runner === undefined ? taker.turn : `${taker.turn}:${taker.runner}`;
}

/** The longest decision key (after `<record key>/`) a chain spells out; S3 allows keys of 1024 bytes. */
const MAX_DECISION_CHARS = 256;

/**
 * The decision key after `decision` once `holder` is walked past: `<decision>-after-<holder>`,
 * or, when that is longer than MAX_DECISION_CHARS, `taken-<its SHA-256>`, so the chain's keys
 * stay short however many turns failed on it.
 */
export function after(decision: string, holder: string): string {
  const next = `${decision}-after-${holder}`;
  return next.length <= MAX_DECISION_CHARS ? next : `taken-${sha256Hex(next)}`;
}

/** Who created a decision key (its body `<taker>:<random>`), or undefined when it is gone. */
export function takerOf(found: StoredObject | null): string | undefined {
  return found ? decodeUtf8(found.body).split(':')[0] : undefined;
}

/** The run that created a decision key (its body `<turn>:<runner>:<random>`), if it names one. */
function runnerOf(found: StoredObject | null): string | undefined {
  const parts = found ? decodeUtf8(found.body).split(':') : [];
  return parts.length === 3 ? parts[1] : undefined;
}
