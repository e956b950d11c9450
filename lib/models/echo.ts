import { sha256Hex } from '../hash.ts';
import { ModelTimeoutError } from './errors.ts';
import { type Content, contentText, describePart, mediaParts } from '../content.ts';
import { outputLength, type PromptItem, type PromptMessageItem } from '../items.ts';
import { imageSize, sniffMediaType } from '../media.ts';
import { jsonExample } from './json-example.ts';
import type { JsonSchema, Model, ModelOutputItem, ModelRequest, ModelResult, ModelStreamEvent } from './model.ts';

export const ECHO_MODEL_ID = 'echo';

const CALL_PATTERN = /^call ([A-Za-z0-9_-]{1,64})(?:\s+([\s\S]*))?$/;
const WAIT_PATTERN = /^wait (\d+)(?:\s+([\s\S]*))?$/;

/** The longest a `wait <milliseconds> <text>` message makes the echo model take (ms); a longer one waits this long. */
export const ECHO_MAX_WAIT_MS = 60_000;

/**
 * The offline, deterministic model. It serves local runs (`npm start`) and tests.
 *
 * - Text: it replies `"echo: " + <text of the last user message>` ("echo: " when there is
 *   none), followed by a description of each image and file the prompt holds, read from the
 *   bytes it received (`[image/png 1280x800, 142 KB]`) or naming its https URL (`[image https://…]`).
 * - Tool calls: when the last user message is exactly `call <tool_name> <json-arguments>`
 *   (arguments optional, default `{}`; they must be a JSON object), the tool is offered in
 *   `request.tools`, and no function_call follows that user message yet, it returns one
 *   function_call item instead of text: `{call_id: "call_" + first 12 hex of
 *   sha256("<prompt length>:<name>:<arguments>"), name, arguments}`. Once the call is in the
 *   prompt (the client answered it), it replies with text again, so a tool loop ends.
 * - Usage: input_tokens = ceil(characters of the prompt / 4), counting message content, call
 *   names and arguments, and outputs (an out-of-line output counts its full length);
 *   output_tokens = ceil(characters of the reply / 4) (name plus arguments for a call).
 * - Forced tools: `toolChoice` `{name}` (or `required`: the first tool offered, and allowed)
 *   calls that tool when the last user message asks for no call and no call follows it yet,
 *   its arguments a value of its parameters' schema (./json-example.ts).
 * - Settings: `toolChoice: "none"` makes no call, nor does a tool `allowedTools` leaves out;
 *   a `json_object` response format makes the reply `{"echo": <the text reply>}`, a `json_schema`
 *   one a value that validates against the schema (./json-example.ts), so structured output is
 *   testable offline. A text reply longer than `maxOutputTokens` (4 characters a token) is cut
 *   to it and reported `incomplete: "max_output_tokens"`, as a provider's stopped at its limit
 *   (a call is not cut).
 * - Slow answers: when the last user message is `wait <milliseconds> <text>` (`<text>` optional),
 *   it answers as it would for `<text>` (text, call, forced call and format alike) only after
 *   that many milliseconds (at most `ECHO_MAX_WAIT_MS`, 60 000: a longer wait is cut to it), so
 *   busy sessions (`on_busy`, the queue, background turns, cancels) can be tried offline. The
 *   usage counts the prompt as it is (`wait ...` included). The request's abort signal ends the
 *   wait at once with ModelTimeoutError, as a provider call is aborted; stream() sends nothing
 *   before the wait ends.
 * - stream() yields the reply word by word as text_delta events, then item_done, then done.
 *
 * @example
 * await echoModel.generate({ prompt: [{ type: 'message', role: 'user', content: 'hi' }], tools: [] })
 * // { output: [{ type: 'message', role: 'assistant', content: 'echo: hi' }],
 * //   usage: { input_tokens: 1, output_tokens: 2 } }
 */
export function createEchoModel(): Model {
  return {
    id: ECHO_MODEL_ID,
    toolResultMedia: true,
    fileUrls: true,
    assistantMedia: true,
    allowsTools: true,
    async generate(request: ModelRequest): Promise<ModelResult> {
      const { result, waitMs } = echo(request);
      await waited(waitMs, request.signal);
      return result;
    },
    async *stream(request: ModelRequest): AsyncIterable<ModelStreamEvent> {
      const { result, deltas, waitMs } = echo(request);
      await waited(waitMs, request.signal);
      for (const delta of deltas) yield { type: 'text_delta', delta };
      for (const item of result.output) yield { type: 'item_done', item };
      yield { type: 'done', result };
    },
  };
}

/** The shared echo model instance (it holds no state). */
export const echoModel: Model = createEchoModel();

/** The answer to `request` and how long to wait before giving it (ms, 0 for at once). */
function echo(request: ModelRequest): { result: ModelResult; deltas: string[]; waitMs: number } {
  if (request.signal?.aborted) throw new ModelTimeoutError('the model call was aborted before it started');
  const { prompt } = request;
  const input_tokens = Math.ceil(promptCharacters(prompt) / 4);

  const lastUserIndex = prompt.findLastIndex((item) => item.type === 'message' && item.role === 'user');
  const lastText = lastUserIndex >= 0 ? textParts((prompt[lastUserIndex] as PromptMessageItem).content) : '';
  const { waitMs, text: lastUser } = asked(lastText);
  const alreadyCalled = prompt.slice(lastUserIndex + 1).some((item) => item.type === 'function_call');

  const call =
    alreadyCalled || request.settings?.toolChoice === 'none'
      ? undefined
      : (parseCall(lastUser, request) ?? forcedCall(lastUser, request));
  if (call) {
    const item: ModelOutputItem = {
      type: 'function_call',
      call_id: `call_${sha256Hex(`${prompt.length}:${call.name}:${call.arguments}`).slice(0, 12)}`,
      name: call.name,
      arguments: call.arguments,
    };
    const output_tokens = Math.ceil((call.name.length + call.arguments.length) / 4);
    return { result: { output: [item], usage: { input_tokens, output_tokens } }, deltas: [], waitMs };
  }

  const seen = receivedMedia(prompt);
  const full = formatted(`echo: ${lastUser}${seen ? ` ${seen}` : ''}`, request.settings?.responseFormat);
  const reply = withinTokens(full, request.maxOutputTokens);
  const cut = reply.length < full.length;
  const item: ModelOutputItem = {
    type: 'message',
    role: 'assistant',
    content: reply,
    ...(cut ? { incomplete: true } : {}),
  };
  const usage = { input_tokens, output_tokens: Math.ceil(reply.length / 4) };
  return {
    result: { output: [item], usage, ...(cut ? { incomplete: 'max_output_tokens' } : {}) },
    deltas: reply.match(/\s*\S+\s*|\s+/g) ?? [],
    waitMs,
  };
}

/** What the last user message asks: a wait (`wait <milliseconds> <text>`, bounded) and the text to answer. */
function asked(text: string): { waitMs: number; text: string } {
  const match = WAIT_PATTERN.exec(text);
  if (!match) return { waitMs: 0, text };
  return { waitMs: Math.min(Number(match[1]), ECHO_MAX_WAIT_MS), text: match[2] ?? '' };
}

/** Resolves after `ms` (at once for 0), or rejects with ModelTimeoutError as soon as `signal` aborts. */
function waited(ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (ms <= 0) return Promise.resolve();
  const aborted = () => new ModelTimeoutError(`model ${ECHO_MODEL_ID} call was aborted`, { model: ECHO_MODEL_ID });
  if (signal?.aborted) return Promise.reject(aborted());
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(aborted());
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** `text` cut to `maxTokens` tokens of 4 characters (a surrogate pair kept whole), as a provider stops at its limit. */
function withinTokens(text: string, maxTokens: number | undefined): string {
  if (maxTokens === undefined || text.length <= maxTokens * 4) return text;
  const cut = text.slice(0, maxTokens * 4);
  return /[\uD800-\uDBFF]$/.test(cut) ? cut.slice(0, -1) : cut;
}

/** The reply in the asked response format: JSON for structured output, else the text. */
function formatted(text: string, format: NonNullable<ModelRequest['settings']>['responseFormat']): string {
  if (format === undefined) return text;
  return JSON.stringify(format.type === 'json_object' ? { echo: text } : jsonExample(format.schema, text));
}

function parseCall(text: string, request: ModelRequest): { name: string; arguments: string } | undefined {
  const match = CALL_PATTERN.exec(text);
  if (!match) return undefined;
  const name = match[1]!;
  const argumentsText = match[2]?.trim() || '{}';
  if (!request.tools.some((tool) => tool.name === name)) return undefined;
  if (request.settings?.allowedTools && !request.settings.allowedTools.includes(name)) return undefined;
  const choice = request.settings?.toolChoice;
  if (typeof choice === 'object' && choice.name !== name) return undefined;
  try {
    const value: unknown = JSON.parse(argumentsText);
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  } catch {
    return undefined;
  }
  return { name, arguments: argumentsText };
}

/**
 * The call a forced tool choice makes when the message asked for none: the named tool, or for
 * `required` the first tool offered (and allowed), with arguments its schema takes.
 */
function forcedCall(text: string, request: ModelRequest): { name: string; arguments: string } | undefined {
  const choice = request.settings?.toolChoice;
  if (choice === undefined || choice === 'auto' || choice === 'none') return undefined;
  const allowed = request.settings?.allowedTools;
  const tool = request.tools.find((candidate) =>
    choice === 'required' ? !allowed || allowed.includes(candidate.name) : candidate.name === choice.name,
  );
  if (!tool) return undefined;
  const value = jsonExample((tool.parameters ?? {}) as JsonSchema, text);
  const object = typeof value === 'object' && value !== null && !Array.isArray(value) ? value : {};
  return { name: tool.name, arguments: JSON.stringify(object) };
}

function textParts(content: Content): string {
  if (typeof content === 'string') return content;
  return content.flatMap((part) => (part.type === 'input_text' ? [part.text] : [])).join('\n');
}

/**
 * The images and files the model received, in prompt order, each described from the bytes it
 * got (`[image/png 1280x800, 142 KB]`) or its URL.
 */
function receivedMedia(prompt: PromptItem[]): string {
  const parts = prompt.flatMap((item) =>
    mediaParts(item.type === 'message' ? item.content : item.type === 'function_call_output' ? item.output : ''),
  );
  return parts
    .map((part) => {
      if (!part.data) return describePart(part);
      const measured = { blob: '', media_type: sniffMediaType(part.data), bytes: part.data.length };
      return describePart({ ...part, ...measured, ...imageSize(part.data) });
    })
    .join(' ');
}

function promptCharacters(prompt: PromptItem[]): number {
  let total = 0;
  for (const item of prompt) {
    if (item.type === 'message') total += contentText(item.content).length;
    else if (item.type === 'function_call') total += item.name.length + item.arguments.length;
    else total += outputLength(item);
  }
  return total;
}
