import { z } from 'zod';
import { ERROR_CODES } from '../lib/errors.ts';
import { clientItemSchema, idSchema, textProblem, toolSchema } from '../lib/items.ts';

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
    content: z.string().optional(),
    call_id: z.string().optional(),
    name: z.string().optional(),
    arguments: z.string().optional(),
    output: z.string().optional(),
    seq: z.number().int().optional(),
    created_at: z.string().optional(),
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

const strategiesSchema = z.union([z.string().max(1000), z.array(z.string().min(1).max(100)).max(50)]).meta({
  description: 'A comma-separated string or an array of strategy names, applied in order.',
  example: 'shorten_tools_epoch_increment,inbox',
});

const strategyConfigSchema = z.record(z.string(), z.number()).meta({
  description: 'Strategy thresholds by snake_case key, e.g. epoch_size. An unknown key is a 400.',
  example: { epoch_size: 10 },
});

const sessionFields = {
  instructions: z
    .string()
    .nullable()
    .optional()
    .meta({ description: 'The system prompt; at most MAX_INSTRUCTIONS_BYTES (256 KiB) of UTF-8, else 413.' }),
  model: z.string().min(1).max(200).nullable().optional().meta({ example: 'echo' }),
  strategies: strategiesSchema.nullable().optional(),
  strategy_config: strategyConfigSchema.nullable().optional(),
  tools: z.array(toolSchema).max(512).nullable().optional(),
  metadata: z
    .record(z.string(), z.unknown())
    .nullable()
    .optional()
    .meta({ description: 'Free-form JSON; at most MAX_METADATA_BYTES (64 KiB) as JSON, else 413.' }),
};

export const sessionCreateSchema = z
  .object({ id: idSchema.optional(), ...sessionFields })
  .strict()
  .meta({ id: 'SessionCreate' });

export const sessionPatchSchema = z.object(sessionFields).strict().meta({ id: 'SessionPatch' });

export const sessionSchema = z
  .object({
    id: z.string(),
    created_at: z.string(),
    instructions: z.string().nullable(),
    model: z.string().nullable(),
    strategies: z.array(z.string()).nullable(),
    strategy_config: z.record(z.string(), z.unknown()),
    tools: z.array(toolSchema),
    metadata: z.record(z.string(), z.unknown()),
    counts: z.object({ items: z.number().int(), turns: z.number().int(), tool_calls: z.number().int() }),
  })
  .meta({ id: 'Session' });

export const turnRequestSchema = z
  .object({
    input: z
      .union([z.string().min(1), z.array(clientItemSchema).min(1).max(10_000)])
      .meta({ description: 'One user message, or an array of items.' }),
    model: z.string().min(1).max(200).optional(),
    strategies: strategiesSchema.optional(),
    strategy_config: strategyConfigSchema.optional(),
    tools: z.array(toolSchema).max(512).optional(),
    stream: z.boolean().optional(),
    max_output_tokens: z.number().int().positive().max(1_000_000).optional(),
    temperature: z.number().min(0).max(2).optional(),
    truncation: z
      .enum(['auto', 'disabled'])
      .optional()
      .meta({
        description:
          "A prompt over the model's window: absent, the overflow safety net drops its oldest items " +
          'behind a stored boundary (without `compact` in the strategies); ' +
          '`auto` drops just enough for this turn; `disabled` refuses it (413 context_too_large).',
      }),
  })
  .strict()
  .meta({ id: 'TurnRequest' });
export type TurnRequestBody = z.infer<typeof turnRequestSchema>;

const droppedSchema = z.object({
  tool_pairs: z.number().int(),
  messages: z.number().int(),
  dropped_seqs: z.array(z.number().int()),
  prompt_tokens_before: z.number().int(),
  prompt_tokens: z.number().int(),
});

export const turnContextSchema = z
  .object({
    strategies: z.array(z.string()),
    items_in_prompt: z.number().int(),
    prompt_chars: z.number().int(),
    tool_calls_total: z.number().int(),
    kept_full: z.number().int(),
    compacted: z.number().int(),
    dropped: z.number().int(),
    notices_delivered: z.array(z.string()),
    prompt_tokens: z
      .number()
      .int()
      .optional()
      .meta({ description: 'With `compact` in the list: the tokens of the prompt as counted for the budget.' }),
    context_start_seq: z.number().int().optional().meta({
      description:
        'With a compacted context: the first seq of the current context (the summary stands for the older items).',
    }),
    compaction: z
      .object({
        start_seq: z.number().int(),
        summarized: z.object({ first_seq: z.number().int(), last_seq: z.number().int() }),
        interrupted: z.array(z.string()),
      })
      .optional()
      .meta({ description: 'Set when this turn compacted the context.' }),
    truncation: droppedSchema
      .optional()
      .meta({ description: 'Set when `truncation: "auto"` dropped items to fit the window.' }),
    overflow_dropped: droppedSchema
      .extend({ tool_start_seq: z.number().int(), message_start_seq: z.number().int(), moved: z.boolean() })
      .optional()
      .meta({
        description:
          'Set when the overflow safety net left items out: ' +
          'tool pairs whose call is older than `tool_start_seq` and messages older than `message_start_seq` ' +
          '(stored, not in the prompt); `moved` when this turn moved that boundary.',
      }),
  })
  .meta({ id: 'TurnContext' });

export const turnResponseSchema = z
  .object({
    session_id: z.string(),
    turn: z.number().int(),
    output: z.array(storedItemOutSchema),
    usage: z.object({
      input_tokens: z.number().int(),
      output_tokens: z.number().int(),
      cached_input_tokens: z.number().int().optional(),
    }),
    context: turnContextSchema,
  })
  .meta({ id: 'TurnResponse' });

export const appendItemsSchema = z
  .object({ items: z.array(clientItemSchema).min(1).max(10_000) })
  .strict()
  .meta({ id: 'AppendItems' });

export const appendResultSchema = z.object({ first_seq: z.number().int(), last_seq: z.number().int() });

const positiveIntegerText = (name: string) =>
  z
    .string()
    .regex(/^[0-9]{1,15}$/, `${name} must be a positive integer`)
    .transform(Number);

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
  context: turnContextSchema.extend({ notices_pending: z.array(z.string()).optional() }),
});

export const noticeNameSchema = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[A-Za-z0-9_-][A-Za-z0-9._-]*$/, 'must be 1-200 characters of [A-Za-z0-9._-], not starting with "."');

export const noticeCreateSchema = z
  .object({ content: z.string(), name: noticeNameSchema.optional() })
  .strict()
  .meta({ id: 'NoticeCreate' });

export const noticePostedSchema = z.object({ name: z.string(), posted_at: z.string() });

export const pendingListSchema = z.object({
  pending: z.array(z.object({ name: z.string(), size: z.number().int(), posted_at: z.string() })),
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
