import { contextKey, doneKey, idempotencyKey, journalPrefix, leaseKey, recordKey } from '../keys.ts';
import { SESSION_DELETED } from '../../errors.ts';
import { listAll } from '../../store/object-store.ts';
import { doneSchema, parseStored, type SessionConfig } from '../records.ts';
import type { LogContext } from './context.ts';
import { sharedGenerations } from './fork-refs.ts';
import type { OpenTurn } from './types.ts';

/**
 * Whether `turn`'s session is gone as its own read after the turn found it (`config`, null: the
 * id names no session): deleted, or created again (another creation time, or, when both name
 * one, another `incarnation`: an import of the session's own export keeps its creation time). A
 * delete of its newest turn moves the generation but keeps the incarnation.
 */
export function sessionGone(turn: OpenTurn, config: SessionConfig | null): boolean {
  if (config === null || config.created_at !== turn.session.created_at) return true;
  const { incarnation } = turn.scope;
  return incarnation !== undefined && config.incarnation !== undefined && config.incarnation !== incarnation;
}

/**
 * See SessionLog.leaveGone. A turn whose claim landed after a delete of its session had read the
 * session's records (its put still in flight while the delete ran: nothing fenced it) completed
 * as one that ran before the delete, under a generation the delete's sweep had passed already,
 * which no config names any more. Its owner, finding the session gone after its answer, removes
 * what the turn stored there, as the delete would have: its record, then its completion, its
 * lease, its `idem/`, its compaction's summary and its event journal (docs/STORAGE.md "Delete").
 * A turn the delete fenced (its completion the delete's) is left to leaveDeleted (log/lease.ts):
 * that delete's sweep removes its record; so is one of a generation a live fork reads (a turn
 * completed before the delete, forked since), which the sweep keeps. Failures leave them to the
 * next delete of the same id, whose sweep removes every object of other incarnations.
 */
export async function leaveGone(log: LogContext, turn: OpenTurn): Promise<void> {
  const { scope, record } = turn;
  try {
    // A live fork reads the generation (forked since the turn): the sweep kept it, and so does this.
    if ((await sharedGenerations(log, scope.id)).shared.has(scope.generation)) return;
    const key = doneKey(scope, record);
    const done = await log.store.get(key);
    if (done && done.body.length > 0) {
      const closed = parseStored(key, done.body, doneSchema);
      if (closed.writer !== turn.writer && closed.error?.code === SESSION_DELETED) return;
    }
    // The record first: a delete still listing the records then finds no open turn to fence.
    await log.store.delete(recordKey(scope, record));
    const journal = await listAll(log.store, journalPrefix(scope, turn.turn));
    await log.store.delete([
      ...journal.map((object) => object.key),
      leaseKey(scope, record),
      ...(turn.keyHash ? [idempotencyKey(scope, turn.keyHash)] : []),
      contextKey(scope, record),
      key,
    ]);
  } catch {
    // Left for the next delete of this id.
  }
}
