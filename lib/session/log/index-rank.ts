import type { ObjectInfo } from '../../store/object-store.ts';
import type { Ledger } from '../../ledger/usage.ts';
import type { SessionCounts } from '../records.ts';

/** What an index entry (log/session-index.ts) says that ranks it. */
interface IndexEntry {
  counts: SessionCounts;
  ledger: Ledger;
  lastActivityMs: number;
  generation?: string | undefined;
}

/** An index entry as listed. */
export type ListedEntry = { entry: IndexEntry; info: ObjectInfo };

/**
 * Positive when `a` outranks `b`: more turns, then more items, then more completed turns in the
 * totals, then more tokens, then more cost in them (at the same counts: a stopped turn's spend or a
 * charge stored after the state the other counted; the totals only grow), then a later last
 * activity (at the same counts: a completion, a PATCH or a compaction after the state the other
 * says), then uploaded later.
 */
export function compareEntries(a: ListedEntry, b: ListedEntry): number {
  return (
    countsOrder(a.entry, b.entry) ||
    spendOrder(a.entry.ledger, b.entry.ledger) ||
    a.entry.lastActivityMs - b.entry.lastActivityMs ||
    a.info.uploaded.getTime() - b.info.uploaded.getTime()
  );
}

/**
 * Whether two entries of one generation disagree: the one of more counts has less spend in its
 * totals. Along a generation's chain both only grow, so the one of more counts was written from a
 * state missing what the other counts: a record whose commit read before a stopped turn's spend
 * or a charge was stored (an append's entry is written from its record, without a read), beside
 * the entry of that spend's refresh, which read the session before that record landed. Neither
 * is the session's row: it is read again.
 */
export function disagree(a: IndexEntry, b: IndexEntry): boolean {
  if (a.generation === undefined || a.generation !== b.generation) return false;
  const counts = countsOrder(a, b);
  const spend = spendOrder(a.ledger, b.ledger);
  return (counts > 0 && spend < 0) || (counts < 0 && spend > 0);
}

/** More turns, then more items, then more completed turns in the totals. */
function countsOrder(a: IndexEntry, b: IndexEntry): number {
  return a.counts.turns - b.counts.turns || a.counts.items - b.counts.items || a.ledger.turns - b.ledger.turns;
}

/** More tokens, then more cost in the totals. */
function spendOrder(a: Ledger, b: Ledger): number {
  return tokensOf(a) - tokensOf(b) || a.cost_usd - b.cost_usd;
}

/** Every token the totals count. */
function tokensOf(ledger: Ledger): number {
  return (
    ledger.input_tokens +
    ledger.cached_input_tokens +
    ledger.cache_write_tokens +
    ledger.output_tokens +
    ledger.reasoning_tokens
  );
}
