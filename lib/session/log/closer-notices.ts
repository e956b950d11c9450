import { z } from 'zod';
import { doneKey } from '../keys.ts';
import { doneSchema, parseStored } from '../records.ts';
import type { SegmentTurn } from '../segment-records.ts';
import type { LogContext } from './context.ts';
import { withFreshListing } from './head.ts';
import { packedTurn } from './packed-turn.ts';
import type { OpenTurn } from './types.ts';

/**
 * The notices (their `stored_as`) the completion someone else closed `turn` with accounts for:
 * those its answer showed (its receipt's `notices`) and those it carries on to the next turn
 * (its `undelivered.notices`). Another run of a background turn that completed or failed it
 * (docs/STORAGE.md, "Notices") has delivered those, or its next turn will: a run stopped by
 * that close gives none of them back. Empty when the completion is this run's own or gone
 * (its turn deleted: nobody takes its notices over). Packed since (its body buried), its
 * segment's line of the turn tells them (`packedNotices`); null when that line does not, or
 * its receipt's notices do not read (`accounted`), not known. A failed read throws.
 */
export async function closerNotices(log: LogContext, turn: OpenTurn): Promise<Set<string> | null> {
  const key = doneKey(turn.scope, turn.record);
  const object = await log.store.get(key);
  if (!object) return new Set();
  // A segment listed may be merged into a newer one before it is read: the log is listed again.
  if (object.body.length === 0)
    return packedNotices(await withFreshListing(() => packedTurn(log, turn.scope, turn.record)));
  const done = parseStored(key, object.body, doneSchema);
  if (done.writer === turn.writer) return new Set();
  return accounted(done.receipt, done.undelivered?.notices.map((notice) => notice.stored_as) ?? []);
}

/**
 * The notices a packed turn's segment line accounts for: its receipt's, and those it carries on
 * (the `undelivered` the packer adds to the receipt of a turn not completed, or carrying some on:
 * ./packer.ts `packedReceipt`). A completed turn's line written since lines keep receipts
 * (`completed_at`) and naming none carries on none of those its runs took (it showed them). Null
 * when the line does not tell (none, or one an older pack wrote of a turn not completed). Its
 * writer is not kept: a close by the run itself showed or carries on all it took, so this
 * answers for it all the same.
 */
function packedNotices(line: SegmentTurn | null): Set<string> | null {
  if (line === null) return null;
  const undelivered = packedUndelivered.safeParse(line.receipt).data?.undelivered;
  if (undelivered !== undefined) return accounted(line.receipt, undelivered);
  return line.status === 'completed' && line.completed_at !== undefined ? accounted(line.receipt, []) : null;
}

const packedUndelivered = z.object({ undelivered: z.array(z.string()) });

/**
 * The receipt's notices, read alone: ./receipt-schema.ts reads a receipt with a field it refuses
 * as none, which here would give back a notice the close showed. No receipt: the turn ended
 * before its prompt was built, showing none.
 */
const shownSchema = z.object({ notices: z.array(z.object({ stored_as: z.string() })).optional() });

/** What a close showed and carries on; null when its receipt's notices do not read (not known). */
function accounted(receipt: unknown, carried: readonly string[]): Set<string> | null {
  const read = shownSchema.safeParse(receipt === undefined ? {} : receipt);
  if (!read.success) return null;
  return new Set([...(read.data.notices ?? []).map((notice) => notice.stored_as), ...carried]);
}
