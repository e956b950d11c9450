import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import type { Model } from './model.ts';
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
  fetch?: typeof globalThis.fetch;
  timeoutMs: number;
  maxRetries: number;
}

/** A model speaking OpenAI chat completions (`POST {baseURL}/chat/completions`), streaming included. */
export function createOpenAICompatibleModel(settings: OpenAICompatibleModelSettings): Model {
  const provider = createOpenAICompatible({
    name: settings.providerName,
    baseURL: settings.baseURL,
    ...(settings.apiKey !== undefined ? { apiKey: settings.apiKey } : {}),
    ...(settings.fetch ? { fetch: settings.fetch } : {}),
    includeUsage: true,
    ...(settings.maxCompletionTokens ? { transformRequestBody: renameMaxTokens } : {}),
  });
  return createSdkModel({
    id: settings.id,
    languageModel: provider.chatModel(settings.modelName),
    timeoutMs: settings.timeoutMs,
    maxRetries: settings.maxRetries,
    ...(settings.promptCacheKey
      ? { promptCacheKeyOptions: (key: string) => ({ [settings.providerName]: { prompt_cache_key: key } }) }
      : {}),
  });
}

function renameMaxTokens(body: Record<string, unknown>): Record<string, unknown> {
  if (body.max_tokens === undefined) return body;
  const { max_tokens, ...rest } = body;
  return { ...rest, max_completion_tokens: max_tokens };
}
