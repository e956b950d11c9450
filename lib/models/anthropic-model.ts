import { createAnthropic } from '@ai-sdk/anthropic';
import type { Model } from './model.ts';
import { createSdkModel } from './sdk-model.ts';

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

/** Anthropic's prompt-cache hint, placed on the last item of the stable prefix. */
export const ANTHROPIC_CACHE_BREAKPOINT = { anthropic: { cacheControl: { type: 'ephemeral' } } } as const;

/**
 * A model speaking the Anthropic Messages API (`POST {baseURL}/messages`), streaming included.
 * It places one `cache_control: {type: "ephemeral"}` breakpoint on the block made from the item
 * at `request.cacheBreakpoint`, the end of the stable compacted prefix, so Anthropic caches the
 * prefix across turns.
 */
export function createAnthropicModel(settings: AnthropicModelSettings): Model {
  const provider = createAnthropic({
    apiKey: settings.apiKey,
    ...(settings.baseURL !== undefined ? { baseURL: settings.baseURL } : {}),
    ...(settings.fetch ? { fetch: settings.fetch } : {}),
  });
  return createSdkModel({
    id: settings.id,
    languageModel: provider.messages(settings.modelName),
    timeoutMs: settings.timeoutMs,
    maxRetries: settings.maxRetries,
    cacheBreakpointOptions: ANTHROPIC_CACHE_BREAKPOINT,
  });
}
