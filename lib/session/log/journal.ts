import { z } from 'zod';
import { putJsonCreateOnly } from '../../store/create-only.ts';
import { journalKey, journalPrefix, type LogScope } from '../keys.ts';
import { parseStored } from '../records.ts';
import type { LogContext } from './context.ts';

/**
 * A turn's event journal (docs/STORAGE.md, "Event journal"): `events/<g>/<turn>/<batch>`,
 * one create-only object per batch, written by the turn's owner at most once a second, so no
 * key is written twice and a resumed reader lists and reads them in order.
 */

const journalEventSchema = z.object({ n: z.number().int().positive(), event: z.string(), data: z.unknown() });
export type JournalEvent = z.infer<typeof journalEventSchema>;

const batchSchema = z
  .object({
    format: z.literal('tailgate.events.v1'),
    writer: z.string(),
    events: z.array(journalEventSchema),
    /** The turn's last event is in this batch. */
    end: z.boolean().optional(),
  })
  .strict();
export type JournalBatch = z.infer<typeof batchSchema>;

/** Journal objects of one session incarnation. */
export class EventJournal {
  readonly #log: LogContext;

  constructor(log: LogContext) {
    this.#log = log;
  }

  /** Puts batch `index` (from 1) of a turn's journal; false when someone else's is there. */
  async write(scope: LogScope, turn: number, index: number, batch: Omit<JournalBatch, 'format'>): Promise<boolean> {
    const body: JournalBatch = { format: 'tailgate.events.v1', ...batch };
    return putJsonCreateOnly(this.#log.store, journalKey(scope, turn, index), body, `"writer":"${batch.writer}"`);
  }

  /**
   * The batches after batch `after` (0: all), in order, each with its index (a batch whose
   * write failed leaves its index out): one listing, then one get each.
   */
  async read(scope: LogScope, turn: number, after: number): Promise<(JournalBatch & { index: number })[]> {
    const prefix = journalPrefix(scope, turn);
    const page = await this.#log.store.list(prefix, {
      limit: 1000,
      ...(after > 0 ? { startAfter: journalKey(scope, turn, after) } : {}),
    });
    const objects = await Promise.all(page.objects.map((object) => this.#log.store.get(object.key)));
    return objects.flatMap((object, at) => {
      const { key } = page.objects[at]!;
      const index = Number(key.slice(prefix.length));
      return object && Number.isSafeInteger(index) ? [{ ...parseStored(key, object.body, batchSchema), index }] : [];
    });
  }
}
