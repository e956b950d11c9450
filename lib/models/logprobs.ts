import { z } from 'zod';
import { ModelError } from './errors.ts';

/**
 * Log probabilities of output tokens, as a provider that gives them answers them: Chat
 * Completions' `choices[].logprobs.content` entries (the `openai` package's
 * `ChatCompletionTokenLogprob`). The facade answers them in OpenAI's shapes (lib/openai/logprobs.ts).
 */
const topLogprobSchema = z.object({
  token: z.string(),
  logprob: z.number(),
  bytes: z.array(z.number().int()).nullable().optional(),
});

// null is none, as some OpenAI-compatible providers answer it.
const tokenLogprobSchema = topLogprobSchema.extend({ top_logprobs: z.array(topLogprobSchema).nullable().optional() });

/** One output token's log probability, and the most likely tokens at its position (`top_logprobs`). */
export interface TokenLogprob {
  token: string;
  logprob: number;
  bytes: number[] | null;
  top_logprobs: { token: string; logprob: number; bytes: number[] | null }[];
}

/**
 * What a Chat Completions body or stream chunk holds of log probabilities: its first choice's
 * `logprobs.content` and `logprobs.refusal` (null or absent: none). Only this is read of it; the rest is the SDK's.
 */
const chatBodySchema = z.looseObject({
  choices: z
    .array(
      z.looseObject({
        logprobs: z
          .looseObject({
            content: z.array(tokenLogprobSchema).nullable().optional(),
            refusal: z.array(tokenLogprobSchema).nullable().optional(),
          })
          .nullable()
          .optional(),
      }),
    )
    .optional(),
});

/**
 * The text token log probabilities of a Chat Completions response body or stream chunk (its first
 * choice's content's, then its refusal's; [] when it has none). A malformed `logprobs` is the provider's
 * failure (a `ModelError` naming `model`).
 */
export function chatLogprobs(body: unknown, model: string): TokenLogprob[] {
  // An SDK error chunk or a non-object body carries none: the SDK reports it.
  if (typeof body !== 'object' || body === null || 'error' in body) return [];
  const parsed = chatBodySchema.safeParse(body);
  if (!parsed.success) {
    throw new ModelError('the provider returned malformed log probabilities', {
      model,
      issues: parsed.error.issues,
    });
  }
  // The AI SDK answers a refusal as the message's text: its tokens are the refusal's.
  const given = parsed.data.choices?.[0]?.logprobs;
  return [...(given?.content ?? []), ...(given?.refusal ?? [])].map((entry) => ({
    token: entry.token,
    logprob: entry.logprob,
    bytes: entry.bytes ?? null,
    top_logprobs: (entry.top_logprobs ?? []).map((top) => ({
      token: top.token,
      logprob: top.logprob,
      bytes: top.bytes ?? null,
    })),
  }));
}

/** Chat Completions' request fields that ask for `top` most likely tokens at each position too. */
export function chatLogprobsFields(top: number | undefined): Record<string, unknown> {
  return top === undefined ? {} : { logprobs: true, top_logprobs: top };
}

/**
 * Appends `tokens` to `to` one at a time: a long answer's are more than a call's arguments may
 * hold (`push(...tokens)` overflows the stack past about 100,000).
 */
export function appendTokens(to: TokenLogprob[], tokens: readonly TokenLogprob[]): void {
  for (const token of tokens) to.push(token);
}
