import { z } from 'zod';
import { allParsedItems, itemSchema, type Item } from '../../items.ts';
import { commit, type Commit, type CommitOptions, type Replay } from './commit.ts';
import { indexAppend, type AppendReplay } from './append-key.ts';
import { checkInvariant, type LogContext } from './context.ts';
import type { OverdueAppend } from './pack-schedule.ts';
import type { IndexState } from './session-index.ts';

/** An append: the next record holding the caller's items (lib/session/log/commit.ts). */

const itemsSchema = z.array(itemSchema).min(1);

/** An append's key (log/append-key.ts): the SHA-256 of the Idempotency-Key and of the request. */
export interface AppendKey {
  keyHash: string;
  requestHash: string;
}

/** How an append commits (SessionLog.append): see CommitOptions. */
export interface AppendOptions extends Pick<CommitOptions, 'packsOverdue' | 'onlyFirst' | 'onLapsed'> {
  /** Its Idempotency-Key: a retry answers AppendedAgain, storing nothing (log/append-key.ts). */
  key?: AppendKey | undefined;
}

/** What an append wrote. */
export interface Appended {
  first_seq: number;
  last_seq: number;
  record: number;
  generation: string;
  overdue?: OverdueAppend;
  indexed: IndexState;
}

/** A keyed append's retry: the seqs the first one stored, nothing stored again. */
export type AppendedAgain = AppendReplay['appended'] & { replayed: true };

/** See SessionLog.append. */
export async function appendItems(
  log: LogContext,
  id: string,
  items: Item[],
  options: AppendOptions = {},
): Promise<Appended | AppendedAgain> {
  const { key, ...rest } = options;
  // Items a route's schema gave, none rewritten since (lib/items.ts markParsedItems), hold already.
  const input = allParsedItems(items) ? items : checkedItems(items);
  const queued = key ? { checkQueued: true } : {};
  const committed = await commit(log, id, input, { ...rest, ...key, ...queued, kind: 'append' });
  // The key used already: its append's seqs, nothing stored.
  if ('appended' in committed) return { ...committed.appended, replayed: true };
  const { record, config, overdue, scope } = written(committed);
  // Indexed before the answer (and before a record of no items follows it, log/state-record.ts).
  if (key) await indexAppend(log, scope, record);
  const last_seq = record.first_seq + input.length - 1;
  // The listing row needs the record's counts, totals and time: its items are not held for a task that runs late.
  const indexed = { config, newest: { record: { ...record, items: [], recent: undefined }, done: null } };
  const { generation } = scope;
  return {
    first_seq: record.first_seq,
    last_seq,
    record: record.record,
    generation,
    ...(overdue && { overdue: { ...overdue, record, scope } }),
    indexed,
  };
}

/** A commit of an append always writes (or throws), but for a used key (above). */
function written(committed: Commit | Replay): Commit {
  if ('replay' in committed) throw new Error('an append replayed a turn');
  return committed;
}

let itemChecks = 0;

/** How many appends have checked their items against itemSchema (none of a route's, but for attachments). */
export function appendItemChecks(): number {
  return itemChecks;
}

function checkedItems(items: Item[]): Item[] {
  itemChecks++;
  return checkInvariant(itemsSchema, items);
}
