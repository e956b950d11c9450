import { type Content, type ContentPart, contentText } from '../content.ts';
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionMessageFunctionToolCall,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import type { CompletionUsage } from 'openai/resources/completions';
import { InvalidRequestError } from '../errors.ts';
import type { Item } from '../items.ts';
import type { IncompleteReason, ModelOutputItem, ModelSettings, ModelUsage, TokenLogprob } from '../models/model.ts';
import type { ModelOutputEvent } from '../turn/model-call.ts';
import { withoutUnset } from './request.ts';
import type { ChatCompletionCreateBody } from './chat-schemas.ts';
import { fromChatToolChoice, modelToolChoice } from './tool-choice.ts';

/**
 * Pure mapping between OpenAI's Chat Completions shapes (the `openai` package's types) and
 * tailgate items. No I/O: functions/routes/openai/chat.ts does the HTTP.
 */

type TextPart = { type: 'text'; text: string };
/** A user message's part (lib/openai/chat-schemas.ts): text, an image or a file. */
type UserPart =
  | TextPart
  | { type: 'image_url'; image_url: { url: string; detail?: 'auto' | 'low' | 'high' | 'original' | undefined } }
  | { type: 'file'; file: { file_data: string; filename: string } };

/** A chat message as the request schema (functions/routes/openai/schemas.ts) validated it. */
export type ChatMessageBody =
  | { role: 'system' | 'developer'; content: string | TextPart[]; name?: string | undefined }
  | { role: 'user'; content: string | UserPart[]; name?: string | undefined }
  | {
      role: 'assistant';
      content?: string | TextPart[] | null | undefined;
      tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[] | undefined;
      name?: string | undefined;
      refusal?: string | null | undefined;
    }
  | { role: 'tool'; tool_call_id: string; content: string | TextPart[] };

function textOf(content: string | TextPart[] | null | undefined): string {
  if (content === null || content === undefined) return '';
  return typeof content === 'string' ? content : content.map((part) => part.text).join('\n');
}

/** A user message's content: text parts alone join into one string; with an image or file, parts. */
function userContent(content: string | UserPart[]): Content {
  if (typeof content === 'string') return content;
  if (content.every((part) => part.type === 'text')) return textOf(content as TextPart[]);
  return content.map((part): ContentPart => {
    if (part.type === 'text') return { type: 'input_text', text: part.text };
    if (part.type === 'file') return { type: 'input_file', ...part.file };
    const { url, detail } = part.image_url;
    return { type: 'input_image', image_url: url, ...(detail ? { detail } : {}) };
  });
}

/**
 * Refuses what OpenAI refuses of tool messages (a provider would answer such a prompt 400): a
 * tool message must answer a call of the assistant message right before it (or before the tool
 * messages that follow that one), at most once, and every call of an assistant message must be
 * answered before the next message that is not a tool message (or the end of the messages).
 */
function checkToolMessages(messages: readonly ChatMessageBody[]): void {
  // The calls of the latest assistant message not answered yet, and where that message is.
  let open = new Set<string>();
  let caller = -1;
  const closeCalls = () => {
    if (open.size === 0) return;
    throw new InvalidRequestError(
      `messages[${caller}].tool_calls: an assistant message with tool_calls must be followed by tool messages ` +
        `answering each of them; no tool message answers ${[...open].join(', ')}`,
      { field: `messages.${caller}.tool_calls` },
    );
  };
  messages.forEach((message, index) => {
    if (message.role === 'tool') {
      if (open.delete(message.tool_call_id)) return;
      throw new InvalidRequestError(
        `messages[${index}].tool_call_id: a tool message must answer a tool call of the assistant message before ` +
          `it, and no open call there has id ${message.tool_call_id} (unknown, or answered already)`,
        { field: `messages.${index}.tool_call_id` },
      );
    }
    closeCalls();
    if (message.role === 'assistant') {
      caller = index;
      open = new Set();
      for (const [position, call] of (message.tool_calls ?? []).entries()) {
        if (open.has(call.id))
          throw new InvalidRequestError(`messages[${index}].tool_calls[${position}].id: ${call.id} is already used`, {
            field: `messages.${index}.tool_calls.${position}.id`,
          });
        open.add(call.id);
      }
    }
  });
  closeCalls();
}

/**
 * The messages as tailgate items: leading system and developer messages are the
 * instructions (tailgate keeps one system prompt); an assistant message becomes its text (when
 * not empty) followed by one function_call per tool call; a tool message becomes a
 * function_call_output. A system message after the first other message is refused, and so is
 * a tool message without its call or a call without its tool message (checkToolMessages).
 */
export function chatMessagesToItems(messages: readonly ChatMessageBody[]): {
  instructions: string | null;
  items: Item[];
  /** The position in `messages` of each item's message. */
  origins: number[];
} {
  checkToolMessages(messages);
  const instructions: string[] = [];
  const items: Item[] = [];
  const origins: number[] = [];
  messages.forEach((message, index) => {
    const before = items.length;
    if (message.role === 'system' || message.role === 'developer') {
      if (items.length > 0) {
        throw new InvalidRequestError(
          `messages[${index}].role: a ${message.role} message must come before every other message (it becomes the ` +
            `instructions)`,
          { field: `messages.${index}.role` },
        );
      }
      instructions.push(textOf(message.content));
    } else if (message.role === 'user')
      items.push({ type: 'message', role: 'user', content: userContent(message.content) });
    else if (message.role === 'tool')
      items.push({ type: 'function_call_output', call_id: message.tool_call_id, output: textOf(message.content) });
    else if (message.role === 'assistant') {
      const text = textOf(message.content);
      if (text !== '' || !message.tool_calls?.length) items.push({ type: 'message', role: 'assistant', content: text });
      for (const call of message.tool_calls ?? [])
        items.push({
          type: 'function_call',
          call_id: call.id,
          name: call.function.name,
          arguments: call.function.arguments,
        });
    }
    for (let added = before; added < items.length; added++) origins.push(index);
  });
  return { instructions: instructions.filter((text) => text !== '').join('\n\n') || null, items, origins };
}

/**
 * Tailgate items as chat messages (the inverse of {@link chatMessagesToItems}, calls folded into
 * their assistant message).
 */
export function itemsToChatMessages(items: readonly Item[]): ChatCompletionMessageParam[] {
  const messages: ChatCompletionMessageParam[] = [];
  for (const item of items) {
    if (item.type === 'function_call_output')
      messages.push({ role: 'tool', tool_call_id: item.call_id, content: contentText(item.output) });
    else if (item.type === 'function_call') {
      const last = messages.at(-1);
      const call: ChatCompletionMessageFunctionToolCall = {
        id: item.call_id,
        type: 'function',
        function: { name: item.name, arguments: item.arguments },
      };
      if (last?.role === 'assistant') last.tool_calls = [...(last.tool_calls ?? []), call];
      else messages.push({ role: 'assistant', content: null, tool_calls: [call] });
    } else if (item.role === 'assistant') messages.push({ role: 'assistant', content: contentText(item.content) });
    else messages.push({ role: item.role === 'system' ? 'system' : 'user', content: contentText(item.content) });
  }
  return messages;
}

function toolCallOf(item: Extract<ModelOutputItem, { type: 'function_call' }>): ChatCompletionMessageFunctionToolCall {
  return { id: item.call_id, type: 'function', function: { name: item.name, arguments: item.arguments } };
}

/** Tailgate's usage as Chat Completions' (each detail is what the provider reported, else 0). */
export function chatUsageOf(usage: ModelUsage): CompletionUsage {
  return {
    prompt_tokens: usage.input_tokens,
    completion_tokens: usage.output_tokens,
    total_tokens: usage.input_tokens + usage.output_tokens,
    prompt_tokens_details: { cached_tokens: usage.cached_input_tokens ?? 0 },
    completion_tokens_details: { reasoning_tokens: usage.reasoning_tokens ?? 0 },
  };
}

/** A choice's `finish_reason`: `length` or `content_filter` for an answer that stopped short, else by its calls. */
function finishReason(
  calls: number,
  incomplete: IncompleteReason | undefined,
): 'length' | 'content_filter' | 'tool_calls' | 'stop' {
  if (incomplete) return incomplete === 'max_output_tokens' ? 'length' : 'content_filter';
  return calls > 0 ? 'tool_calls' : 'stop';
}

export type TailgateChatCompletion = ChatCompletion & { tailgate?: Record<string, unknown> };

/**
 * A choice's `logprobs`: null unless the request asked for them, then the provider's (`tokens`),
 * none when it gives none, as the Responses API's `output_text` does.
 */
function logprobsOf(
  asked: boolean | undefined,
  tokens: readonly TokenLogprob[] = [],
): ChatCompletion.Choice['logprobs'] {
  return asked ? { content: [...tokens], refusal: null } : null;
}

/** The completion object of a model's output: one choice, its text and tool calls. */
export function buildChatCompletion(fields: {
  id: string;
  created: Date;
  model: string;
  output: readonly ModelOutputItem[];
  usage: ModelUsage;
  /** Why the answer stopped short (ModelResult.incomplete). */
  incomplete?: IncompleteReason | undefined;
  /** The request's `service_tier`, echoed (advisory). */
  serviceTier?: ChatCompletion['service_tier'];
  /** The request asked for log probabilities (`logprobs: true`). */
  logprobs?: boolean | undefined;
  /** The provider's log probabilities of each output item's tokens (ModelResult.logprobs). */
  tokens?: readonly (readonly TokenLogprob[])[] | undefined;
  tailgate?: Record<string, unknown>;
}): TailgateChatCompletion {
  const text = fields.output.flatMap((item) => (item.type === 'message' ? [item.content] : [])).join('');
  const calls = fields.output.flatMap((item) => (item.type === 'function_call' ? [toolCallOf(item)] : []));
  return {
    id: fields.id,
    object: 'chat.completion',
    created: Math.floor(fields.created.getTime() / 1000),
    model: fields.model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: text === '' && calls.length > 0 ? null : text,
          refusal: null,
          ...(calls.length > 0 ? { tool_calls: calls } : {}),
        },
        finish_reason: finishReason(calls.length, fields.incomplete),
        logprobs: logprobsOf(fields.logprobs, fields.tokens?.flat()),
      },
    ],
    usage: chatUsageOf(fields.usage),
    ...(fields.serviceTier ? { service_tier: fields.serviceTier } : {}),
    ...(fields.tailgate ? { tailgate: fields.tailgate } : {}),
  };
}

/** What the model call gets of a chat completion request's settings (lib/models/model.ts). */
export function chatModelSettings(body: ChatCompletionCreateBody): ModelSettings {
  const choice = body.tool_choice;
  const format = body.response_format;
  const stop = body.stop;
  return withoutUnset({
    topP: body.top_p,
    presencePenalty: body.presence_penalty,
    frequencyPenalty: body.frequency_penalty,
    stopSequences: typeof stop === 'string' ? [stop] : stop,
    seed: body.seed,
    ...modelToolChoice(fromChatToolChoice(choice)),
    reasoningEffort: body.reasoning_effort,
    verbosity: body.verbosity,
    parallelToolCalls: body.parallel_tool_calls,
    user: body.user,
    safetyIdentifier: body.safety_identifier,
    promptCacheRetention: body.prompt_cache_retention,
    promptCacheTtl: body.prompt_cache_options?.ttl as ModelSettings['promptCacheTtl'],
    logprobs: body.logprobs === true ? (body.top_logprobs ?? 0) : undefined,
    responseFormat:
      format?.type === 'json_object'
        ? { type: 'json_object' }
        : format?.type === 'json_schema'
          ? { type: 'json_schema', ...format.json_schema }
          : undefined,
  });
}

/**
 * Turns a model's stream into Chat Completions chunks: the first carries `role`, text
 * deltas carry `content`, each finished call one `tool_calls` delta (id, name and the whole
 * arguments), the last choice chunk `finish_reason`; with `include_usage`, every chunk has
 * `usage: null` and a final chunk with no choices carries the usage.
 */
export class ChatChunkWriter {
  #started = false;
  #calls = 0;
  /** The call_id of the call whose arguments are streaming, and its index. */
  #call: { callId: string; index: number } | undefined;
  readonly #base: Pick<ChatCompletionChunk, 'id' | 'created' | 'model'>;
  readonly #includeUsage: boolean;
  readonly #logprobs: boolean;
  readonly #send: (chunk: ChatCompletionChunk & { tailgate?: Record<string, unknown> }) => void;

  constructor(
    fields: { id: string; created: Date; model: string; includeUsage: boolean; logprobs?: boolean | undefined },
    send: (chunk: ChatCompletionChunk & { tailgate?: Record<string, unknown> }) => void,
  ) {
    this.#base = { id: fields.id, created: Math.floor(fields.created.getTime() / 1000), model: fields.model };
    this.#includeUsage = fields.includeUsage;
    this.#logprobs = fields.logprobs ?? false;
    this.#send = send;
  }

  #chunk(
    delta: ChatCompletionChunk.Choice.Delta,
    finishReason: ChatCompletionChunk.Choice['finish_reason'] = null,
    tokens?: readonly TokenLogprob[],
  ): void {
    const first = !this.#started;
    this.#started = true;
    this.#send({
      ...this.#base,
      object: 'chat.completion.chunk',
      choices: [
        {
          index: 0,
          delta: first ? { role: 'assistant', ...delta } : delta,
          finish_reason: finishReason,
          logprobs: logprobsOf(this.#logprobs, tokens),
        },
      ],
      ...(this.#includeUsage ? { usage: null } : {}),
    });
  }

  /** A piece of the text, and the provider's log probabilities of its tokens. */
  delta(text: string, tokens?: readonly TokenLogprob[]): void {
    this.#chunk({ content: text }, null, tokens);
  }

  /** A model's streamed output event: a call's pieces go as `tool_calls` deltas as they come. */
  modelEvent(event: ModelOutputEvent): void {
    if (event.type === 'text_delta') this.delta(event.delta, event.logprobs);
    else if (event.type === 'call_start') {
      this.#call = { callId: event.call_id, index: this.#calls++ };
      const call = { id: event.call_id, type: 'function' as const, function: { name: event.name, arguments: '' } };
      this.#chunk({ tool_calls: [{ index: this.#call.index, ...call }] });
    } else if (event.type === 'arguments_delta') {
      if (this.#call?.callId !== event.call_id) return;
      this.#chunk({ tool_calls: [{ index: this.#call.index, function: { arguments: event.delta } }] });
    } else if (event.type === 'item_done') this.itemDone(event.item);
  }

  itemDone(item: ModelOutputItem): void {
    if (item.type !== 'function_call') return;
    // A call whose pieces streamed is complete already; one that did not goes whole.
    if (this.#call?.callId === item.call_id) {
      this.#call = undefined;
      return;
    }
    const call = toolCallOf(item);
    this.#chunk({ tool_calls: [{ index: this.#calls++, ...call }] });
  }

  /** The finishing chunk, then (with include_usage) the usage chunk, which also carries `tailgate`. */
  done(usage: ModelUsage, incomplete: IncompleteReason | undefined, tailgate?: Record<string, unknown>): void {
    this.#chunk({}, finishReason(this.#calls, incomplete));
    if (this.#includeUsage)
      this.#send({
        ...this.#base,
        object: 'chat.completion.chunk',
        choices: [],
        usage: chatUsageOf(usage),
        ...(tailgate ? { tailgate } : {}),
      });
  }
}
