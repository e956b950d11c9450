import { doneKey } from '../keys.ts';
import { doneSchema, parseStored } from '../records.ts';
import type { LogContext } from './context.ts';
import { receiptSchema } from './receipt-schema.ts';
import type { OpenTurn } from './types.ts';

/**
 * The notices (their `stored_as`) the completion someone else closed `turn` with accounts for:
 * those its answer showed (its receipt's `notices`) and those it carries on to the next turn
 * (its `undelivered.notices`). Another run of a background turn that completed or failed it
 * (docs/STORAGE.md, "Notices") has delivered those, or its next turn will: a run stopped by
 * that close gives none of them back. Empty when the completion is this run's own or gone
 * (its turn deleted: nobody takes its notices over); null when it is packed since (its body
 * buried), not known. A failed read throws.
 */
export async function closerNotices(log: LogContext, turn: OpenTurn): Promise<Set<string> | null> {
  const key = doneKey(turn.scope, turn.record);
  const object = await log.store.get(key);
  if (!object) return new Set();
  if (object.body.length === 0) return null;
  const done = parseStored(key, object.body, doneSchema);
  if (done.writer === turn.writer) return new Set();
  const shown = receiptSchema.safeParse(done.receipt ?? {}).data?.notices ?? [];
  const carried = done.undelivered?.notices ?? [];
  return new Set([...shown, ...carried].map((notice) => notice.stored_as));
}
