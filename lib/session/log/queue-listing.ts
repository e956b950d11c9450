import { budgetRefusal } from '../../ledger/budget.ts';
import { sessionUsage } from '../../ledger/usage.ts';
import { mapLimit } from '../../store/object-store.ts';
import { itemText } from '../../tokens/token-counter.ts';
import type { Item } from '../../items.ts';
import type { QueuedInput } from '../queued-input.ts';
import type { SessionConfig } from '../records.ts';
import { shownTotals } from './charges.ts';
import { PARALLEL_GETS, type LogContext } from './context.ts';
import { readConfig, readNewest, scopeOf } from './head.ts';
import { listQueued, readQueued, type QueuedEntry } from './queue.ts';
import { newestKeyHash, takenUp } from './queue-taking.ts';

/** The characters of a queued input's text that a listing shows (GET /v1/sessions/{id}/queue). */
export const QUEUE_PREVIEW_CHARS = 280;

/** A queued input as GET /v1/sessions/{id}/queue shows it: a preview, never the whole input. */
export interface QueuedRow {
  queued_turn: string;
  /** 1: the next to run. */
  position: number;
  enqueued_at: string;
  /** How many input items it holds. */
  items: number;
  /** The input's text (messages, calls, outputs), at most QUEUE_PREVIEW_CHARS characters. */
  preview: string;
  preview_truncated: boolean;
}

/** Why no queued input runs: the session's budget is spent (the details of its 402 `budget_exhausted`). */
export interface QueueHeld {
  reason: 'budget_exhausted';
  budget: 'session';
  limit: string;
  spent: number;
  value: number;
}

/**
 * The session's queued inputs (busy policy `enqueue`, log/queue.ts), oldest first: one listing
 * of `queue/<g>/` (and of each generation in `queued_in`), then a read of each of the first
 * `limit` entries (with two or more, a get of the one a pickup marked, listed first:
 * log/queue-taking.ts), and of as many after them as were left out, so the rows fill the page.
 * (Inputs the store stamped alike are read to order them: log/queue.ts listQueued.)
 * A withdraw's tombstone is not read, nor an entry past the rows. Left out,
 * of the rows, their positions and `total`, as they will not run: a tombstone, an entry taken up
 * between the listing and its read, and one marked whose turn is stored (a head more: `takenUp`,
 * and one read of the session's newest record for all of them; one whose pickup stored nothing
 * runs at the next pickup, so it is counted). `total` counts the
 * entries past the rows as listed; `listed`, the entries the listing found, tombstones with them
 * (a listing that found any runs a pickup, which deletes a stale one: lib/turn/busy.ts listQueue).
 * `held`, when inputs wait and the session's budget refuses its next turn (as its pickup's claim
 * judges it): read, only for a session with a budget, with its newest record and the charges it
 * names (as SessionLog.get reads its `usage`), alongside the entries; left out, logged, when that
 * read fails.
 */
export async function queuedInputs(
  log: LogContext,
  id: string,
  limit: number,
): Promise<{ queued: QueuedRow[]; total: number; listed: number; held?: QueueHeld }> {
  const { config } = await readConfig(log, id);
  const scope = scopeOf(log.keyPrefix, config);
  const entries = await listQueued(log, scope);
  // A withdraw's tombstone (listed empty) is no input: neither read nor given a position.
  const inputs = entries.filter((entry) => !entry.withdrawn);
  // Unread (a store failing, a record unreadable): the listing goes on without `held`, logged.
  const held =
    config.budget && inputs.length > 0
      ? heldBy(log, config).catch((error: unknown) => {
          log.log(`tailgate: session ${id}: whether its budget holds its queue could not be read`, error);
          return undefined;
        })
      : undefined;
  // The session's newest record, read once for every marked entry that needs it (takenUp).
  let newest: Promise<string | undefined> | undefined;
  const newestKey = () => (newest ??= newestKeyHash(log, scope));
  const waiting: { entry: QueuedEntry; input: QueuedInput }[] = [];
  let dropped = 0;
  // The first `limit` entries, and as many more as were left out, so the page is full while inputs wait.
  for (let next = 0; waiting.length < limit && next < inputs.length; ) {
    const batch = inputs.slice(next, next + limit - waiting.length);
    next += batch.length;
    const read = await mapLimit(batch, PARALLEL_GETS, async (entry) => {
      const input = await readQueued(log, { ...scope, generation: entry.generation }, entry.keyHash);
      return input && !(await takenUp(log, scope, entry, input, newestKey)) ? { entry, input } : null;
    });
    for (const found of read) found ? waiting.push(found) : dropped++;
  }
  const queued = waiting.map(({ entry, input }, index) => {
    const text = previewText(input.input);
    return {
      queued_turn: entry.keyHash,
      position: index + 1,
      enqueued_at: input.enqueued_at,
      items: input.input.length,
      preview: text.slice(0, QUEUE_PREVIEW_CHARS),
      preview_truncated: text.length > QUEUE_PREVIEW_CHARS,
    };
  });
  const total = inputs.length - dropped;
  const refusal = total > 0 ? await held : undefined;
  return { queued, total, listed: entries.length, ...(refusal ? { held: refusal } : {}) };
}

/** The refusal the budget of the session `config` is of meets its next turn; undefined while it leaves room. */
async function heldBy(log: LogContext, config: SessionConfig): Promise<QueueHeld | undefined> {
  const scope = scopeOf(log.keyPrefix, config);
  const ledger = await shownTotals(log, scope, await readNewest(log, scope));
  const refused = budgetRefusal(config.budget, sessionUsage(ledger));
  return refused ? { reason: 'budget_exhausted', ...(refused.details as Omit<QueueHeld, 'reason'>) } : undefined;
}

function previewText(items: readonly Item[]): string {
  return items
    .map((item) => itemText(item))
    .filter((text) => text !== '')
    .join('\n');
}
