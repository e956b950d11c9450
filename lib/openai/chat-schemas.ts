import { z } from 'zod';
import { toolNamesOnce, toolParametersSchema } from '../items.ts';
import { chatToolChoiceSchema } from './tool-choice.ts';
import {
  effortSchema,
  endUserSchema,
  jsonSchemaFormat,
  modelSchema,
  penaltySchema,
  chatServiceTierSchema,
  promptCacheOptionsSchema,
  promptCacheRetentionSchema,
  verbositySchema,
} from './schemas.ts';

/** The request schema of Chat Completions (`POST /v1/chat/completions`), as ./schemas.ts's. */

const textPart = z.object({ type: z.literal('text'), text: z.string() }).strict();

/** A message's text: a string, or parts of `part`. */
const textContent = <Part extends z.ZodType>(part: Part) =>
  z.union([z.string(), z.array(part).min(1)], {
    error: 'must be a string or text parts (images and files go in user messages)',
  });

const chatText = textContent(textPart);

/** OpenAI's `annotations` (citations) of an answer sent back: advisory, not kept. */
const annotations = z.array(z.record(z.string(), z.unknown())).max(1000).optional();

/**
 * An assistant message's text, as sent back after an answer: a part may carry that answer's
 * `annotations`, and the `role` and null `refusal` of its message (@openai/agents copies them in).
 */
const assistantText = textContent(
  textPart.extend({ annotations, role: z.literal('assistant').optional(), refusal: z.null().optional() }),
);

/** A user message's parts: text, images (`image_url`: https or data: URL) and files (base64 `file_data`). */
const userPart = z.discriminatedUnion('type', [
  textPart,
  z
    .object({
      type: z.literal('image_url'),
      image_url: z
        .object({ url: z.string().min(1), detail: z.enum(['auto', 'low', 'high', 'original']).optional() })
        .strict(),
    })
    .strict(),
  z
    .object({
      type: z.literal('file'),
      file: z
        .object({
          file_data: z.string().min(1, 'a file needs `file_data` (base64); `file_id` is not supported'),
          filename: z.string().min(1).max(256),
        })
        .strict(),
    })
    .strict(),
]);

const chatMessageSchema = z.discriminatedUnion('role', [
  z.object({ role: z.enum(['system', 'developer']), content: chatText, name: z.string().max(256).optional() }).strict(),
  z
    .object({
      role: z.literal('user'),
      content: z.union([z.string(), z.array(userPart).min(1)]),
      name: z.string().max(256).optional(),
    })
    .strict(),
  z
    .object({
      role: z.literal('assistant'),
      content: assistantText.nullable().optional(),
      name: z.string().max(256).optional(),
      refusal: z.string().nullable().optional(),
      annotations,
      tool_calls: z
        .array(
          z
            .object({
              id: z.string().min(1).max(256),
              type: z.literal('function'),
              function: z.object({ name: z.string().min(1).max(256), arguments: z.string() }).strict(),
            })
            .strict(),
        )
        .optional(),
    })
    .strict(),
  z.object({ role: z.literal('tool'), tool_call_id: z.string().min(1).max(256), content: chatText }).strict(),
]);

const chatToolSchema = z
  .object({
    type: z.literal('function', { error: 'only function tools are supported' }),
    function: z
      .object({
        name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must match ^[A-Za-z0-9_-]{1,64}$'),
        description: z.string().max(4096).optional(),
        parameters: toolParametersSchema.optional(),
        strict: z.boolean().nullable().optional(),
      })
      .strict(),
  })
  .strict();

export const chatCompletionCreateSchema = z
  .object({
    model: modelSchema,
    messages: z.array(chatMessageSchema).min(1).max(10_000),
    tools: z
      .array(chatToolSchema)
      .max(512)
      .superRefine(toolNamesOnce((tool) => tool.function.name, ['function', 'name']))
      .optional(),
    tool_choice: chatToolChoiceSchema,
    stream: z.boolean().nullable().optional(),
    stream_options: z
      .object({ include_usage: z.boolean().optional(), include_obfuscation: z.boolean().optional() })
      .strict()
      .nullable()
      .optional(),
    max_tokens: z.number().int().positive().max(1_000_000).nullable().optional(),
    max_completion_tokens: z.number().int().positive().max(1_000_000).nullable().optional(),
    temperature: z.number().min(0).max(2).nullable().optional(),
    n: z.literal(1, { error: 'only one choice is supported' }).nullable().optional(),
    seed: z
      .number()
      .int()
      .nullable()
      .optional()
      .meta({ description: "Passed to the model's provider where it takes one (the AI SDK's `seed` setting)." }),
    parallel_tool_calls: z.boolean().nullable().optional(),
    top_p: z.number().min(0).max(1).nullable().optional(),
    presence_penalty: penaltySchema,
    frequency_penalty: penaltySchema,
    stop: z
      .union([z.string().min(1), z.array(z.string().min(1)).max(4)])
      .nullable()
      .optional(),
    reasoning_effort: effortSchema.nullable().optional(),
    verbosity: verbositySchema.nullable().optional(),
    user: endUserSchema,
    safety_identifier: endUserSchema,
    service_tier: chatServiceTierSchema,
    logprobs: z
      .boolean()
      .nullable()
      .optional()
      .meta({
        description:
          'Taken: a choice, and each streamed chunk, then carries `logprobs: {content, refusal: null}`, ' +
          "`content` the provider's log probabilities of its tokens (asked of OpenAI and OpenAI-compatible " +
          'providers with `top_logprobs`), [] from a provider that gives none.',
      }),
    top_logprobs: z.number().int().min(0).max(20).nullable().optional(),
    store: z
      .literal(false, { error: 'chat completions are not stored; use the Responses or Conversations API for state' })
      .nullable()
      .optional(),
    response_format: z
      .discriminatedUnion('type', [
        z.object({ type: z.literal('text') }).strict(),
        z.object({ type: z.literal('json_object') }).strict(),
        z.object({ type: z.literal('json_schema'), json_schema: z.object(jsonSchemaFormat).strict() }).strict(),
      ])
      .optional(),
    prompt_cache_key: z.string().min(1).max(256).nullable().optional(),
    prompt_cache_retention: promptCacheRetentionSchema,
    prompt_cache_options: promptCacheOptionsSchema(['30m']),
  })
  .strict()
  .superRefine((body, context) => {
    // As OpenAI answers (null stands for a field not given): options of a stream need one.
    if (body.stream_options != null && body.stream !== true)
      context.addIssue({
        code: 'custom',
        path: ['stream_options'],
        message: "only allowed when 'stream' is enabled",
      });
    // The number of most likely tokens is asked with the log probabilities themselves.
    if (body.top_logprobs != null && body.logprobs !== true)
      context.addIssue({ code: 'custom', path: ['top_logprobs'], message: "needs 'logprobs' to be true" });
  })
  .meta({ id: 'OpenAIChatCompletionCreate' });
export type ChatCompletionCreateBody = z.infer<typeof chatCompletionCreateSchema>;
