import { z } from 'zod';
import { contentSchema } from '../lib/content.ts';
import { ERROR_CODES } from '../lib/error-codes.ts';
import { clientItemSchema, idSchema, reasoningItemSchema, textProblem } from '../lib/items.ts';
import { ABORT_NOTICE_NAME } from '../lib/inbox/index.ts';

import { turnContextSchema } from '../lib/turn/wire.ts';

export {
  sessionCountsSchema,
  sessionCreateSchema,
  sessionForkSchema,
  sessionPatchSchema,
  sessionSchema,
} from '../lib/session/fields.ts';
export { turnRequestSchema, turnResponseSchema } from '../lib/turn/wire.ts';

/**
 * The request and response schemas of the HTTP API. The same objects validate requests and
 * generate /openapi.json, so the document cannot drift from what is enforced.
 * Request objects are strict: an unknown field is a 400 naming it.
 */

export const errorSchema = z
  .object({
    error: z.object({
      code: z.enum(ERROR_CODES).meta({ example: 'invalid_request' }),
      message: z.string(),
      details: z.unknown().optional(),
    }),
  })
  .meta({ id: 'Error' });

export const sessionIdParamsSchema = z.object({
  id: idSchema.meta({ param: { name: 'id', in: 'path' }, example: 's1' }),
});

export const noticeParamsSchema = sessionIdParamsSchema.extend({
  name: z
    .string()
    .min(1)
    .max(200)
    .superRefine((name, context) => {
      const problem = textProblem(name);
      if (problem !== undefined) context.addIssue({ code: 'custom', message: problem });
    })
    .meta({ param: { name: 'name', in: 'path' }, example: '0001-budget.md' }),
});

export const storedItemOutSchema = z
  .object({
    type: z.enum(['message', 'function_call', 'function_call_output']),
    role: z.enum(['system', 'user', 'assistant']).optional(),
    content: contentSchema.optional(),
    call_id: z.string().optional(),
    name: z.string().optional(),
    arguments: z.string().optional(),
    output: contentSchema.optional(),
    reasoning: z
      .array(reasoningItemSchema)
      .optional()
      .meta({
        description:
          "An assistant message's or a function_call's: the model's reasoning before the answer it opens (the " +
          "summary, and in encrypted_content the provider's payload, sent back unchanged within a tool loop).",
      }),
    seq: z.number().int().optional(),
    created_at: z.string().optional(),
    incomplete: z
      .literal(true)
      .optional()
      .meta({
        description:
          "Present on the item a turn's answer stopped in when it stopped short (the turn's `incomplete`): the " +
          'last of its output, an assistant message or a call the provider ended. Never sent by a client.',
      }),
    compacted: z.boolean().optional(),
    synthetic: z.enum(['context_notice', 'inbox', 'summary']).optional(),
    pending: z.boolean().optional(),
    elided: z
      .object({ bytes: z.number().int(), sha256: z.string() })
      .optional()
      .meta({
        description:
          'GET /prompt without full=true: the payload (content, arguments or output) was over 4096 UTF-8 bytes and ' +
          'is sent empty; `bytes` and `sha256` are those of the whole payload.',
      }),
  })
  .meta({ id: 'Item' });

export const appendItemsSchema = z
  .object({ items: z.array(clientItemSchema).min(1).max(10_000) })
  .strict()
  .meta({ id: 'AppendItems' });

export const appendResultSchema = z.object({ first_seq: z.number().int(), last_seq: z.number().int() });

/**
 * A number in a path or a query: decimal digits only (no sign, space, point, exponent or hex),
 * at most `digits` of them.
 */
const positiveIntegerText = (name: string, digits = 15) =>
  z
    .string()
    .regex(new RegExp(`^[0-9]{1,${digits}}$`), `${name} must be a positive integer`)
    .transform(Number);

/** `positiveIntegerText` of 1..`max` (up to Number.MAX_SAFE_INTEGER, 16 digits). */
export const integerText = (name: string, max: number) =>
  positiveIntegerText(name, 16).refine((value) => value >= 1 && value <= max, `${name} must be 1..${max}`);

/** `limit` of a listing: 1..100. */
export const limitText = (description: string) =>
  integerText('limit', 100)
    .optional()
    .meta({ param: { name: 'limit', in: 'query' }, description });

/**
 * A session id and a turn number in the path: every route with a `{turn}` reads it so (400
 * "turn must be a positive integer" for anything but decimal digits).
 */
export const turnParamsSchema = sessionIdParamsSchema.extend({
  turn: integerText('turn', Number.MAX_SAFE_INTEGER).meta({ param: { name: 'turn', in: 'path' }, example: '3' }),
});

export const listItemsQuerySchema = z.object({
  before: positiveIntegerText('before')
    .refine((value) => value >= 1, 'before must be at least 1')
    .optional()
    .meta({ param: { name: 'before', in: 'query' } }),
  limit: positiveIntegerText('limit')
    .refine((value) => value >= 1 && value <= 1000, 'limit must be 1..1000')
    .optional()
    .meta({ param: { name: 'limit', in: 'query' } }),
});

export const itemPageSchema = z.object({
  items: z.array(storedItemOutSchema),
  has_more: z.boolean(),
  next_before: z.number().int().nullable(),
});

export const promptQuerySchema = z.object({
  strategies: z
    .string()
    .max(1000)
    .optional()
    .meta({ param: { name: 'strategies', in: 'query' } }),
  strategy_config: z
    .string()
    .max(10_000)
    .optional()
    .meta({ param: { name: 'strategy_config', in: 'query' }, description: 'JSON object of thresholds' }),
  full: z
    .enum(['true', 'false'])
    .optional()
    .meta({
      param: { name: 'full', in: 'query' },
      description: 'true: every payload whole. Otherwise payloads over 4 KiB are elided (see `elided`).',
    }),
});

export const promptPreviewSchema = z.object({
  items: z.array(storedItemOutSchema),
  context: turnContextSchema.extend({
    notices_pending: z.array(z.string()).optional(),
    queued_turn: z.string().optional(),
  }),
  refused: z
    .object({
      status: z.number().int(),
      code: z.enum(ERROR_CODES),
      message: z.string(),
      details: z.unknown().optional(),
    })
    .nullable()
    .meta({
      description:
        "The refusal the next turn request meets from the session's budget (its status and its error body: 402 " +
        'budget_exhausted once that budget is spent), the prompt shown all the same; null while that budget ' +
        "leaves room (a busy session's 409 and a token's budget are not judged).",
    }),
});

export const noticeNameSchema = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[A-Za-z0-9_-][A-Za-z0-9._-]*$/, 'must be 1-200 characters of [A-Za-z0-9._-], not starting with "."');

/**
 * A notice's content is its message: blank (empty, or whitespace only) it would say nothing, and a
 * blank message is not sent to a model. Only `abort` may be blank: its intent is its name, and
 * its reason then the default one (lib/inbox/inbox.ts, `consume`).
 */
export const noticeCreateSchema = z
  .object({ content: z.string(), name: noticeNameSchema.optional() })
  .strict()
  .refine((body) => body.name === ABORT_NOTICE_NAME || body.content.trim() !== '', {
    message: 'must not be blank (empty or whitespace only); only the notice named abort may be',
    path: ['content'],
  })
  .meta({ id: 'NoticeCreate' });

export const noticePostedSchema = z.object({ name: z.string(), posted_at: z.string() });

/** The query of the inbox's listings: `after` a name (the `next_after` of the previous page), `limit`. */
export const inboxPageQuerySchema = z.object({
  after: z
    .string()
    .min(1)
    .max(1024)
    .refine((after) => !after.includes('/'), 'after must be the next_after of a previous page (a name)')
    .optional()
    .meta({
      param: { name: 'after', in: 'query' },
      description: 'The `next_after` of the previous page: the page starts after that name (byte order).',
    }),
  limit: limitText('How many notices a page lists, 1..100 (default 50).'),
});

const pageFields = {
  has_more: z.boolean(),
  next_after: z.string().nullable().meta({ description: 'The `after` of the next page; null on the last one.' }),
};

export const pendingListSchema = z.object({
  pending: z.array(z.object({ name: z.string(), size: z.number().int(), posted_at: z.string() })),
  ...pageFields,
});

export const deliveredListSchema = z.object({
  delivered: z.array(
    z.object({
      name: z.string(),
      stored_as: z.string(),
      posted_at: z.string(),
      delivered_at: z.string(),
      turn: z.number().int().nullable(),
    }),
  ),
  ...pageFields,
});

export const unreadableListSchema = z.object({
  unreadable: z.array(
    z.object({
      name: z.string(),
      stored_as: z.string(),
      size: z.number().int(),
      reason: z
        .enum(['too_large', 'not_utf8', 'name_too_long'])
        .nullable()
        .meta({ description: 'Why it cannot be delivered; null for an object not set aside by the service.' }),
      posted_at: z.string(),
      set_aside_at: z.string(),
      turn: z.number().int().nullable(),
    }),
  ),
  ...pageFields,
});

export const healthSchema = z.object({ ok: z.literal(true) });

export const compactRequestSchema = z
  .object({
    model: z
      .string()
      .min(1)
      .max(200)
      .optional()
      .meta({ description: 'The model that writes the summary (default SUMMARY_MODEL, else the session model).' }),
    prompt: z
      .string()
      .min(1)
      .max(100_000)
      .optional()
      .meta({ description: 'The summary instructions (default SUMMARY_PROMPT, else the built-in prompt).' }),
    keep_tokens: z
      .number()
      .int()
      .nonnegative()
      .max(100_000_000)
      .optional()
      .meta({ description: 'Tokens of the newest items kept whole; 0 summarizes everything.' }),
  })
  .strict()
  .meta({ id: 'CompactRequest' });

export const compactResultSchema = z
  .object({
    session_id: z.string(),
    compacted: z.boolean(),
    context: z
      .object({
        start_seq: z.number().int(),
        summarized: z.object({ first_seq: z.number().int(), last_seq: z.number().int() }),
        interrupted: z.array(z.string()),
        model: z.string(),
        created_at: z.string(),
        summary: z.string(),
      })
      .nullable(),
  })
  .meta({ id: 'CompactResult' });
