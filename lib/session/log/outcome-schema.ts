import { z } from 'zod';
import { outputItemSchema } from '../../items.ts';
import { turnUsageSchema } from '../../ledger/usage.ts';
import { contextStartSchema, errorSchema, overflowBoundarySchema, undeliveredSchema } from '../records.ts';

/**
 * A turn's outcome as its completion stores it. With its items, the small fields the completion
 * carries beside them are checked against the schemas its readers parse them with (`doneSchema`'s
 * own), so a value they would refuse is refused here, before the put, not stored for every read
 * of the session to refuse: the usage the totals add, the context start, the overflow boundary,
 * the notices still undelivered.
 */
export const outcomeSchema = z.object({
  status: z.enum(['completed', 'failed', 'aborted']),
  output: z.array(outputItemSchema),
  receipt: z.unknown(),
  response: z.unknown().optional(),
  error: errorSchema.optional(),
  usage: turnUsageSchema.optional(),
  summaryUsage: turnUsageSchema.optional(),
  context: contextStartSchema.optional(),
  overflow: overflowBoundarySchema.optional(),
  undelivered: undeliveredSchema.optional(),
});
