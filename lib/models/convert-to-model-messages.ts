import type { AssistantModelMessage, ModelMessage, ToolCallPart, ToolModelMessage, ToolResultPart } from 'ai';
import { contentText } from '../content.ts';
import { answeredCalls, type PromptItem } from '../items.ts';
import { toolResultOutput, userParts } from './media-parts.ts';

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
  /** Whether the provider takes images and files in tool results (else text placeholders). */
  toolResultMedia?: boolean;
  /** Whether the provider takes a file by its https URL (else a text placeholder). */
  fileUrls?: boolean;
  /** Counts the images and files sent as text placeholders. */
  placeholders?: { count: number };
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
 * - a function_call with no output after it in the prompt gets a synthetic result
 *   (`MISSING_OUTPUT_TEXT`) right after its assistant message: OpenAI and Anthropic reject a
 *   tool call that is not answered.
 * - a function_call_output with no call before it in the prompt becomes a user text message
 *   ("Output of tool call <call_id>:\n<output>"), since providers reject unmatched results.
 * - an output answers the latest call before it with its call_id; a call_id that comes again
 *   (a session may use one again once its call is answered) is sent, with its outputs, under
 *   `<call_id>_<n>` (wireCallIds), since providers reject two tool calls with one id.
 * - an assistant message with empty content is dropped (providers reject empty text blocks).
 *
 * Each of `options.breakpoints` attaches provider options to the part (or system message) made
 * from the item at its `index` (or, when that item is a dropped empty assistant message, from the
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
  const outputCall = answeredCalls(items);
  const answered = new Set(outputCall.values());
  const wireIds = wireCallIds(items);
  const marked = new Map<number, ProviderOptions>();
  for (const breakpoint of options.breakpoints ?? []) {
    const index = effectiveBreakpoint(items, breakpoint.index);
    if (index !== undefined) marked.set(index, breakpoint.providerOptions);
  }

  const placeholders = options.placeholders ?? { count: 0 };
  const fileUrls = options.fileUrls ?? true;
  const messages: ModelMessage[] = [];
  let assistant: AssistantModelMessage | undefined;
  let tool: ToolModelMessage | undefined;
  let unanswered: ToolCallPart[] = [];

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
      if (item.role === 'assistant') {
        if (item.content === '') return;
        pushPart(openAssistant(), { type: 'text', text: contentText(item.content), ...withOptions });
        return;
      }
      closeAssistant();
      tool = undefined;
      if (item.role === 'system') {
        messages.push({ role: 'system', content: contentText(item.content), ...withOptions });
      } else {
        messages.push({ role: 'user', content: userParts(item.content, withOptions, fileUrls) });
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
      pushPart(openAssistant(), part);
      if (!answered.has(index)) unanswered.push(part);
      return;
    }

    const call = outputCall.get(index);
    closeAssistant();
    if (call === undefined) {
      tool = undefined;
      messages.push({
        role: 'user',
        content: userParts(
          typeof item.output === 'string'
            ? `Output of tool call ${item.call_id}:\n${item.output}`
            : [{ type: 'input_text', text: `Output of tool call ${item.call_id}:` }, ...item.output],
          withOptions,
          fileUrls,
        ),
      });
      return;
    }
    const result: ToolResultPart = {
      type: 'tool-result',
      toolCallId: wireIds.get(call)!,
      toolName: (items[call] as Extract<PromptItem, { type: 'function_call' }>).name,
      output: toolResultOutput(item.output, options.toolResultMedia ?? true, placeholders),
      ...withOptions,
    };
    if (!tool) {
      tool = { role: 'tool', content: [] };
      messages.push(tool);
    }
    tool.content.push(result);
  });
  closeAssistant();
  return messages;
}

/** The breakpoint index moved back past items that produce no part (empty assistant messages). */
function effectiveBreakpoint(items: PromptItem[], index: number): number | undefined {
  let current = Math.min(index, items.length - 1);
  while (current >= 0) {
    const item = items[current]!;
    if (!(item.type === 'message' && item.role === 'assistant' && item.content === '')) return current;
    current--;
  }
  return undefined;
}

function pushPart(message: AssistantModelMessage, part: Exclude<AssistantModelMessage['content'], string>[number]) {
  (message.content as Exclude<AssistantModelMessage['content'], string>).push(part);
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

/**
 * The id each call is sent under, by index: its call_id, or when a call before it was sent
 * under that (a stored session may use an id again once its call is answered), the first
 * `<call_id>_<n>` (n from 2) none was, since providers refuse a request holding two tool calls
 * with one id (Anthropic: "`tool_use` ids must be unique"); the call_id is cut so that the id
 * keeps within WIRE_ID_CHARS, or the call_id's own length when longer. A call's id depends
 * only on the items before it, so a prompt's prefix is sent the same way on every turn. The
 * outputs answering a call are sent under its id.
 */
function wireCallIds(items: readonly PromptItem[]): Map<number, string> {
  const wireIds = new Map<number, string>();
  const taken = new Set<string>();
  items.forEach((item, index) => {
    if (item.type !== 'function_call') return;
    let wireId = item.call_id;
    for (let n = 2; taken.has(wireId); n++) {
      const suffix = `_${n}`;
      wireId = `${item.call_id.slice(0, Math.max(item.call_id.length, WIRE_ID_CHARS) - suffix.length)}${suffix}`;
    }
    taken.add(wireId);
    wireIds.set(index, wireId);
  });
  return wireIds;
}
