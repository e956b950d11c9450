import { mapLimit } from '../../store/object-store.ts';
import { RECORD_BOUND, ancestorScope, scoped, type ForkPoint, type LogScope } from '../keys.ts';
import { MAX_NAMED_GENERATIONS, type NamedPoint } from '../fork-point.ts';
import { idempotencyClaimSchema, parseStoredOrUndefined } from '../records.ts';
import { PARALLEL_GETS, type LogContext } from './context.ts';

/**
 * Copies what the history keeps of `point`'s generation beside its records into `scope`
 * (create-only): with `turns` null (before its segments, whose views read them), every blob and
 * the summaries of compactions at records up to the point; else, for this id's generations, the
 * `idem/` claims of records up to it and the event journals of turns up to `turns` (those the
 * history holds there).
 */
export async function copyObjects(
  log: LogContext,
  scope: LogScope,
  point: ForkPoint,
  turns: number | null,
): Promise<void> {
  const from = ancestorScope(log.keyPrefix, point);
  const recordOf = (name: string) => RECORD_BOUND - Number(name);
  // Each kind copied: which names (read before the object), and which bodies (after).
  const kinds: { kind: string; name: (name: string) => boolean; body?: (body: Uint8Array) => boolean }[] = [];
  if (turns === null)
    kinds.push({ kind: 'blob', name: () => true }, { kind: 'context', name: (name) => recordOf(name) <= point.record });
  else if (point.id === scope.id)
    kinds.push(
      { kind: 'idem', name: () => true, body: (body) => claimedUpTo(body, point.record) },
      { kind: 'events', name: (name) => Number(name.slice(0, 12)) <= turns },
    );
  for (const { kind, name: wantedName, body: wantedBody } of kinds) {
    const prefix = scoped(from, kind);
    const target = scoped(scope, kind);
    let cursor: string | undefined;
    do {
      const page = await log.store.list(prefix, { limit: 1000, ...(cursor ? { cursor } : {}) });
      await mapLimit(page.objects, PARALLEL_GETS, async ({ key }) => {
        const name = key.slice(prefix.length);
        if (!wantedName(name)) return;
        const object = await log.store.get(key);
        if (object && (wantedBody?.(object.body) ?? true))
          await log.store.put(`${target}${name}`, object.body, { onlyIfAbsent: true });
      });
      cursor = page.truncated ? page.cursor : undefined;
    } while (cursor);
  }
}

/**
 * Whether an `idem/` claim names a record up to `record` (a turn or an append the history holds).
 * One that is no claim (edited, cut short) names none: it is left behind.
 */
function claimedUpTo(body: Uint8Array, record: number): boolean {
  const claim = parseStoredOrUndefined(body, idempotencyClaimSchema);
  return claim !== undefined && claim.record <= record;
}

/**
 * The names of the items up to `chain[0].seq` (see flattenHistory, log/flatten.ts). A generation of the chain
 * holding none of them (a flattened history read whole, whose ids name older ones) is named for
 * no seqs, with the next entry's: the session's forks made from it are still its own.
 */
export function namesOf(chain: readonly ForkPoint[], named: readonly NamedPoint[] | undefined): NamedPoint[] {
  const below = clipNames(named, chain[0]?.seq ?? 0);
  const top = below[0]?.seq ?? 0;
  const fresh = chain.filter((point) => point.seq > top).map(({ generation, seq }) => ({ generation, seq }));
  const listed = new Set([...fresh, ...below].map((point) => point.generation));
  const empty = chain
    .filter((point) => point.seq <= top && !listed.has(point.generation))
    .map(({ generation }) => ({ generation, seq: top }));
  return capped([...fresh, ...empty, ...below]);
}

/**
 * `named` cut to MAX_NAMED_GENERATIONS: the newest entries stay, and so does the oldest, the
 * generation the history started in (the ids of its turns name it from the first seq on, and the
 * forks made of it are the session's: children.ts); the entries just above that one go. An entry
 * names the seqs above the next one's, so the seqs of one dropped are named by the entry above it
 * instead, whose generation held none of them (its own items come after them), so that no id ever
 * named it at those seqs: the ids minted from then on do, for the same items, and those naming the
 * dropped generation are 404 (no seq names it any more), never another turn. Dropping the oldest
 * would do the same to the seqs of the history's start (test/openai/flatten-named.test.ts).
 */
function capped(named: NamedPoint[]): NamedPoint[] {
  if (named.length <= MAX_NAMED_GENERATIONS) return named;
  return [...named.slice(0, MAX_NAMED_GENERATIONS - 1), named.at(-1)!];
}

/** `named` for a history that now ends at `seq` (a delete went back to it): the entries below it. */
export function clipNames(named: readonly NamedPoint[] | undefined, seq: number): NamedPoint[] {
  const kept: NamedPoint[] = [];
  for (const [index, point] of (named ?? []).entries()) {
    const next = named![index + 1]?.seq ?? 0;
    if (next >= seq) continue;
    kept.push({ ...point, seq: Math.min(point.seq, seq) });
  }
  return kept;
}

/** Removes what a flattening wrote under `scope` (of `kinds`), which no config names (it did not commit). */
export async function sweepFlattened(
  log: LogContext,
  scope: LogScope,
  kinds: readonly string[] = ['turn', 'keys', 'tail', 'blob', 'context', 'idem', 'events'],
): Promise<void> {
  for (const kind of kinds) {
    const prefix = scoped(scope, kind);
    for (;;) {
      const page = await log.store.list(prefix, { limit: 1000 });
      if (page.objects.length > 0) await log.store.delete(page.objects.map((object) => object.key));
      if (!page.truncated) break;
    }
  }
}
