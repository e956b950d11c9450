import { withinRoom } from './anthropic-model.ts';
import type { ProviderOptions } from './convert-to-model-messages.ts';
import { chatLogprobs, chatLogprobsFields } from './logprobs.ts';
import type { Model, ModelRequest } from './model.ts';
import { openaiCompatibleChatModel } from './openai-compatible-chat.ts';
import { createSdkModel } from './sdk-model.ts';

export interface OpenAICompatibleModelSettings {
  /** The tailgate model id, e.g. `openai:gpt-4.1-mini`. */
  id: string;
  /** The provider name the SDK reports (`openai` or `openai-compatible`). */
  providerName: string;
  /** The model name sent as `model` in the request body. */
  modelName: string;
  /** Base URL up to and including the version, e.g. `https://api.openai.com/v1`. */
  baseURL: string;
  apiKey?: string;
  /**
   * Send `max_completion_tokens` instead of `max_tokens`: OpenAI's own API requires it for
   * its newer models, while most compatible servers only know `max_tokens`.
   */
  maxCompletionTokens?: boolean;
  /** Send a request's `promptCacheKey` as `prompt_cache_key` (OpenAI's own API takes it). */
  promptCacheKey?: boolean;
  /**
   * Send a `json_schema` response format as such (OpenAI's own API and the compatible servers
   * tailgate names: vLLM, Ollama, llama.cpp, LM Studio); without it, structured output asks
   * for `json_object` and the schema is not sent.
   */
  structuredOutputs?: boolean;
  /**
   * Send `settings.allowedTools` as `tool_choice: {type: "allowed_tools", ...}` with every tool
   * (OpenAI's own API), so the prompt stays the same whatever the subset; without it the call
   * offers the allowed tools alone.
   */
  allowedTools?: boolean;
  /**
   * Whether the model takes images and files (`image_url` and `file` parts); without it, each
   * goes as a text placeholder (`Model.textOnly`): a text model's server refuses them.
   */
  images?: boolean;
  /** What the provider takes of a request's images together (`Model.manyImages`). */
  manyImages?: Model['manyImages'];
  /** The most tools a request may offer (OpenAI's own API: 128). */
  maxTools?: number;
  fetch?: typeof globalThis.fetch;
  timeoutMs: number;
  maxRetries: number;
}

/**
 * OpenAI's models without vision, which answer 400 to a request holding an image ("Invalid
 * content type. image_url is only supported by certain models."): GPT-3.5, GPT-4 before GPT-4
 * Turbo (and its text previews), o1-mini, o1-preview and o3-mini, dated snapshots included.
 */
const OPENAI_TEXT_MODELS =
  /^(gpt-3\.5|o1-mini|o1-preview|o3-mini)|^gpt-4(-0314|-0613|-32k(-\d+)?|-1106-preview|-0125-preview|-turbo-preview)?$/;

/**
 * OpenAI takes at most 500 images and 50 MB of images in a request (its vision guide's limits):
 * their base64 is kept to 45 MiB.
 */
export const OPENAI_MANY_IMAGES = { most: 500, mostBytes: 45 * 1024 * 1024 } as const;

/**
 * Whether OpenAI's model `name` takes images (and files): all but `OPENAI_TEXT_MODELS`, a
 * fine-tuned one (`ft:<base>:<org>::<id>`) as its base model.
 */
export function openaiTakesImages(name: string): boolean {
  const base = name.startsWith('ft:') ? name.slice(3).split(':')[0]! : name;
  return !OPENAI_TEXT_MODELS.test(base);
}

/**
 * A model speaking OpenAI chat completions (`POST {baseURL}/chat/completions`), streaming
 * included. A tool message there is text only: a tool result's images and files follow the
 * tool messages in a user message (lib/models/tool-media.ts). A model that takes no images
 * (`images` unset) gets each image and file as a text placeholder instead. A request asks for no
 * more output than the window leaves it (`withinRoom`): a server refuses a prompt and `max_tokens`
 * over its window (vLLM's "maximum context length").
 */
export function createOpenAICompatibleModel(settings: OpenAICompatibleModelSettings): Model {
  // Built for each call, with the fetch that notes what its requests came to.
  const chatModel = (fetch: typeof globalThis.fetch, request: ModelRequest) =>
    openaiCompatibleChatModel({
      providerName: settings.providerName,
      modelName: settings.modelName,
      baseURL: settings.baseURL,
      ...(settings.apiKey !== undefined ? { apiKey: settings.apiKey } : {}),
      fetch,
      ...(settings.structuredOutputs ? { structuredOutputs: true } : {}),
      transformRequestBody: (raw) => {
        const body = withinRoom(raw, request.outputRoom, request.maxOutputTokens);
        return allowedToolChoice(nestImageDetail(settings.maxCompletionTokens ? renameMaxTokens(body) : body));
      },
    });
  return createSdkModel({
    toolResultMedia: 'after',
    ...(settings.images ? {} : { textOnly: true }),
    ...(settings.images && settings.manyImages ? { manyImages: settings.manyImages } : {}),
    id: settings.id,
    apiKey: settings.apiKey,
    languageModel: chatModel,
    fetch: settings.fetch,
    timeoutMs: settings.timeoutMs,
    maxRetries: settings.maxRetries,
    providerOptions: (request) => openaiOptions(settings, request),
    ...(settings.allowedTools ? { allowedTools: true } : {}),
    ...(settings.maxTools !== undefined ? { maxTools: settings.maxTools } : {}),
    logprobs: chatLogprobs,
  });
}

/**
 * The body fields of a request's settings that the AI SDK's call settings do not carry:
 * `user`, `verbosity` (textVerbosity), `parallel_tool_calls`, `safety_identifier`, `logprobs`
 * and `top_logprobs` when the client asked for log probabilities, and `prompt_cache_key`,
 * `prompt_cache_retention` and `prompt_cache_options.ttl` (`30m`, the one Chat Completions takes)
 * where the provider takes them. None: undefined.
 */
function openaiOptions(settings: OpenAICompatibleModelSettings, request: ModelRequest): ProviderOptions | undefined {
  const asked = request.settings ?? {};
  const fields = {
    ...(settings.promptCacheKey && request.promptCacheKey !== undefined
      ? { prompt_cache_key: request.promptCacheKey }
      : {}),
    ...(settings.promptCacheKey && asked.promptCacheRetention !== undefined
      ? { prompt_cache_retention: asked.promptCacheRetention }
      : {}),
    // Chat Completions takes `30m` alone (a Responses request may ask `12h`, which it refuses).
    ...(settings.promptCacheKey && asked.promptCacheTtl === '30m' ? { prompt_cache_options: { ttl: '30m' } } : {}),
    ...(asked.user !== undefined ? { user: asked.user } : {}),
    ...(asked.verbosity !== undefined ? { textVerbosity: asked.verbosity } : {}),
    ...(asked.parallelToolCalls !== undefined ? { parallel_tool_calls: asked.parallelToolCalls } : {}),
    ...(asked.safetyIdentifier !== undefined ? { safety_identifier: asked.safetyIdentifier } : {}),
    ...chatLogprobsFields(asked.logprobs),
    ...(settings.allowedTools && asked.allowedTools ? { [ALLOWED_TOOLS]: asked.allowedTools } : {}),
  };
  return Object.keys(fields).length > 0 ? { [settings.providerName]: fields } : undefined;
}

/**
 * The body field that carries a call's allowed tools to `allowedToolChoice` (the SDK puts provider
 * options in the body, before its own `tool_choice`, which it would override): never sent.
 */
const ALLOWED_TOOLS = 'tailgate_allowed_tools';

/**
 * Chat Completions' `tool_choice: {type: "allowed_tools", allowed_tools: {mode, tools}}` in place of
 * the `auto` or `required` the SDK wrote, for a call with allowed tools (`ALLOWED_TOOLS`).
 */
function allowedToolChoice(body: Record<string, unknown>): Record<string, unknown> {
  if (!(ALLOWED_TOOLS in body)) return body;
  const { [ALLOWED_TOOLS]: names, ...rest } = body;
  if (!Array.isArray(names) || rest.tool_choice === 'none') return rest;
  const tools = names.map((name) => ({ type: 'function', function: { name } }));
  const mode = rest.tool_choice === 'required' ? 'required' : 'auto';
  return { ...rest, tool_choice: { type: 'allowed_tools', allowed_tools: { mode, tools } } };
}

function renameMaxTokens(body: Record<string, unknown>): Record<string, unknown> {
  if (body.max_tokens === undefined) return body;
  const { max_tokens, ...rest } = body;
  return { ...rest, max_completion_tokens: max_tokens };
}

type WirePart = { type?: unknown; detail?: unknown; image_url?: Record<string, unknown> };
type WireMessage = { content?: unknown };

/**
 * Each image's `detail` inside its `image_url`, where Chat Completions reads it
 * (`{type: "image_url", image_url: {url, detail}}`): the SDK sends a part's `openaiCompatible`
 * provider options (lib/models/media-parts.ts) beside `image_url`, not in it.
 */
function nestImageDetail(body: Record<string, unknown>): Record<string, unknown> {
  if (!Array.isArray(body.messages)) return body;
  const messages = (body.messages as WireMessage[]).map((message) =>
    Array.isArray(message.content) ? { ...message, content: (message.content as WirePart[]).map(nestDetail) } : message,
  );
  return { ...body, messages };
}

function nestDetail(part: WirePart): WirePart {
  if (part.type !== 'image_url' || part.detail === undefined) return part;
  const { detail, ...rest } = part;
  return { ...rest, image_url: { ...part.image_url, detail } };
}
