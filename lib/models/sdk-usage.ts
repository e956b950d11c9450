import type { LanguageModelUsage, ProviderMetadata } from 'ai';
import type { ModelUsage } from './model.ts';

/**
 * The AI SDK's usage as tailgate's. `inputTokens` is every input token, cache reads and writes
 * included (the SDK adds Anthropic's cache_read_input_tokens and cache_creation_input_tokens to
 * its input_tokens); `outputTokens` includes the reasoning tokens. No `inputTokens`: `unreported`.
 */
export function toUsage(usage: LanguageModelUsage | undefined): ModelUsage {
  const cached = usage?.inputTokenDetails?.cacheReadTokens;
  const written = usage?.inputTokenDetails?.cacheWriteTokens;
  const reasoning = usage?.outputTokenDetails?.reasoningTokens;
  return {
    input_tokens: usage?.inputTokens ?? 0,
    output_tokens: usage?.outputTokens ?? 0,
    ...(cached ? { cached_input_tokens: cached } : {}),
    ...(written ? { cache_write_tokens: written } : {}),
    ...(reasoning ? { reasoning_tokens: reasoning } : {}),
    ...(usage?.inputTokens === undefined ? { unreported: true as const } : {}),
  };
}

/**
 * The input usage a stream's provider reported before its output, from the AI SDK's `custom`
 * part of Anthropic's message_start (its `usage` as the Messages API sent it): every input token,
 * cache reads and writes included, as `toUsage` counts them; no output yet. Undefined for any
 * other part, and for a usage without input tokens.
 */
export function reportedInput(part: { kind: string; providerMetadata?: ProviderMetadata | undefined }) {
  if (part.kind !== 'anthropic.message_start') return undefined;
  const usage = part.providerMetadata?.anthropic?.usage as Record<string, unknown> | null | undefined;
  const count = (field: string) => (typeof usage?.[field] === 'number' ? usage[field] : 0);
  const cached = count('cache_read_input_tokens');
  const written = count('cache_creation_input_tokens');
  const input = count('input_tokens') + cached + written;
  if (input <= 0) return undefined;
  const reported: ModelUsage = { input_tokens: input, output_tokens: 0 };
  if (cached > 0) reported.cached_input_tokens = cached;
  if (written > 0) reported.cache_write_tokens = written;
  return reported;
}
