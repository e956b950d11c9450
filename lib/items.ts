import { z } from 'zod';
import { contentSchema, contentText } from './content.ts';

/**
 * The item model: OpenAI Responses item shapes (docs/API.md, "Items"), shared by every layer.
 *
 * - `Item`: what a client sends (input) and what a model returns (output).
 * - `StoredItem`: an item in the session log, with its dense 1-based `seq` and `created_at`.
 * - `PromptItem`: an item in a prompt view. It may be compacted, synthetic (inserted by the
 *   service, no `seq`), pending (a notice shown by the preview), or carry an `output_ref`
 *   when its output lives out of line (see below).
 */

export const idSchema = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must match ^[A-Za-z0-9_-]{1,64}$');

/**
 * A model's reasoning, in the Responses shape (OpenAI's `reasoning` item, without an id): its
 * text as summary parts, and the provider's opaque payload (`encrypted_content`: the AI SDK's
 * provider metadata of the reasoning, as JSON: Anthropic's thinking signature or redacted data),
 * which goes back to the provider unchanged (lib/models/reasoning-parts.ts).
 */
export const reasoningItemSchema = z
  .object({
    type: z.literal('reasoning'),
    summary: z.array(z.object({ type: z.literal('summary_text'), text: z.string() }).strict()).max(100),
    encrypted_content: z.string().optional(),
  })
  .strict();

/**
 * The reasoning a model answered with right before an item, kept on that item (an assistant
 * message or a function_call; reasoning with no item after it on an empty assistant message,
 * lib/models/stream-order.ts): what the provider asks back within a tool loop.
 */
const reasoningField = z.array(reasoningItemSchema).min(1).max(100).optional();

export const messageItemSchema = z
  .object({
    type: z.literal('message'),
    role: z.enum(['system', 'user', 'assistant']),
    /** A string, or content parts (lib/content.ts). */
    content: contentSchema,
    /** An assistant message's: the reasoning that came right before it. */
    reasoning: reasoningField,
  })
  .strict();

export const functionCallItemSchema = z
  .object({
    type: z.literal('function_call'),
    call_id: z.string().min(1).max(256),
    name: z.string().min(1).max(256),
    arguments: z.string(),
    /** The reasoning that came right before the call. */
    reasoning: reasoningField,
  })
  .strict();

export const functionCallOutputItemSchema = z
  .object({
    type: z.literal('function_call_output'),
    call_id: z.string().min(1).max(256),
    /** A string, or content parts (lib/content.ts): screenshots come back this way. */
    output: contentSchema,
  })
  .strict();

export const itemSchema = z.discriminatedUnion('type', [
  messageItemSchema,
  functionCallItemSchema,
  functionCallOutputItemSchema,
]);

/**
 * An item a client sends (turn input, POST /items): a message is the user's or the
 * assistant's. `system` is refused: the session's `instructions` are its system prompt, and
 * only the service puts system messages into a prompt. Stored items keep `itemSchema`, so
 * older data holding one still reads.
 */
export const clientItemSchema = z.discriminatedUnion('type', [
  messageItemSchema
    .extend({
      role: z.enum(['user', 'assistant'], {
        error: 'must be "user" or "assistant" (system instructions are the session\'s `instructions`)',
      }),
    })
    .refine((item) => item.reasoning === undefined || item.role === 'assistant', {
      path: ['reasoning'],
      message: "only an assistant message carries the model's reasoning",
    }),
  functionCallItemSchema,
  functionCallOutputItemSchema,
]);

/**
 * Items that clientItemSchema's parse (or itemSchema's) gave, as a route's request body holds
 * them: lib/session/log/append.ts and a turn's claim (lib/session/log/claim-input.ts) do not
 * check them again. Only the object a parse returned is
 * marked; an item rewritten since (one whose attachments were stored, lib/session/attachments.ts,
 * is a new object) is not, and is checked.
 */
const parsedItems = new WeakSet<object>();

/** Marks `items`, each just returned by clientItemSchema's or itemSchema's parse (see parsedItems). */
export function markParsedItems<T extends Item[]>(items: T): T {
  for (const item of items) parsedItems.add(item);
  return items;
}

/** Whether `items` is not empty and each of them is marked by markParsedItems. */
export function allParsedItems(items: readonly Item[]): boolean {
  return items.length > 0 && items.every((item) => parsedItems.has(item));
}

export type MessageItem = z.infer<typeof messageItemSchema>;
export type FunctionCallItem = z.infer<typeof functionCallItemSchema>;
export type FunctionCallOutputItem = z.infer<typeof functionCallOutputItemSchema>;
export type ReasoningItem = z.infer<typeof reasoningItemSchema>;
export type Item = z.infer<typeof itemSchema>;
/** An item a client may send (no system message). */
export type ClientItem = z.infer<typeof clientItemSchema>;

const storedFields = {
  seq: z.number().int().positive(),
  created_at: z.string(),
};

/**
 * Set on the item a model's answer stopped in (its output token limit, or the provider's content
 * filter): the last item of its turn's output, when the model ended it (a call it never ended is
 * left out, and then no item is). Absent on every other item, and on those stored before it existed.
 */
export const cutFields = { incomplete: z.literal(true).optional() };

/** An item a turn stores as its output: itemSchema's, `incomplete` on the one its answer stopped in. */
export const outputItemSchema = z.discriminatedUnion('type', [
  messageItemSchema.extend(cutFields),
  functionCallItemSchema.extend(cutFields),
  functionCallOutputItemSchema,
]);

export const storedItemSchema = z.discriminatedUnion('type', [
  messageItemSchema.extend({ ...storedFields, ...cutFields }),
  functionCallItemSchema.extend({ ...storedFields, ...cutFields }),
  functionCallOutputItemSchema.extend(storedFields),
]);
export type StoredItem = z.infer<typeof storedItemSchema>;

/**
 * What a stored record keeps of a payload that lives out of line (under `blob/<sha256>`):
 * enough to compact it (length, MD5, head and tail) without fetching it.
 * `head` and `tail` hold at least `PREVIEW_CHARS` characters each (all of it when shorter).
 */
export const payloadRefSchema = z
  .object({
    sha256: z.string().regex(/^[0-9a-f]{64}$/),
    md5: z.string().regex(/^[0-9a-f]{32}$/),
    length: z.number().int().nonnegative(),
    head: z.string(),
    tail: z.string(),
  })
  .strict();
export type PayloadRef = z.infer<typeof payloadRefSchema>;

/** Characters of head and tail a payload preview keeps: enough for any compacted form. */
export const PREVIEW_CHARS = 256;

/** `summary`: the summary that opens a compacted context (lib/compaction/). */
export type Synthetic = 'context_notice' | 'inbox' | 'summary';

interface PromptFields {
  seq?: number | undefined;
  created_at?: string | undefined;
  /** The content was shortened by a strategy. */
  compacted?: true | undefined;
  /** Inserted by the service; such items have no seq. */
  synthetic?: Synthetic | undefined;
  /** A notice shown by the prompt preview that a real turn would deliver. */
  pending?: true | undefined;
}

export type PromptMessageItem = MessageItem & PromptFields;
export type PromptFunctionCallItem = FunctionCallItem & PromptFields;
/**
 * When `output_ref` is set, the output lives out of line: `output` is '' until the turn
 * fetches it for an item the strategies kept whole. Strategies compact from the ref alone.
 */
export type PromptFunctionCallOutputItem = FunctionCallOutputItem &
  PromptFields & {
    output_ref?: PayloadRef | undefined;
  };
export type PromptItem = PromptMessageItem | PromptFunctionCallItem | PromptFunctionCallOutputItem;

/**
 * Whether what a prompt item says to a model is frozen: the item, its content or output (and
 * output_ref), and their parts (the view and record caches freeze what they share between
 * requests). Values derived from such an item alone may be kept under it (a WeakMap) for as
 * long as it lives.
 */
export function unchanging(item: PromptItem): boolean {
  if (!Object.isFrozen(item)) return false;
  if (item.type === 'function_call_output' && item.output_ref && !Object.isFrozen(item.output_ref)) return false;
  const payload = item.type === 'message' ? item.content : item.type === 'function_call_output' ? item.output : '';
  return typeof payload === 'string' || (Object.isFrozen(payload) && payload.every((part) => Object.isFrozen(part)));
}

export function isToolItem(item: PromptItem): item is PromptFunctionCallItem | PromptFunctionCallOutputItem {
  return item.type === 'function_call' || item.type === 'function_call_output';
}

/**
 * For each function_call_output of `items`, by index, the index of the call it answers: the
 * latest function_call before it with its call_id (a call_id may come again once its call is
 * answered). An output with no such call has no entry.
 *
 * @example answeredCalls([call c, output c, call c, output c]) // Map { 1 => 0, 3 => 2 }
 */
export function answeredCalls(items: readonly PromptItem[]): Map<number, number> {
  const answered = new Map<number, number>();
  const latestCall = new Map<string, number>();
  items.forEach((item, index) => {
    if (item.type === 'function_call') latestCall.set(item.call_id, index);
    else if (item.type === 'function_call_output') {
      const call = latestCall.get(item.call_id);
      if (call !== undefined) answered.set(index, call);
    }
  });
  return answered;
}

/**
 * The index of a prompt's last user message that is not the service's (a summary or a notice it
 * delivers), -1 when none: the items after it are the current tool loop, whose reasoning goes to
 * the provider (lib/models/reasoning-parts.ts, `loopReasoning`).
 */
export function loopStart(items: readonly PromptItem[]): number {
  return items.findLastIndex((item) => item.type === 'message' && item.role === 'user' && item.synthetic === undefined);
}

/** A reasoning item's text: its summary parts joined. */
export function reasoningText(item: ReasoningItem): string {
  return item.summary.map((part) => part.text).join('');
}

/** The length in characters of an output, whether inline or out of line. */
export function outputLength(item: PromptFunctionCallOutputItem): number {
  return item.output_ref ? item.output_ref.length : contentText(item.output).length;
}

/**
 * Why a string may not be stored, or undefined when it may: text holding NUL (U+0000) or a
 * lone surrogate (not valid Unicode, so not valid UTF-8 in storage or for a provider).
 *
 * @example textProblem('a\u0000b') // 'contains NUL (U+0000)'
 */
export function textProblem(text: string): string | undefined {
  if (text.includes('\u0000')) return 'contains NUL (U+0000)';
  if (!isWellFormed(text)) return 'contains a lone surrogate (not valid Unicode)';
  return undefined;
}

const nativeIsWellFormed = (String.prototype as { isWellFormed?: (this: string) => boolean }).isWellFormed;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function isWellFormed(text: string): boolean {
  return nativeIsWellFormed ? nativeIsWellFormed.call(text) : !LONE_SURROGATE.test(text);
}

/** A client-side tool offered to the model (docs/API.md, "Sessions"). */
export const toolSchema = z
  .object({
    type: z.literal('function'),
    name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must match ^[A-Za-z0-9_-]{1,64}$'),
    description: z.string().max(4096).optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
    /** Calls must match `parameters` exactly (the provider's strict mode, where it has one). */
    strict: z.boolean().optional(),
  })
  .strict();
export type Tool = z.infer<typeof toolSchema>;

/**
 * A refinement of a tool list refusing a name given twice (a provider refuses such a request),
 * the issue at `[index, ...namePath]`. `nameOf` reads a tool's name (OpenAI's shapes nest it).
 */
export function toolNamesOnce<T>(nameOf: (tool: T) => string, namePath: readonly string[] = ['name']) {
  return (tools: readonly T[], context: z.RefinementCtx): void => {
    const seen = new Set<string>();
    for (const [index, tool] of tools.entries()) {
      const name = nameOf(tool);
      if (seen.has(name))
        context.addIssue({ code: 'custom', path: [index, ...namePath], message: `${name} is offered twice` });
      seen.add(name);
    }
  };
}

/**
 * A tool's `parameters` as a request sends them: a JSON Schema of type "object", the only kind
 * OpenAI and Anthropic take (either refuses the turn's request otherwise), or `{}`, a tool that
 * takes no arguments, offered as EMPTY_PARAMETERS (lib/models/convert-to-tool-set.ts).
 */
export const toolParametersSchema = z.record(z.string(), z.unknown()).superRefine((schema, context) => {
  if (schema.type === 'object' || Object.keys(schema).length === 0) return;
  const got = JSON.stringify(schema.type ?? null);
  context.addIssue({
    code: 'custom',
    message: `must be a JSON Schema of type "object" (got type ${got}), as providers require`,
  });
});

/**
 * The tools a session or a turn offers: at most 512, each name once (a provider refuses a name
 * given twice), parameters an object schema. Stored tools are read with toolSchema alone.
 */
export const toolListSchema = z
  .array(toolSchema.extend({ parameters: toolParametersSchema.optional() }))
  .max(512)
  .superRefine(toolNamesOnce((tool) => tool.name));
