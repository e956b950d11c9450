import { countTokens as countCl100k } from 'gpt-tokenizer/encoding/cl100k_base';
import { countTokens as countO200k } from 'gpt-tokenizer/encoding/o200k_base';
import type { TokenEncoders } from '../lib/tokens/token-counter.ts';

/**
 * The real BPE counters (gpt-tokenizer), for the Node and Deno entries only: the ranks are
 * about 1 MiB gzipped, more than the Workers bundle can carry, so the worker counts with the
 * approximation. Special-token text (`<|endoftext|>`) in user content is counted as text.
 */
const asText = { disallowedSpecial: new Set<string>() };
export const bpeTokenEncoders: TokenEncoders = {
  o200k_base: (text) => countO200k(text, asText),
  cl100k_base: (text) => countCl100k(text, asText),
};
