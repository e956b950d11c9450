import { z } from 'zod';
import { toolNamesOnce, toolParametersSchema } from '../items.ts';
import { toolChoiceSchema } from './tool-choice.ts';
import { referableInputItemSchema } from './input-schemas.ts';

/**
 * Request schemas of the OpenAI-compatible API: the official request shapes, restricted to
 * what tailgate does. Objects are strict, so a field tailgate does not support (`prompt`,
 * built-in tools...) is a 400 whose `param` names it instead of being ignored; every field
 * accepted either takes effect or is echoed as advisory (docs/OPENAI.md has the table).
 */

export const effortSchema = z.enum(['none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max']);
export const verbositySchema = z.enum(['low', 'medium', 'high']);
export const penaltySchema = z.number().min(-2).max(2).nullable().optional();
export const endUserSchema = z.string().min(1).max(256).nullable().optional();
/** The tiers the `openai` client's types name (Chat Completions: no `ultrafast`); advisory, echoed. */
const serviceTiers = ['auto', 'default', 'flex', 'scale', 'priority', 'fast'] as const;
const tierSchema = <const T extends readonly [string, ...string[]]>(tiers: T) =>
  z.enum(tiers).nullable().optional().meta({ description: 'Advisory: echoed, the provider picks its tier.' });
export const serviceTierSchema = tierSchema([...serviceTiers, 'ultrafast']);
export const chatServiceTierSchema = tierSchema(serviceTiers);
/** OpenAI's metadata: at most 16 pairs, keys up to 64 characters, values up to 512. */
const metadataSchema = z
  .record(z.string().max(64), z.string().max(512))
  .refine((value) => Object.keys(value).length <= 16, { error: 'at most 16 metadata pairs' });

/** How long the provider keeps the prompt cached: passed to OpenAI models (`openai:`), advisory elsewhere. */
export const promptCacheRetentionSchema = z.enum(['in_memory', '24h']).nullable().optional();

/**
 * `prompt_cache_options`: its `ttl` goes to OpenAI models as `prompt_cache_retention` does; `mode`
 * and `comparison_response_id` are advisory (tailgate places its cache breakpoint itself, and
 * OpenAI's implicit one stays). `prewarm: true` asks for no answer, which a turn always gives: a 400.
 */
export const promptCacheOptionsSchema = (ttls: readonly [string, ...string[]]) =>
  z
    .object({
      mode: z.enum(['implicit', 'explicit']).optional(),
      ttl: z.enum(ttls).optional(),
      prewarm: z
        .boolean()
        .refine((prewarm) => !prewarm, { error: 'prewarming the prompt cache is not supported: a response answers' })
        .optional(),
      comparison_response_id: z.string().max(256).nullable().optional(),
    })
    .strict()
    .nullable()
    .optional();

export const jsonSchemaFormat = {
  name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must match ^[A-Za-z0-9_-]{1,64}$'),
  description: z.string().max(4096).optional(),
  schema: z.record(z.string(), z.unknown()),
  strict: z.boolean().nullable().optional(),
};

export const functionToolSchema = z
  .object({
    type: z.literal('function', { error: 'only function tools are supported (no built-in tools)' }),
    name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must match ^[A-Za-z0-9_-]{1,64}$'),
    description: z.string().max(4096).nullable().optional(),
    parameters: toolParametersSchema.nullable().optional(),
    strict: z.boolean().nullable().optional(),
  })
  .strict();

export const modelSchema = z.string().min(1).max(200).meta({
  description: 'A tailgate model id (`echo`, `openai:gpt-4.1-mini`) or a MODEL_ALIASES name.',
  example: 'echo',
});

/**
 * Items one request may send: a response's input, and a conversation's items at its create or an append
 * (OpenAI takes 20 there; `@openai/agents`' OpenAIConversationsSession adds a whole run's items at once).
 */
const MAX_INPUT_ITEMS = 10_000;

export const responseCreateSchema = z
  .object({
    model: modelSchema.nullable().optional(),
    input: z.union([z.string().min(1), z.array(referableInputItemSchema).min(1).max(MAX_INPUT_ITEMS)]),
    instructions: z.string().nullable().optional(),
    tools: z
      .array(functionToolSchema)
      .max(512)
      .superRefine(toolNamesOnce((tool) => tool.name))
      .nullable()
      .optional(),
    tool_choice: toolChoiceSchema,
    previous_response_id: z.string().min(1).max(200).nullable().optional(),
    conversation: z
      .union([z.string().min(1).max(64), z.object({ id: z.string().min(1).max(64) }).strict()])
      .nullable()
      .optional(),
    store: z.boolean().nullable().optional(),
    stream: z.boolean().nullable().optional(),
    stream_options: z.object({ include_obfuscation: z.boolean().optional() }).strict().nullable().optional(),
    max_output_tokens: z.number().int().positive().max(1_000_000).nullable().optional(),
    temperature: z.number().min(0).max(2).nullable().optional(),
    metadata: metadataSchema.nullable().optional(),
    parallel_tool_calls: z.boolean().nullable().optional(),
    max_tool_calls: z
      .number()
      .int()
      .min(1)
      .nullable()
      .optional()
      .meta({ description: 'A limit on calls to built-in tools: tailgate has none, so it always holds.' }),
    top_p: z.number().min(0).max(1).nullable().optional(),
    presence_penalty: penaltySchema,
    frequency_penalty: penaltySchema,
    top_logprobs: z
      .number()
      .int()
      .min(0)
      .max(20)
      .nullable()
      .optional()
      .meta({
        description:
          'Echoed; with `include: ["message.output_text.logprobs"]`, how many of the most likely tokens the ' +
          "provider is asked for at each position. An output_text's `logprobs` are the provider's, none " +
          '(`[]`) when it gives none or the response runs in the background.',
      }),
    reasoning: z
      .object({
        effort: effortSchema.nullable().optional(),
        summary: z.enum(['auto', 'concise', 'detailed']).nullable().optional(),
        generate_summary: z.enum(['auto', 'concise', 'detailed']).nullable().optional(),
        mode: z.string().min(1).max(64).nullable().optional().meta({
          description: 'Advisory: every call runs in the standard mode, which the response echoes.',
        }),
        context: z.enum(['auto', 'current_turn', 'all_turns']).nullable().optional().meta({
          description:
            "A call gets the current tool loop's reasoning alone (`current_turn`), which the response echoes.",
        }),
      })
      .strict()
      .nullable()
      .optional(),
    user: endUserSchema,
    safety_identifier: endUserSchema,
    service_tier: serviceTierSchema,
    truncation: z.enum(['auto', 'disabled']).nullable().optional(),
    text: z
      .object({
        format: z
          .discriminatedUnion('type', [
            z.object({ type: z.literal('text') }).strict(),
            z.object({ type: z.literal('json_object') }).strict(),
            z.object({ type: z.literal('json_schema'), ...jsonSchemaFormat }).strict(),
          ])
          .optional(),
        verbosity: verbositySchema.nullable().optional(),
      })
      .strict()
      .nullable()
      .optional(),
    include: z
      .array(
        z.enum(['reasoning.encrypted_content', 'message.output_text.logprobs'], {
          error: 'only "reasoning.encrypted_content" and "message.output_text.logprobs" are supported',
        }),
      )
      .nullable()
      .optional(),
    background: z
      .boolean()
      .nullable()
      .optional()
      .meta({
        description:
          'Run the response with no client connected: answered at once with status queued ' +
          '(docs/OPENAI.md, "Background responses").',
      }),
    prompt_cache_key: z.string().min(1).max(256).nullable().optional(),
    prompt_cache_retention: promptCacheRetentionSchema,
    prompt_cache_options: promptCacheOptionsSchema(['30m', '12h']),
    prompt: z
      .null({ error: 'reusable prompts (`prompt`) are not supported: send `instructions` and `input`' })
      .optional(),
    moderation: z.null({ error: 'moderation is not supported: tailgate runs no moderation model' }).optional(),
    context_management: z
      .array(
        z
          .object({
            type: z.literal('compaction', { error: 'only "compaction" is supported' }),
            compact_threshold: z.number().int().min(1).max(100_000_000).nullable().optional().meta({
              description:
                "Prompt tokens at which the conversation is compacted (default: the model window's trigger).",
            }),
          })
          .strict(),
      )
      .max(1, { error: 'at most one compaction entry' })
      .nullable()
      .optional(),
  })
  .strict()
  .meta({ id: 'OpenAIResponseCreate' });
export type ResponseCreateBody = z.infer<typeof responseCreateSchema>;

/** `client.responses.compact(...)`'s body (ResponseCompactParams), restricted to what tailgate does. */
export const responseCompactSchema = z
  .object({
    model: modelSchema
      .nullable()
      .meta({ description: "The model that writes the summary (null: SUMMARY_MODEL, else the conversation's)." }),
    input: z
      .union([z.string().min(1), z.array(referableInputItemSchema).min(1).max(MAX_INPUT_ITEMS)])
      .nullable()
      .optional(),
    instructions: z.string().nullable().optional(),
    previous_response_id: z.string().min(1).max(200).nullable().optional(),
    prompt_cache_key: z.string().min(1).max(256).nullable().optional(),
    prompt_cache_retention: promptCacheRetentionSchema,
    prompt_cache_options: promptCacheOptionsSchema(['30m']),
    service_tier: z
      .enum(['auto', 'default', 'fast', 'flex', 'priority'])
      .nullable()
      .optional()
      .meta({ description: 'Advisory: the provider picks its tier.' }),
  })
  .strict()
  .meta({ id: 'OpenAIResponseCompact' });
export type ResponseCompactBody = z.infer<typeof responseCompactSchema>;

export const responseIdParamsSchema = z.object({
  id: z
    .string()
    .min(1)
    .max(200)
    .meta({ param: { name: 'id', in: 'path' }, example: 'resp_conv_0123456789abcdef01234567_1_1_2' }),
});

/** Answers of the OpenAI-compatible API are OpenAI's objects (see the `openai` package's types). */
export const openaiObjectSchema = z.record(z.string(), z.unknown()).meta({ id: 'OpenAIObject' });
/**
 * An `openai` package object as a route's JSON body (`openaiObjectSchema`). Their optional
 * fields read `x?: T`, which Hono's JSON typing turns into `T | undefined` (not JSON) under
 * exactOptionalPropertyTypes; the objects the routes build leave such fields out.
 */
export function openaiObject(value: object): z.infer<typeof openaiObjectSchema> {
  return value as z.infer<typeof openaiObjectSchema>;
}

export const openaiErrorSchema = z
  .object({
    error: z.object({
      message: z.string(),
      type: z.string(),
      param: z.string().nullable(),
      code: z.string().nullable(),
      details: z.unknown().optional().meta({
        description:
          "tailgate's details of the error (docs/API.md, error codes): a failed model call's model and status",
      }),
    }),
  })
  .meta({ id: 'OpenAIError' });

export const conversationCreateSchema = z
  .object({
    items: z.array(referableInputItemSchema).max(MAX_INPUT_ITEMS).nullable().optional(),
    metadata: metadataSchema.nullable().optional(),
  })
  .strict()
  .meta({ id: 'OpenAIConversationCreate' });
export type ConversationCreateBody = z.infer<typeof conversationCreateSchema>;

/** `metadata: null` (the `openai` client's type allows it) clears them, as `{}` does. */
export const conversationUpdateSchema = z
  .object({ metadata: metadataSchema.nullable().transform((metadata) => metadata ?? {}) })
  .strict()
  .meta({ id: 'OpenAIConversationUpdate' });

export const conversationItemsCreateSchema = z
  .object({ items: z.array(referableInputItemSchema).min(1).max(MAX_INPUT_ITEMS) })
  .strict()
  .meta({ id: 'OpenAIConversationItemsCreate' });

export const conversationIdParamsSchema = z.object({
  id: z
    .string()
    .min(1)
    .max(64)
    .meta({ param: { name: 'id', in: 'path' }, example: 'conv_0123456789abcdef01234567' }),
});

export const conversationItemParamsSchema = conversationIdParamsSchema.extend({
  item_id: z
    .string()
    .min(1)
    .max(200)
    .meta({ param: { name: 'item_id', in: 'path' }, example: 'msg_conv_0123456789abcdef01234567_1' }),
});
