import { z } from 'zod';
import { itemSchema, type Item } from '../../items.ts';
import { commit, type Commit, type CommitOptions, type Replay } from './commit.ts';
import { checkInvariant, type LogContext } from './context.ts';
import type { OverdueAppend } from './pack-schedule.ts';
import type { IndexState } from './session-index.ts';

/** An append: the next record holding the caller's items (lib/session/log/commit.ts). */

const itemsSchema = z.array(itemSchema).min(1);

/** How an append commits (SessionLog.append): see CommitOptions. */
export type AppendOptions = Pick<CommitOptions, 'packsOverdue' | 'onlyFirst' | 'onLapsed'>;

/** See SessionLog.append. */
export async function appendItems(
  log: LogContext,
  id: string,
  items: Item[],
  options: AppendOptions = {},
): Promise<{
  first_seq: number;
  last_seq: number;
  record: number;
  generation: string;
  overdue?: OverdueAppend;
  indexed: IndexState;
}> {
  const input = checkInvariant(itemsSchema, items);
  const { record, config, overdue, scope } = written(await commit(log, id, input, { ...options, kind: 'append' }));
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

/** A commit without an idempotency key always writes (or throws). */
function written(committed: Commit | Replay): Commit {
  if ('replay' in committed) throw new Error('a commit without an idempotency key replayed');
  return committed;
}
