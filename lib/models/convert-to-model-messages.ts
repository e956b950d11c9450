import type { AssistantModelMessage, ModelMessage, ToolCallPart, ToolModelMessage, ToolResultPart } from 'ai';
import { md5Hex } from '../hash.ts';
import { answeredCalls, type PromptItem, type ReasoningItem } from '../items.ts';
import { makesBlock } from './cache-breakpoints.ts';
import type { Model } from './model.ts';
import {
  placeholderText,
  promptMedia,
  sentAsText,
  toolResultOutput,
  type UserMedia,
  type UserPart,
  userParts,
} from './media-parts.ts';
import { toolResultAfter } from './tool-media.ts';
import { loopReasoning, reasoningPart } from './reasoning-parts.ts';

/** Provider-specific options on a message or part, keyed by provider (`{ anthropic: {...} }`). */
export type ProviderOptions = NonNullable<ToolCallPart['providerOptions']>;

/** Marks one prompt item with provider options, e.g. Anthropic's `cacheControl` breakpoint. */
export interface PromptBreakpoint {
  /** Index into the prompt of the item that carries the options. */
  index: number;
  providerOptions: ProviderOptions;
}

export interface ConvertToModelMessagesOptions {
  breakpoints?: PromptBreakpoint[];
  /**
   * Whether the provider takes images and files in tool results (else text placeholders);
   * `after`: in a user message after the tool messages, which hold text only (Chat
   * Completions; lib/models/tool-media.ts).
   */
  toolResultMedia?: boolean | 'after';
  /** Whether the provider takes a file by its https URL (else a text placeholder). */
  fileUrls?: boolean;
  /** Whether the provider takes images only as their bytes and no files in messages (Workers AI). */
  imageBytesOnly?: boolean;
  /** The longest image side the provider takes (`Model.maxImageSide`); a larger image goes as a text placeholder. */
  maxImageSide?: number;
  /** The most bytes of an image the provider takes (`Model.maxImageBytes`); a larger one goes as a text placeholder. */
  maxImageBytes?: number;
  /** Whether the provider takes no image or file at all (`Model.textOnly`): each goes as a text placeholder. */
  textOnly?: boolean;
  /** The longest image side in a request with many images (`Model.manyImages`, `promptMedia`). */
  manyImages?: Model['manyImages'];
}

/** The output shown to the model for a call that has no function_call_output in the prompt. */
export const MISSING_OUTPUT_TEXT = '[no output was recorded for this tool call]';

/**
 * Converts a prepared prompt (`PromptItem[]`) into the AI SDK's `ModelMessage[]`, so every
 * provider adapter shares one pure, tested translation of the item model.
 *
 * - system and user messages map one to one; user and assistant content becomes a text part
 *   (so a part can carry provider options such as a cache breakpoint).
 * - consecutive assistant text and function_call items form one assistant message (text parts
 *   and `tool-call` parts); the function_call_output items after them form one `tool` message
 *   whose `tool-result` parts name the tool of the matching call.
 * - function_call `arguments` is JSON-parsed: an empty string becomes `{}`, and text that is not
 *   a JSON object is passed as `{ "_raw": "<the text>" }` (providers require an object).
 * - an output answers the latest call before it with its call_id, as a tool result only when it
 *   is among the outputs right after its call's assistant message (adjacentAnswers): providers
 *   take a result nowhere else.
 * - with `toolResultMedia: 'after'` (Chat Completions, whose tool messages are text only), the
 *   images and files of the tool results after an assistant message go in one user message
 *   after the last of them, each named by its call (lib/models/tool-media.ts); a run without
 *   any is sent as the text placeholders alone.
 * - a function_call with no output answering it there gets a synthetic result
 *   (`MISSING_OUTPUT_TEXT`) right after its assistant message: OpenAI and Anthropic reject a
 *   tool call that is not answered.
 * - any other function_call_output (no call before it, or answered later: a call may stay open
 *   for turns) becomes a user text message ("Output of tool call <call_id>:\n<output>"), since
 *   providers reject unmatched results; the prompt's prefix stays as it was before it came.
 * - a call_id is sent as a provider takes it (wireCallIds): cleaned of characters outside
 *   `[A-Za-z0-9_-]` and cut to 40 with a hash of the whole id when it is not one already, and
 *   under `<id>_<n>` when a call before it took the id (a session may use one again once its
 *   call is answered), since providers reject two tool calls with one id.
 * - a user or assistant message with nothing but whitespace in its text (and no image or file)
 *   is dropped (providers reject empty text blocks), and so is an empty text part.
 * - the `reasoning` of an assistant message or function_call after the prompt's last user
 *   message (the current tool loop; a notice the service delivers is not the user's;
 *   `loopReasoning`) goes as `reasoning` parts before the item's own, their provider options
 *   those each `encrypted_content` holds (lib/models/reasoning-parts.ts):
 *   Anthropic takes thinking in a call that continues a tool loop only with the thinking blocks
 *   of the loop's answers. Earlier reasoning is left out (the provider ignores a finished turn's
 *   thinking), so it costs nothing and the prompt before the last user message is sent the same
 *   way whatever follows. A blank assistant message's reasoning goes before the call or text
 *   of its answer after it (blank messages passed over), and is left out otherwise (the
 *   reasoning an answer ended with: an assistant message of only thinking is refused by
 *   Anthropic in places).
 *
 * Each of `options.breakpoints` attaches provider options to the part (or system message) made
 * from the item at its `index` (or, when that item makes no part (makesBlock), from the
 * nearest item before it).
 *
 * @example
 * convertToModelMessages([
 *   { type: 'message', role: 'user', content: 'list files' },
 *   { type: 'function_call', call_id: 'c1', name: 'ls', arguments: '{"path":"."}' },
 *   { type: 'function_call_output', call_id: 'c1', output: 'a.txt' },
 * ])
 * // [{ role: 'user', content: [{ type: 'text', text: 'list files' }] },
 * //  { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'ls', input: { path: '.' } }] },
 * //  { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'c1', toolName: 'ls',
 * //    output: { type: 'text', value: 'a.txt' } }] }]
 */
export function convertToModelMessages(
  items: PromptItem[],
  options: ConvertToModelMessagesOptions = {},
): ModelMessage[] {
  // Each output with the call it answers, by place; each call with the id it is sent under.
  const outputCall = adjacentAnswers(items);
  const answered = new Set(outputCall.values());
  const wireIds = wireCallIds(items);
  const reasoning = loopReasoning(items);
  const marked = new Map<number, ProviderOptions>();
  for (const breakpoint of options.breakpoints ?? []) {
    const index = effectiveBreakpoint(items, breakpoint.index);
    if (index !== undefined) marked.set(index, breakpoint.providerOptions);
  }

  const media = promptMedia(
    {
      toolResultMedia: options.toolResultMedia ?? true,
      fileUrls: options.fileUrls ?? true,
      imageBytesOnly: options.imageBytesOnly ?? false,
      textOnly: options.textOnly ?? false,
      ...(options.maxImageSide !== undefined ? { maxImageSide: options.maxImageSide } : {}),
      ...(options.maxImageBytes !== undefined ? { maxImageBytes: options.maxImageBytes } : {}),
    },
    options.manyImages,
    items,
    (index) => outputCall.has(index),
  );
  const { maxImageSide, maxImageBytes } = media;
  const limits = {
    ...(maxImageSide !== undefined ? { maxImageSide } : {}),
    ...(maxImageBytes ? { maxImageBytes } : {}),
  };
  const userMedia: UserMedia = {
    fileUrls: options.fileUrls ?? true,
    imageBytesOnly: options.imageBytesOnly ?? false,
    ...limits,
    ...(options.textOnly ? { textOnly: true } : {}),
  };
  // In a request with many images, which of an item's go as text is the prompt's (`promptMedia`).
  const manyImages = media.sizeKnown === true || media.oldestAsText !== undefined;
  const mediaAt = (item: PromptItem, index: number): UserMedia =>
    manyImages ? { ...userMedia, asText: sentAsText(media, item, () => outputCall.has(index)) } : userMedia;
  const messages: ModelMessage[] = [];
  let assistant: AssistantModelMessage | undefined;
  let tool: ToolModelMessage | undefined;
  let unanswered: ToolCallPart[] = [];
  // The images and files of the open run of tool results, sent after it (`toolResultMedia: 'after'`).
  let toolMedia: UserPart[] = [];

  const closeToolMedia = () => {
    if (toolMedia.length > 0) messages.push({ role: 'user', content: toolMedia });
    toolMedia = [];
  };

  const closeAssistant = () => {
    if (unanswered.length > 0) {
      messages.push({
        role: 'tool',
        content: unanswered.map((call) => ({
          type: 'tool-result' as const,
          toolCallId: call.toolCallId,
          toolName: call.toolName,
          output: { type: 'text' as const, value: MISSING_OUTPUT_TEXT },
        })),
      });
      unanswered = [];
    }
    assistant = undefined;
  };
  const openAssistant = (): AssistantModelMessage => {
    tool = undefined;
    closeToolMedia();
    if (!assistant) {
      assistant = { role: 'assistant', content: [] };
      messages.push(assistant);
    }
    return assistant;
  };

  items.forEach((item, index) => {
    const providerOptions = marked.get(index);
    const withOptions = providerOptions ? { providerOptions } : {};

    if (item.type === 'message') {
      // A message with no text but whitespace makes no part (providers refuse empty text blocks);
      // its reasoning still opens the answer when a call or text of that answer follows it.
      if (!makesBlock(item)) {
        if (reasoning.has(index)) pushReasoning(openAssistant(), reasoning.get(index));
        return;
      }
      if (item.role === 'assistant') {
        pushReasoning(openAssistant(), reasoning.get(index));
        pushPart(openAssistant(), { type: 'text', text: placeholderText(item.content, item.seq), ...withOptions });
        return;
      }
      closeAssistant();
      tool = undefined;
      closeToolMedia();
      if (item.role === 'system') {
        messages.push({ role: 'system', content: placeholderText(item.content, item.seq), ...withOptions });
      } else {
        messages.push({
          role: 'user',
          content: userParts(item.content, item.seq, withOptions, mediaAt(item, index)),
        });
      }
      return;
    }

    if (item.type === 'function_call') {
      const part: ToolCallPart = {
        type: 'tool-call',
        toolCallId: wireIds.get(index)!,
        toolName: item.name,
        input: parseArguments(item.arguments),
        ...withOptions,
      };
      pushReasoning(openAssistant(), reasoning.get(index));
      pushPart(openAssistant(), part);
      if (!answered.has(index)) unanswered.push(part);
      return;
    }

    const call = outputCall.get(index);
    closeAssistant();
    if (call === undefined) {
      tool = undefined;
      closeToolMedia();
      messages.push({
        role: 'user',
        content: userParts(
          typeof item.output === 'string'
            ? `Output of tool call ${item.call_id}:\n${item.output}`
            : [{ type: 'input_text', text: `Output of tool call ${item.call_id}:` }, ...item.output],
          item.seq,
          withOptions,
          mediaAt(item, index),
        ),
      });
      return;
    }
    const toolCallId = wireIds.get(call)!;
    let output: ToolResultPart['output'];
    if (options.toolResultMedia === 'after') {
      const after = toolResultAfter(item.output, item.seq, toolCallId, mediaAt(item, index));
      output = after.output;
      toolMedia.push(...after.parts);
    } else {
      const takesMedia = options.toolResultMedia !== false && !options.textOnly;
      output = toolResultOutput(item.output, item.seq, takesMedia, limits, mediaAt(item, index).asText);
    }
    const result: ToolResultPart = {
      type: 'tool-result',
      toolCallId,
      toolName: (items[call] as Extract<PromptItem, { type: 'function_call' }>).name,
      output,
      ...withOptions,
    };
    if (!tool) {
      tool = { role: 'tool', content: [] };
      messages.push(tool);
    }
    tool.content.push(result);
  });
  closeAssistant();
  closeToolMedia();
  return messages;
}

/**
 * Each output with the call it answers (answeredCalls), kept only when the output comes in the run of
 * outputs right after its call's assistant message: providers take a tool's result only there
 * (Chat Completions: tool messages right after the assistant message; Messages API: tool_result blocks
 * opening the next message). A later output goes as user text and its call gets MISSING_OUTPUT_TEXT,
 * which also keeps the prompt's prefix unchanged once the output comes.
 */
export function adjacentAnswers(items: readonly PromptItem[]): Map<number, number> {
  const answers = answeredCalls(items);
  const adjacent = new Map<number, number>();
  let calls = new Set<number>();
  let outputs = false;
  items.forEach((item, index) => {
    if (!makesBlock(item)) return;
    if (item.type === 'function_call' || (item.type === 'message' && item.role === 'assistant')) {
      if (outputs) calls = new Set();
      outputs = false;
      if (item.type === 'function_call') calls.add(index);
      return;
    }
    const call = item.type === 'function_call_output' ? answers.get(index) : undefined;
    if (call !== undefined && calls.has(call)) {
      adjacent.set(index, call);
      outputs = true;
      return;
    }
    calls = new Set();
    outputs = false;
  });
  return adjacent;
}

/** The breakpoint index moved back past items that produce no part (makesBlock). */
function effectiveBreakpoint(items: PromptItem[], index: number): number | undefined {
  let current = Math.min(index, items.length - 1);
  while (current >= 0) {
    const item = items[current]!;
    if (makesBlock(item)) return current;
    current--;
  }
  return undefined;
}

function pushPart(message: AssistantModelMessage, part: Exclude<AssistantModelMessage['content'], string>[number]) {
  (message.content as Exclude<AssistantModelMessage['content'], string>).push(part);
}

function pushReasoning(message: AssistantModelMessage, reasoning: readonly ReasoningItem[] | undefined): void {
  for (const item of reasoning ?? []) pushPart(message, reasoningPart(item));
}

/**
 * Parses function_call arguments for a provider: `{}` for an empty string, the object for JSON
 * object text, and `{ _raw: text }` for anything else (providers require an object).
 */
export function parseArguments(text: string): Record<string, unknown> {
  if (text.trim() === '') return {};
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // not JSON: passed through as _raw below
  }
  return { _raw: text };
}

/** The longest tool call id OpenAI's Chat Completions takes ("Expected a string with maximum length 40"). */
const WIRE_ID_CHARS = 40;
/** The tool_use ids the Messages API takes ("String should match pattern '^[a-zA-Z0-9_-]+$'"), within 40. */
const WIRE_ID = /^[A-Za-z0-9_-]{1,40}$/;

/**
 * A call_id every provider takes: as is when it does, else its characters outside [A-Za-z0-9_-]
 * replaced by `_` and cut, with a hash of the whole id (so two ids cut alike stay apart).
 */
function wireBase(callId: string): string {
  if (WIRE_ID.test(callId)) return callId;
  const tag = md5Hex(callId).slice(0, 8);
  return `${callId.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, WIRE_ID_CHARS - tag.length - 1)}_${tag}`;
}

/**
 * The id each call is sent under, by index: its call_id, or when a call before it was sent
 * under that (a stored session may use an id again once its call is answered), the first
 * `<id>_<n>` (n from 2) none was, since providers refuse a request holding two tool calls
 * with one id (Anthropic: "`tool_use` ids must be unique"), cut so that it keeps within
 * WIRE_ID_CHARS; `<id>` is wireBase of the call_id. A call's id depends
 * only on the items before it, so a prompt's prefix is sent the same way on every turn. The
 * outputs answering a call are sent under its id.
 */
function wireCallIds(items: readonly PromptItem[]): Map<number, string> {
  const wireIds = new Map<number, string>();
  const taken = new Set<string>();
  items.forEach((item, index) => {
    if (item.type !== 'function_call') return;
    const base = wireBase(item.call_id);
    let wireId = base;
    for (let n = 2; taken.has(wireId); n++) {
      const suffix = `_${n}`;
      wireId = `${base.slice(0, WIRE_ID_CHARS - suffix.length)}${suffix}`;
    }
    taken.add(wireId);
    wireIds.set(index, wireId);
  });
  return wireIds;
}
