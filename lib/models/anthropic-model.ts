import { anthropicMessagesModel } from './anthropic-messages.ts';
import { anthropicCacheBreakpoints } from './cache-breakpoints.ts';
import type { ProviderOptions } from './convert-to-model-messages.ts';
import type { Model, ModelRequest } from './model.ts';
import { createSdkModel } from './sdk-model.ts';
import { retryingWithoutThinking } from './thinking-refusal.ts';

export interface AnthropicModelSettings {
  /** The tailgate model id, e.g. `anthropic:claude-sonnet-4-5`. */
  id: string;
  modelName: string;
  apiKey: string;
  /** Base URL up to and including the version; the SDK's default is `https://api.anthropic.com/v1`. */
  baseURL?: string;
  fetch?: typeof globalThis.fetch;
  timeoutMs: number;
  maxRetries: number;
}

/**
 * The longest image side the Messages API takes: it refuses a request holding a larger image
 * ("At least one of the image dimensions exceed max allowed size: 8000 pixels").
 */
export const ANTHROPIC_MAX_IMAGE_SIDE = 8000;

/**
 * The most bytes of an image the Messages API takes: it refuses a request holding one whose
 * base64 is over 5 MiB ("image exceeds 5 MB maximum: 5242884 bytes > 5242880 bytes").
 */
export const ANTHROPIC_MAX_IMAGE_BYTES = (5 * 1024 * 1024 * 3) / 4;

/**
 * The Messages API holds every image of a request with more than 20 to 2000 pixels a side ("At
 * least one of the image dimensions exceed max allowed size for many-image requests: 2000
 * pixels"), takes at most 100 images in a request (its vision guide's limit), and refuses a
 * request over 32 MB (413 `request_too_large`): its images' base64 is kept to 24 MiB, leaving the
 * rest to the prompt's text.
 */
export const ANTHROPIC_MANY_IMAGES = {
  over: { images: 20, maxImageSide: 2000 },
  most: 100,
  mostBytes: 24 * 1024 * 1024,
} as const;

/** Anthropic's prompt-cache hint, placed on each breakpoint. */
export const ANTHROPIC_CACHE_BREAKPOINT = { anthropic: { cacheControl: { type: 'ephemeral' } } } as const;

/**
 * A model speaking the Anthropic Messages API (`POST {baseURL}/messages`), streaming included.
 * It places up to four `cache_control: {type: "ephemeral"}` breakpoints (`anthropicCacheBreakpoints`):
 * the last tool, the instructions, the last two blocks of the prompt and, with a slot left, the end of the
 * stable compacted prefix (`request.cacheBreakpoint`), so each turn reads the previous turn's prompt
 * from Anthropic's cache. Thinking blocks (with their signatures) and redacted thinking come back as the
 * reasoning of the item after each (lib/models/stream-order.ts) and go back within their tool loop in the
 * provider's order, before the tool_use blocks they came before (lib/models/reasoning-parts.ts); a
 * call that continues a tool loop whose blocks are missing goes without thinking (`thinkingNeedsItsBlocks`),
 * and a call Anthropic refuses for a thinking block's signature (a client's forged or corrupted
 * reasoning) is sent once more without its thinking blocks and without thinking (lib/models/thinking-refusal.ts).
 * A request asks for no more output than the window leaves it (`withinRoom`).
 */
export function createAnthropicModel(settings: AnthropicModelSettings): Model {
  return createSdkModel({
    toolResultMedia: true,
    fileUrls: true,
    thinkingNeedsItsBlocks: true,
    maxImageSide: ANTHROPIC_MAX_IMAGE_SIDE,
    maxImageBytes: ANTHROPIC_MAX_IMAGE_BYTES,
    manyImages: ANTHROPIC_MANY_IMAGES,
    id: settings.id,
    apiKey: settings.apiKey,
    // Built for each call, with the fetch that notes what its requests came to.
    languageModel: (fetch, request) =>
      retryingWithoutThinking(
        anthropicMessagesModel({
          modelName: settings.modelName,
          apiKey: settings.apiKey,
          ...(settings.baseURL !== undefined ? { baseURL: settings.baseURL } : {}),
          fetch,
          transformRequestBody: (body) => withinRoom(body, request.outputRoom, request.maxOutputTokens),
        }),
      ),
    fetch: settings.fetch,
    timeoutMs: settings.timeoutMs,
    maxRetries: settings.maxRetries,
    providerOptions: anthropicOptions,
    cacheControl: {
      providerOptions: ANTHROPIC_CACHE_BREAKPOINT,
      place: (request) => anthropicCacheBreakpoints(request.prompt, request.tools.length > 0, request.cacheBreakpoint),
    },
  });
}

/**
 * Anthropic's provider options of a request's settings: one tool call at most when parallel
 * tool calls are off, and the end user (`safety_identifier`, else `user`) as `metadata.user_id`.
 * A streamed call's tools go without `eager_input_streaming`, as a generated call's do: the tools
 * open the cached prefix, which then stays the same whether a turn streams or not.
 */
function anthropicOptions(request: ModelRequest): ProviderOptions {
  const asked = request.settings ?? {};
  const userId = asked.safetyIdentifier ?? asked.user;
  return {
    anthropic: {
      toolStreaming: false,
      ...(asked.parallelToolCalls === false ? { disableParallelToolUse: true } : {}),
      ...(userId !== undefined ? { metadata: { userId } } : {}),
    },
  };
}

/** The least thinking budget the Messages API takes (`thinking.budget_tokens`). */
export const ANTHROPIC_MIN_THINKING_BUDGET = 1024;

/**
 * A Messages (or Chat Completions, before `max_completion_tokens`) request body asking for no more
 * than `room` tokens (`ModelRequest.outputRoom`): the Messages API refuses a request whose prompt
 * and `max_tokens` exceed the window ("input length and `max_tokens` exceed context limit"), as
 * vLLM does ("maximum context length"), and the AI SDK asks for the model's most output when the
 * call sets none on Anthropic. A body within the room is sent as it is. With extended thinking, its budget
 * is lowered with `max_tokens` and kept below it: by the same share of it, or with the call's own
 * `maxOutputTokens` (`asked`, within the room: lib/tokens/model-limits.ts) to what the room leaves
 * past them; under ANTHROPIC_MIN_THINKING_BUDGET the request goes without thinking (and asks for
 * `asked`, when set). A room under 1 token (a prompt estimated at the window or over it, as a
 * summary's transcript can be) leaves the body as it is: the estimate is over the provider's count,
 * or the provider refuses the prompt whatever `max_tokens` says; asking for 1 token would answer
 * with one.
 */
export function withinRoom(
  body: Record<string, any>,
  room: number | undefined,
  asked: number | undefined,
): Record<string, any> {
  if (room === undefined || room < 1 || !(body.max_tokens > room)) return body;
  const maxTokens = Math.floor(room);
  const { thinking, ...rest } = body;
  if (thinking?.type !== 'enabled' || typeof thinking.budget_tokens !== 'number') {
    return { ...body, max_tokens: maxTokens };
  }
  const budget: number = thinking.budget_tokens;
  const lowered =
    asked !== undefined
      ? Math.min(budget, maxTokens - asked)
      : Math.max(ANTHROPIC_MIN_THINKING_BUDGET, Math.floor((budget * maxTokens) / body.max_tokens));
  if (lowered >= ANTHROPIC_MIN_THINKING_BUDGET && lowered < maxTokens) {
    return { ...body, max_tokens: maxTokens, thinking: { ...thinking, budget_tokens: lowered } };
  }
  return { ...rest, max_tokens: Math.min(maxTokens, asked ?? maxTokens) };
}
