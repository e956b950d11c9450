import { APICallError, generateText, streamText, type FinishReason, type LanguageModel } from 'ai';
import { optional, settingsOf } from './call-settings.ts';
import { InvalidRequestError, TailgateError } from '../errors.ts';
import { ModelError, ModelTimeoutError, providerFailure } from './errors.ts';
import { functionCallItemSchema, type FunctionCallItem } from '../items.ts';
import { convertToModelMessages, type ProviderOptions } from './convert-to-model-messages.ts';
import { convertToToolSet } from './convert-to-tool-set.ts';
import type { CacheBreakpoints } from './cache-breakpoints.ts';
import { StreamOrder } from './stream-order.ts';
import { startDeadline, untilAborted, type Deadline } from './deadline.ts';
import { CallReach, markReach } from './provider-reach.ts';
import { lacksLoopReasoning, reasoningItem, ReasoningParts } from './reasoning-parts.ts';
import { reportedInput, toUsage } from './sdk-usage.ts';
import {
  markCut,
  refuseOverToolLimit,
  toolsSent,
  type Model,
  type ModelRequest,
  type ModelResult,
  type ModelStreamEvent,
  type ModelUsage,
  type TokenLogprob,
} from './model.ts';

export interface SdkModelOptions {
  /** The tailgate model id (`provider:name`). */
  id: string;
  /**
   * The AI SDK language model built by the provider factory; over HTTP, built for each call with
   * the `fetch` given, which notes whether the provider may have run the model (a failure is
   * marked so: lib/models/provider-reach.ts), for the request given.
   */
  languageModel: LanguageModel | ((fetch: typeof globalThis.fetch, request: ModelRequest) => LanguageModel);
  /** The fetch the call's requests go through; default the runtime's global fetch. */
  fetch?: typeof globalThis.fetch | undefined;
  /** Deadline of one whole call (stream included), in milliseconds. */
  timeoutMs: number;
  /** The provider's key: an error text quoting it (a proxy's echo) is logged and traced with `[redacted]` instead. */
  apiKey?: string | undefined;
  /** Retries of the AI SDK on retryable provider errors (5xx, 429, network). */
  maxRetries: number;
  /**
   * Whether the provider takes images and files inside tool results (Anthropic's tool_result
   * image blocks); `after`: in a user message after the tool messages, which take text only
   * (Chat Completions; lib/models/tool-media.ts). Without it they go as text placeholders
   * (lib/models/media-parts.ts).
   */
  toolResultMedia?: boolean | 'after';
  /** Whether the provider takes a file by its https URL (else a text placeholder; `Model.fileUrls`). */
  fileUrls?: boolean;
  /** Whether the provider takes images only as bytes and no files (Workers AI; `Model.imageBytesOnly`). */
  imageBytesOnly?: boolean;
  /** The longest image side the provider takes (Anthropic; `Model.maxImageSide`). */
  maxImageSide?: number;
  /** The most bytes of an image the provider takes (Anthropic; `Model.maxImageBytes`). */
  maxImageBytes?: number;
  /** Whether the provider takes no image or file at all (`Model.textOnly`). */
  textOnly?: boolean;
  /** The longest image side in a request with many images (Anthropic; `Model.manyImages`). */
  manyImages?: Model['manyImages'];
  /**
   * Whether the provider refuses thinking in a call that continues a tool loop unless the
   * previous answer's thinking blocks come back with it (Anthropic). Such a call whose prompt
   * lacks them (history stored before reasoning was kept, a user message within the loop) is
   * sent without `reasoning` (`lacksLoopReasoning`).
   */
  thinkingNeedsItsBlocks?: boolean;
  /** Explicit prompt-cache breakpoints (Anthropic): where they go, and the provider options each carries. */
  cacheControl?: { providerOptions: ProviderOptions; place: (request: ModelRequest) => CacheBreakpoints };
  /**
   * The provider options of a request: what the provider takes of `promptCacheKey` and of `settings` beyond the
   * AI SDK's call settings (OpenAI: `prompt_cache_key`, `user`, `verbosity`, `parallel_tool_calls`,
   * `safety_identifier`). Without it, those are not sent.
   */
  providerOptions?: (request: ModelRequest) => ProviderOptions | undefined;
  /** Whether the provider takes `settings.allowedTools` itself (OpenAI's `allowed_tools`), every tool still sent. */
  allowedTools?: boolean;
  /** The most tools the provider takes in a request (OpenAI: 128); a call offering more is refused unsent. */
  maxTools?: number;
  /** How the provider's log probabilities are read from its response body and each raw stream chunk. */
  logprobs?: (raw: unknown, model: string) => TokenLogprob[];
}

/**
 * Wraps an AI SDK language model (any provider) behind tailgate's `Model` interface, so every
 * provider shares one mapping of prompts, tools, outputs and failures:
 *
 * - the prompt goes through `convertToModelMessages`, the tools through `convertToToolSet`
 *   (no `execute`: the model's calls come back as function_call items);
 * - the output is the answer's text and function calls in the order they began (text after a
 *   call is a message of its own), each carrying the reasoning blocks before it
 *   (lib/models/stream-order.ts, lib/models/reasoning-parts.ts), streamed or not; a call
 *   the SDK could not parse keeps the model's raw argument text. A stream passes the calls'
 *   argument pieces on as they come, and the input usage its provider reports before the output
 *   (Anthropic's message_start) as `input_reported`, for a call stopped before it answers;
 * - any provider failure (HTTP error after retries, a malformed body or stream, a stream cut off
 *   before its final event, an invalid tool call id) becomes `ModelError` (`providerFailure`: a
 *   prompt the provider refuses as over the model's window is `context_too_large`); the deadline
 *   or the caller's abort signal gives `ModelTimeoutError`.
 */
export function createSdkModel(options: SdkModelOptions): Model {
  const { id, languageModel, timeoutMs, maxRetries, cacheControl } = options;

  // What the model takes of a call's tools (`toolsSent`, `refuseOverToolLimit`).
  const offers = { id, allowsTools: options.allowedTools === true, ...optional('maxTools', options.maxTools) };
  // Over HTTP, each call notes whether its provider may have run the model.
  const newReach = () => (typeof languageModel === 'function' ? new CallReach() : undefined);
  const callSettings = (request: ModelRequest, abortSignal: AbortSignal, reach: CallReach | undefined) => {
    const placed = cacheControl?.place(request) ?? { tools: false, items: [] };
    const providerOptions = cacheControl?.providerOptions ?? {};
    const breakpoints = placed.items.map((index) => ({ index, providerOptions }));
    const messages = convertToModelMessages(request.prompt, {
      breakpoints,
      toolResultMedia: options.toolResultMedia ?? false,
      fileUrls: options.fileUrls ?? false,
      imageBytesOnly: options.imageBytesOnly ?? false,
      ...optional('maxImageSide', options.maxImageSide),
      ...optional('maxImageBytes', options.maxImageBytes),
      ...(options.textOnly ? { textOnly: true } : {}),
      ...optional('manyImages', options.manyImages),
    });
    // Providers refuse a prompt without a message (the AI SDK before any call): the blank
    // messages convertToModelMessages leaves out are the client's, not a failed model call.
    if (!messages.some((message) => message.role !== 'system')) {
      throw new InvalidRequestError(
        'the prompt holds no message to send: a message with no text but whitespace (and no image or file) is not sent',
        { field: 'input' },
      );
    }
    const settings = settingsOf(request.settings);
    const tools = toolsSent(offers, request.tools, request.settings);
    refuseOverToolLimit(offers, request.tools, request.settings);
    if (options.thinkingNeedsItsBlocks && settings.reasoning !== 'none' && lacksLoopReasoning(messages)) {
      delete settings.reasoning;
    }
    return {
      model: typeof languageModel === 'function' ? languageModel(reach!.fetch(options.fetch), request) : languageModel,
      messages,
      allowSystemInMessages: true,
      // https image and file URLs go to the provider as given: tailgate never fetches them.
      experimental_download: neverDownload,
      // The allowed tools filtered here, not by the AI SDK's `activeTools`, so that the last tool's
      // provider options (Anthropic's cache breakpoint) go on a tool that is sent.
      ...(tools.length > 0 ? { tools: convertToToolSet(tools, placed.tools ? providerOptions : undefined) } : {}),
      ...(request.maxOutputTokens !== undefined ? { maxOutputTokens: request.maxOutputTokens } : {}),
      ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
      ...settings,
      ...optional('providerOptions', options.providerOptions?.(request)),
      maxRetries,
      abortSignal,
    };
  };

  /** How this call reads log probabilities: when the client asked and the provider gives them. */
  const readLogprobs = (request: ModelRequest) =>
    request.settings?.logprobs !== undefined ? options.logprobs : undefined;

  return {
    id,
    toolResultMedia: options.toolResultMedia ?? false,
    fileUrls: options.fileUrls ?? false,
    imageBytesOnly: options.imageBytesOnly ?? false,
    ...optional('maxImageSide', options.maxImageSide),
    ...optional('maxImageBytes', options.maxImageBytes),
    ...(options.textOnly ? { textOnly: true } : {}),
    ...optional('manyImages', options.manyImages),
    ...(options.allowedTools ? { allowsTools: true } : {}),
    ...optional('maxTools', options.maxTools),
    ...(options.logprobs ? { logprobs: true } : {}),

    async generate(request: ModelRequest): Promise<ModelResult> {
      const deadline = startDeadline(request.signal, timeoutMs);
      const reach = newReach();
      try {
        // Raced against the deadline: a provider (or binding) that ignores the abort signal
        // must not hold the turn forever.
        const settings = callSettings(request, deadline.signal, reach);
        const logprobs = readLogprobs(request);
        const result = await untilAborted(
          generateText({ ...settings, ...(logprobs ? { include: { responseBody: true } } : {}) }),
          deadline.signal,
        );
        checkFinish(result.finishReason, result.rawFinishReason, id);
        // The answer's text tokens are its first message's: the provider answers one text.
        let tokens = logprobs?.(result.response.body, id);
        // In the provider's order, as a stream of the same answer gives it (lib/models/stream-order.ts).
        const order = new StreamOrder();
        for (const part of result.content) {
          if (part.type === 'text') {
            order.text(part.text, tokens);
            if (part.text !== '') tokens = undefined;
          } else if (part.type === 'reasoning') order.reasoning(reasoningItem(part));
          else if (part.type === 'tool-call') order.call(toFunctionCall(part, id));
        }
        order.end();
        const incomplete = incompleteOf(result.finishReason);
        return {
          output: markCut(order.output, incomplete.incomplete),
          usage: toUsage(result.usage),
          ...incomplete,
          ...(logprobs ? { logprobs: order.logprobs } : {}),
        };
      } catch (error) {
        throw toModelFailure(error, deadline, id, timeoutMs, reach, options.apiKey);
      } finally {
        deadline.dispose();
      }
    },

    async *stream(request: ModelRequest): AsyncIterable<ModelStreamEvent> {
      const deadline = startDeadline(request.signal, timeoutMs);
      const reach = newReach();
      let stopParts = () => {};
      const order = new StreamOrder();
      const reasoning = new ReasoningParts();
      let usage: ModelUsage = { input_tokens: 0, output_tokens: 0 };
      let finish: FinishReason = 'stop';
      const logprobs = readLogprobs(request);
      try {
        // A raw chunk comes before the parts the SDK makes of it: its tokens go with its text.
        let tokens: TokenLogprob[] | undefined;
        const settings = callSettings(request, deadline.signal, reach);
        const streamed = streamText({
          ...settings,
          ...(logprobs ? { includeRawChunks: true } : {}),
          onError: () => {},
        });
        const parts = streamed.fullStream[Symbol.asyncIterator]();
        stopParts = () => void parts.return?.().catch(() => {});
        while (true) {
          const next = await untilAborted(parts.next(), deadline.signal);
          if (next.done) break;
          const part = next.value;
          // Tokens of a chunk with no text, when no text follows them in it: the text's before them.
          if (tokens?.length && part.type !== 'raw' && part.type !== 'text-start' && part.type !== 'text-delta') {
            const given = order.tokens(tokens);
            if (given) {
              tokens = undefined;
              yield* given;
            }
          }
          if (part.type === 'raw') {
            if (logprobs) tokens = [...(tokens ?? []), ...logprobs(part.rawValue, id)];
          } else if (part.type === 'text-delta') {
            yield* order.text(part.text, logprobs ? (tokens ?? []) : undefined);
            if (part.text !== '') tokens = undefined;
          } else if (part.type === 'reasoning-start' || part.type === 'reasoning-delta') {
            reasoning.add(part);
          } else if (part.type === 'reasoning-end') {
            yield* order.reasoning(reasoning.end(part));
          } else if (part.type === 'tool-input-start') {
            if (!part.providerExecuted) yield* order.callStart(part.id, part.toolName);
          } else if (part.type === 'tool-input-delta') {
            yield* order.argumentsDelta(part.id, part.delta);
          } else if (part.type === 'tool-call') {
            yield* order.call(toFunctionCall(part, id));
          } else if (part.type === 'custom') {
            const input = reportedInput(part);
            if (input) yield { type: 'input_reported', usage: input };
          } else if (part.type === 'error') {
            throw part.error;
          } else if (part.type === 'abort') {
            throw new ModelTimeoutError(`model ${id} call was aborted`, { model: id });
          } else if (part.type === 'finish') {
            checkFinish(part.finishReason, part.rawFinishReason, id);
            usage = toUsage(part.totalUsage);
            finish = part.finishReason;
          }
        }
        if (deadline.signal.aborted) throw new ModelTimeoutError(`model ${id} call was aborted`, { model: id });
      } catch (error) {
        throw toModelFailure(error, deadline, id, timeoutMs, reach, options.apiKey);
      } finally {
        // Also reached when the consumer stops early: abort the provider request.
        deadline.dispose();
        stopParts();
      }
      yield* order.end();
      const incomplete = incompleteOf(finish);
      const output = markCut(order.output, incomplete.incomplete, order.endsInLeftOutCall);
      const result: ModelResult = { output, usage, ...incomplete, ...(logprobs ? { logprobs: order.logprobs } : {}) };
      yield { type: 'done', result };
    },
  };
}

/**
 * An answer that ended with an error or was cut off (a stream closed before the provider's
 * final event) is a provider failure, not a short answer.
 */
function checkFinish(finishReason: FinishReason, rawFinishReason: string | undefined, id: string): void {
  if (finishReason === 'error' || finishReason === 'interrupted') {
    throw new ModelError(`model ${id} answer ended early (${rawFinishReason ?? finishReason})`, {
      model: id,
      finish_reason: rawFinishReason ?? finishReason,
    });
  }
}

/** `incomplete` of an answer that stopped at its token limit or at the provider's content filter. */
function incompleteOf(finishReason: FinishReason): Pick<ModelResult, 'incomplete'> {
  if (finishReason === 'length') return { incomplete: 'max_output_tokens' };
  return finishReason === 'content-filter' ? { incomplete: 'content_filter' } : {};
}

interface SdkToolCall {
  toolCallId: string;
  toolName: string;
  input: unknown;
  invalid?: boolean | undefined;
}

function toFunctionCall(call: SdkToolCall, id: string): FunctionCallItem {
  // An unparseable call keeps the model's raw text as its input; a valid one is the parsed object.
  const argumentsText = call.invalid && typeof call.input === 'string' ? call.input : JSON.stringify(call.input ?? {});
  const parsed = functionCallItemSchema.safeParse({
    type: 'function_call',
    call_id: call.toolCallId,
    name: call.toolName,
    arguments: argumentsText,
  });
  if (!parsed.success) {
    throw new ModelError('the provider returned an invalid tool call', { model: id, issues: parsed.error.issues });
  }
  return parsed.data;
}

/** A call's failure as tailgate's error, marked with whether its provider may have run the model when `reach` tells. */
function toModelFailure(
  error: unknown,
  deadline: Deadline,
  id: string,
  timeoutMs: number,
  reach: CallReach | undefined,
  apiKey: string | undefined,
): TailgateError {
  const failure = modelFailure(error, deadline, id, timeoutMs, apiKey);
  return reach ? markReach(failure, reach.mayHaveRun) : failure;
}

function modelFailure(
  error: unknown,
  deadline: Deadline,
  id: string,
  timeoutMs: number,
  apiKey?: string,
): TailgateError {
  if (deadline.timedOut) {
    return new ModelTimeoutError(`model ${id} did not answer within ${timeoutMs} ms`, {
      model: id,
      timeout_ms: timeoutMs,
    });
  }
  if (deadline.signal.aborted) return new ModelTimeoutError(`model ${id} call was aborted`, { model: id });
  if (error instanceof TailgateError) return error;
  // A key of a few characters (a local server's placeholder) is no secret, and replacing it would garble the text.
  const text =
    apiKey && apiKey.length >= 8 ? errorMessage(error).replaceAll(apiKey, '[redacted]') : errorMessage(error);
  return providerFailure(id, `model ${id} failed: ${text}`, findApiCallError(error));
}

function findApiCallError(error: unknown): APICallError | undefined {
  for (let current = error, depth = 0; current && depth < 5; depth++) {
    if (APICallError.isInstance(current)) return current;
    const record = current as { lastError?: unknown; cause?: unknown };
    current = record.lastError ?? record.cause;
  }
  return undefined;
}

function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  return typeof error === 'string' ? error : 'unknown error';
}

/** Passes every URL through to the provider (null: not downloaded) instead of fetching it. */
async function neverDownload(requests: readonly unknown[]): Promise<null[]> {
  return requests.map(() => null);
}
