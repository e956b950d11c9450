import { z } from 'zod';
import { itemSchema } from '../items.ts';

/** An input queued while a turn ran (`queue/<g>/<key_sha256>`), run later as its own turn. */
export const queuedInputSchema = z
  .object({
    format: z.literal('tailgate.queued.v1'),
    /** The SHA-256 its turn is claimed under: the request's Idempotency-Key's, or a random one. */
    key_sha256: z.string().regex(/^[0-9a-f]{64}$/),
    request_sha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/)
      .optional(),
    enqueued_at: z.string(),
    /** A random id: a put whose answer was lost is recognised by it. */
    writer: z.string(),
    /**
     * The id of the request that queued it (its `x-request-id`), which its turn's log line names:
     * absent in an entry queued outside a request, or stored by a version before it was kept.
     */
    request_id: z.string().min(1).optional(),
    /** When a pickup began claiming it (log/queue-withdraw.ts): a withdraw then refuses. */
    taking_at: z.string().optional(),
    input: z.array(itemSchema).min(1),
    /** The turn's settings (everything of the request but its input). */
    request: z.record(z.string(), z.unknown()),
  })
  .strict();
export type QueuedInput = z.infer<typeof queuedInputSchema>;
