import { z } from 'zod';

/**
 * The input items and content parts of the OpenAI-compatible API's requests (a response's `input`,
 * a conversation's `items`): the official shapes, restricted to what tailgate does.
 */

/**
 * A part's `prompt_cache_breakpoint` (the end of a reusable prompt prefix): advisory, not kept.
 * tailgate places its provider's cache breakpoint itself, at the end of the stable prefix
 * (lib/models/cache-breakpoints.ts), and OpenAI's caching of a Chat Completions prompt is automatic.
 */
const cacheBreakpoint = z
  .object({ mode: z.literal('explicit'), ttl: z.enum(['30m', '12h']).optional() })
  .strict()
  .nullable()
  .optional()
  .meta({ description: 'Advisory: tailgate places its cache breakpoint itself.' });

const textPart = z
  .object({
    type: z.enum(['input_text', 'output_text']),
    text: z.string(),
    annotations: z.array(z.unknown()).optional(),
    logprobs: z.array(z.unknown()).optional(),
    prompt_cache_breakpoint: cacheBreakpoint,
  })
  .strict();

/** A refusal of the model's in an assistant message sent back (history from OpenAI): its text. */
const refusalPart = z.object({ type: z.literal('refusal'), refusal: z.string() }).strict();

/**
 * A part's `file_id`: an upload of OpenAI's Files API, which tailgate has not, refused as a field
 * tailgate does not take (first in its part, so named before an `image_url` missing beside it).
 * Null (as a client serializing every field of a part sends it, and the Open Responses spec
 * allows) is no file.
 */
const noFileId = z.null({ error: 'unknown field' }).optional();

/**
 * An image: `image_url` (https or a base64 data: URL; checked and stored as in docs/API.md,
 * "Content parts"); a null `detail` is none.
 */
const imagePart = z
  .object({
    type: z.literal('input_image'),
    file_id: noFileId,
    image_url: z.string().min(1, 'an input_image needs `image_url` (https or data: URL); `file_id` is not supported'),
    detail: z.enum(['auto', 'low', 'high', 'original']).nullable().optional(),
    prompt_cache_breakpoint: cacheBreakpoint,
  })
  .strict();

/**
 * A file: `file_data` (base64) with `filename`, or `file_url`. Its `detail` (how OpenAI renders
 * a file's pages) is advisory, not kept: the provider gets the file as it takes files.
 */
const filePart = z
  .object({
    type: z.literal('input_file'),
    file_id: noFileId,
    file_data: z.string().optional(),
    filename: z.string().min(1).max(256).optional(),
    file_url: z.string().optional(),
    detail: z.enum(['auto', 'low', 'high']).nullable().optional().meta({ description: 'Advisory: not kept.' }),
    prompt_cache_breakpoint: cacheBreakpoint,
  })
  .strict()
  .refine((part) => (part.file_data === undefined) !== (part.file_url === undefined), {
    message: 'an input_file needs `file_data` (with `filename`) or `file_url`; `file_id` is not supported',
  });

const inputPart = z.discriminatedUnion('type', [textPart, imagePart, filePart, refusalPart]);

/** An input item's `id` and `status`: not kept (null, as the Open Responses spec allows, is none). */
const itemFields = {
  id: z.string().max(256).nullable().optional(),
  status: z.enum(['in_progress', 'completed', 'incomplete']).nullable().optional(),
};

/**
 * The `id` of an item whose ids begin `prefix`: OpenAI refuses another ("Expected an ID that
 * begins with 'msg'"), a message's `msg`, a function_call's `fc` (lib/openai/ids.ts issues such).
 */
function prefixedId(prefix: string, kind: string) {
  return z
    .string()
    .max(256)
    .regex(new RegExp(`^${prefix}_[A-Za-z0-9_-]+$`), {
      error: `${kind}'s id is "${prefix}_" then letters, digits, "_" or "-"`,
    })
    .nullable()
    .optional();
}

const messageInput = z
  .object({
    type: z.literal('message').optional(),
    role: z.enum(['user', 'assistant', 'system', 'developer']),
    content: z.union([z.string(), z.array(inputPart).min(1)], {
      error: 'must be a string or content parts (input_text, output_text, input_image, input_file, refusal)',
    }),
    ...itemFields,
    id: prefixedId('msg', 'a message'),
  })
  .strict();

const functionCallInput = z
  .object({
    type: z.literal('function_call'),
    call_id: z.string().min(1).max(256),
    name: z.string().min(1).max(256),
    arguments: z.string(),
    ...itemFields,
    id: prefixedId('fc', 'a function_call'),
  })
  .strict();

const functionCallOutputInput = z
  .object({
    type: z.literal('function_call_output'),
    call_id: z.string().min(1).max(256),
    output: z.union([z.string(), z.array(z.discriminatedUnion('type', [textPart, imagePart, filePart]))]),
    ...itemFields,
  })
  .strict();

/** A compaction item sent back (tailgate's carry the summary as plain text in `encrypted_content`). */
const compactionInput = z
  .object({
    type: z.literal('compaction'),
    encrypted_content: z.string().min(1).max(1_000_000),
    id: z.string().max(256).nullable().optional(),
    created_by: z.string().max(256).optional(),
  })
  .strict();

/**
 * A reasoning item sent back (a response's output resent as input): its summary and
 * `encrypted_content` go with the assistant message or function_call after it, as that item's
 * `reasoning` (lib/openai/request-input.ts, inputToItems); `content` is not kept.
 */
const reasoningInput = z
  .object({
    type: z.literal('reasoning'),
    // OpenAI refuses an id of another form ("Expected an ID that begins with 'rs'").
    id: z
      .string()
      .max(256)
      .regex(/^rs_[A-Za-z0-9_-]+$/, { error: 'a reasoning item\'s id is "rs_" then letters, digits, "_" or "-"' })
      .nullable()
      .optional(),
    summary: z.array(z.object({ type: z.literal('summary_text'), text: z.string() }).strict()).max(100),
    content: z
      .array(z.object({ type: z.literal('reasoning_text'), text: z.string() }).strict())
      .max(1000)
      .nullable()
      .optional(),
    encrypted_content: z.string().max(1_000_000).nullable().optional(),
    status: z.enum(['in_progress', 'completed', 'incomplete']).nullable().optional(),
  })
  .strict();

export const inputItems = [
  messageInput,
  functionCallInput,
  functionCallOutputInput,
  compactionInput,
  reasoningInput,
] as const;

/**
 * An input item of the given kinds. An item of another type (a built-in tool's call) is refused
 * naming its type, rather than with what each kind expected.
 */
export function inputItemSchema<const Options extends readonly [z.ZodType, ...z.ZodType[]]>(options: Options) {
  const types = ['message', 'function_call', 'function_call_output', 'compaction', 'reasoning'];
  if (options.length > inputItems.length) types.push('item_reference');
  return z.union(options, {
    error: (issue) => {
      const type = (issue.input as { type?: unknown } | null | undefined)?.type;
      if (typeof type !== 'string' || types.includes(type)) return undefined;
      return `input items of type ${JSON.stringify(type)} are not supported (tailgate takes ${types.join(', ')})`;
    },
  });
}

/**
 * A reference to a stored item (`msg_|fc_|fco_<conversation>_<seq>`), as the AI SDK sends a
 * stored response's output back (`store: true`, its default): a create replaces it with the item.
 */
export const itemReferenceInput = z
  .object({ type: z.literal('item_reference'), id: z.string().min(1).max(256) })
  .strict();

/** An input item or a reference to a stored one (lib/openai/item-references.ts resolves it). */
export const referableInputItemSchema = inputItemSchema([...inputItems, itemReferenceInput]);
