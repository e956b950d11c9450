import type {
  ResponseOutputItem,
  ResponseOutputText,
  ResponseTextDeltaEvent,
} from 'openai/resources/responses/responses';
import type { TokenLogprob } from '../models/model.ts';

/**
 * The provider's log probabilities of an output text's tokens (lib/models/logprobs.ts) in the
 * Responses API's shapes: an `output_text` part's (each token's UTF-8 `bytes`, [] when the
 * provider gave none), and a `response.output_text.delta` or `.done` event's (token and logprob).
 */
export function outputTextLogprobs(tokens: readonly TokenLogprob[] = []): ResponseOutputText.Logprob[] {
  return tokens.map((entry) => ({
    token: entry.token,
    bytes: entry.bytes ?? [],
    logprob: entry.logprob,
    top_logprobs: entry.top_logprobs.map((top) => ({ token: top.token, bytes: top.bytes ?? [], logprob: top.logprob })),
  }));
}

export function eventLogprobs(tokens: readonly TokenLogprob[] = []): ResponseTextDeltaEvent.Logprob[] {
  return tokens.map((entry) => ({
    token: entry.token,
    logprob: entry.logprob,
    top_logprobs: entry.top_logprobs.map((top) => ({ token: top.token, logprob: top.logprob })),
  }));
}

/**
 * The log probabilities a kept response object holds of its turn's output items, by their index
 * in the turn's output (its messages and calls, in order; a call's: none): what a replayed turn's
 * text events carry again, as the object it answers holds them.
 */
export function keptLogprobs(response: { output: readonly ResponseOutputItem[] }): TokenLogprob[][] {
  return response.output.flatMap((item) => {
    if (item.type === 'function_call') return [[]];
    if (item.type !== 'message') return [];
    return [
      item.content.flatMap((part) =>
        part.type === 'output_text'
          ? (part.logprobs ?? []).map((entry) => ({
              token: entry.token,
              logprob: entry.logprob,
              bytes: entry.bytes,
              top_logprobs: (entry.top_logprobs ?? []).map((top) => ({
                token: top.token,
                logprob: top.logprob,
                bytes: top.bytes,
              })),
            }))
          : [],
      ),
    ];
  });
}
