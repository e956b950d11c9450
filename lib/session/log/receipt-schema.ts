import { z } from 'zod';
import { storedTurnUsageSchema } from '../../ledger/usage.ts';

/** How a turn's receipt (the `receipt` of its completion, lib/turn/receipt.ts) is read back (./turns.ts). */

const rangesSchema = z.string().regex(/^(?:\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*)?$/);
const hashesSchema = z.string().regex(/^[0-9a-f]*$/);
/** A synthetic item of a prompt (lib/prompt-shape.ts SyntheticEntry), as receipts store it and the API shows it. */
export const syntheticEntrySchema = z.object({
  index: z.number().int(),
  synthetic: z.string(),
  chars: z.number().int(),
  content: z.string().optional(),
  name: z.string().optional(),
});
const syntheticSchema = z.array(syntheticEntrySchema);
/** The receipt lib/turn/receipt.ts builds, read leniently: older turns lack fields, failed ones most of them. */
export const receiptSchema = z
  .object({
    model: z.string().optional(),
    strategies: z.array(z.string()).optional(),
    whole: rangesSchema.optional(),
    compacted: rangesSchema.optional(),
    dropped: rangesSchema.optional(),
    notices: z.array(z.object({ name: z.string(), stored_as: z.string(), posted_at: z.string() })).optional(),
    context: z.record(z.string(), z.unknown()).optional(),
    usage: storedTurnUsageSchema.optional(),
    compaction_usage: storedTurnUsageSchema.optional(),
    /**
     * A failed turn's `usage` is an estimate: its provider may have run its model call (timed out
     * in flight, broke off after it was accepted) and reported none.
     */
    usage_estimated: z.literal(true).optional(),
    abort: z.object({ name: z.string(), stored_as: z.string(), reason: z.string() }).optional(),
    media_as_text: z.number().int().nonnegative().optional(),
    incomplete: z.enum(['max_output_tokens', 'content_filter']).optional(),
    /** A packed background turn's (its record said `background`: ../log/packer.ts packedReceipt). */
    background: z.literal(true).optional(),
    prompt: z
      .union([
        z.object({
          v: z.literal(2),
          items: z.number().int().nonnegative(),
          tools: hashesSchema,
          blocks: hashesSchema,
          block_chars: z.array(z.number().int().nonnegative()),
          tail_start: z.number().int().nonnegative(),
          tail: hashesSchema,
          tail_chars: z.array(z.number().int().nonnegative()),
          synthetic: syntheticSchema,
        }),
        z.object({ hashes: hashesSchema, chars: z.array(z.number().int().nonnegative()), synthetic: syntheticSchema }),
      ])
      .optional(),
  })
  .catch({});
export type Receipt = z.infer<typeof receiptSchema>;
