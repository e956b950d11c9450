import { z } from 'zod';

/**
 * The Open Responses specification's response object, output items and streaming events, as
 * zod schemas written from its required fields and their types (the spec's ResponseResource,
 * ItemField, Usage, TextField, Reasoning, FunctionTool and *StreamingEvent components). Fields
 * the spec does not list are allowed (tailgate adds `tailgate`, `conversation`, `output_text`);
 * every field it requires must be there with its type, null only where the spec allows it.
 */

const integer = z.number().int();
const nullableString = z.string().nullable();

const outputText = z.object({
  type: z.literal('output_text'),
  text: z.string(),
  annotations: z.array(z.unknown()),
  logprobs: z.array(z.unknown()).optional(),
});
const itemStatus = z.enum(['in_progress', 'completed', 'incomplete']);

const message = z.object({
  type: z.literal('message'),
  id: z.string(),
  status: itemStatus,
  role: z.enum(['user', 'assistant', 'system', 'developer']),
  content: z.array(z.union([outputText, z.object({ type: z.literal('input_text'), text: z.string() })])),
});
const functionCall = z.object({
  type: z.literal('function_call'),
  id: z.string(),
  call_id: z.string(),
  name: z.string(),
  arguments: z.string(),
  status: itemStatus,
});
const functionCallOutput = z.object({
  type: z.literal('function_call_output'),
  id: z.string(),
  call_id: z.string(),
  output: z.union([z.string(), z.array(z.unknown())]),
  status: itemStatus,
});
const compaction = z.object({ type: z.literal('compaction'), id: z.string(), encrypted_content: z.string() });
const summaryText = z.object({ type: z.literal('summary_text'), text: z.string() });
// ReasoningBody: `encrypted_content` may be left out, never null.
const reasoningItem = z.object({
  type: z.literal('reasoning'),
  id: z.string(),
  summary: z.array(summaryText),
  content: z.array(z.unknown()).optional(),
  encrypted_content: z.string().optional(),
});

export const itemSchema = z.discriminatedUnion('type', [
  message,
  functionCall,
  functionCallOutput,
  reasoningItem,
  compaction,
]);

const functionTool = z.object({
  type: z.literal('function'),
  name: z.string(),
  description: nullableString,
  parameters: z.record(z.string(), z.unknown()).nullable(),
  strict: z.boolean().nullable(),
});

const toolChoice = z.union([
  z.enum(['none', 'auto', 'required']),
  z.object({ type: z.literal('function'), name: z.string().optional() }),
  z.object({
    type: z.literal('allowed_tools'),
    tools: z.array(z.unknown()),
    mode: z.enum(['none', 'auto', 'required']),
  }),
]);

const textField = z.object({
  format: z.discriminatedUnion('type', [
    z.object({ type: z.literal('text') }),
    z.object({ type: z.literal('json_object') }),
    z.object({
      type: z.literal('json_schema'),
      name: z.string(),
      description: nullableString,
      // The spec types `schema` as null (see docs/OPENAI.md): any JSON Schema object is taken here.
      schema: z.unknown(),
      strict: z.boolean(),
    }),
  ]),
  verbosity: z.enum(['low', 'medium', 'high']).optional(),
});

const reasoning = z.object({
  effort: z.enum(['none', 'minimal', 'low', 'medium', 'high', 'xhigh']).nullable(),
  summary: z.enum(['concise', 'detailed', 'auto']).nullable(),
});

const usage = z.object({
  input_tokens: integer,
  output_tokens: integer,
  total_tokens: integer,
  input_tokens_details: z.object({ cached_tokens: integer }),
  output_tokens_details: z.object({ reasoning_tokens: integer }),
});

export const responseSchema = z.object({
  id: z.string(),
  object: z.literal('response'),
  created_at: integer,
  completed_at: integer.nullable(),
  status: z.string(),
  incomplete_details: z.object({ reason: z.string() }).nullable(),
  model: z.string(),
  previous_response_id: nullableString,
  instructions: nullableString,
  output: z.array(itemSchema),
  error: z.object({ code: z.string(), message: z.string() }).nullable(),
  tools: z.array(functionTool),
  tool_choice: toolChoice,
  truncation: z.enum(['auto', 'disabled']),
  parallel_tool_calls: z.boolean(),
  text: textField,
  top_p: z.number(),
  presence_penalty: z.number(),
  frequency_penalty: z.number(),
  top_logprobs: integer,
  temperature: z.number(),
  reasoning: reasoning.nullable(),
  user: nullableString,
  usage: usage.nullable(),
  max_output_tokens: integer.nullable(),
  max_tool_calls: integer.nullable(),
  store: z.boolean(),
  background: z.boolean(),
  service_tier: z.string(),
  metadata: z.unknown().refine((value) => value !== undefined, 'required'),
  safety_identifier: nullableString,
  prompt_cache_key: nullableString,
});

const event = <Type extends string, Shape extends z.ZodRawShape>(type: Type, shape: Shape) =>
  z.object({ type: z.literal(type), sequence_number: integer, ...shape });
const snapshot = { response: responseSchema };
const itemEvent = { output_index: integer, item: itemSchema.nullable() };
const partEvent = { item_id: z.string(), output_index: integer, content_index: integer };
const summaryEvent = { item_id: z.string(), output_index: integer, summary_index: integer };

export const streamingEventSchema = z.discriminatedUnion('type', [
  event('response.created', snapshot),
  event('response.queued', snapshot),
  event('response.in_progress', snapshot),
  event('response.completed', snapshot),
  event('response.failed', snapshot),
  event('response.incomplete', snapshot),
  event('response.output_item.added', itemEvent),
  event('response.output_item.done', itemEvent),
  event('response.content_part.added', { ...partEvent, part: outputText }),
  event('response.content_part.done', { ...partEvent, part: outputText }),
  event('response.output_text.delta', { ...partEvent, delta: z.string() }),
  event('response.output_text.done', { ...partEvent, text: z.string() }),
  event('response.reasoning_summary_part.added', { ...summaryEvent, part: summaryText }),
  event('response.reasoning_summary_part.done', { ...summaryEvent, part: summaryText }),
  event('response.reasoning_summary_text.delta', { ...summaryEvent, delta: z.string() }),
  event('response.reasoning_summary_text.done', { ...summaryEvent, text: z.string() }),
  event('response.function_call_arguments.delta', {
    item_id: z.string(),
    output_index: integer,
    delta: z.string(),
  }),
  event('response.function_call_arguments.done', {
    item_id: z.string(),
    output_index: integer,
    arguments: z.string(),
  }),
  event('error', {
    error: z.object({ type: z.string(), code: nullableString, message: z.string(), param: nullableString }),
  }),
]);

/** Every problem of `value` against `schema`, as `path: message` lines (none: it conforms). */
export function specProblems(schema: z.ZodType, value: unknown): string[] {
  const result = schema.safeParse(value);
  return result.success ? [] : result.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
}
