import { countTokens as countCl100k } from 'gpt-tokenizer/encoding/cl100k_base';
import { countTokens as countO200k } from 'gpt-tokenizer/encoding/o200k_base';
import type { TokenEncoders } from '../lib/tokens/token-counter.ts';

/** The longest run of non-space (or of space) characters the BPE counter is given whole. */
export const BPE_RUN_CHARS = 256;
const longRun = new RegExp(`\\S{${BPE_RUN_CHARS + 1},}|\\s{${BPE_RUN_CHARS + 1},}`, 'g');

/**
 * `count(text)`, but a run of more than `BPE_RUN_CHARS` non-space (or space) characters is
 * counted in pieces of at most that many: gpt-tokenizer's BPE takes time quadratic in the
 * length of a piece its pre-tokenizer leaves whole (60,000 characters of base64, minified code
 * or one repeated character: seconds of CPU a turn), and the pieces count at most one token
 * more each than the run whole. Text without such a run is counted whole, exactly.
 */
export function countInPieces(count: (text: string) => number, text: string): number {
  let total = 0;
  let last = 0;
  for (const match of text.matchAll(longRun)) {
    total += count(text.slice(last, match.index));
    const run = match[0];
    for (let at = 0; at < run.length; ) {
      let end = Math.min(run.length, at + BPE_RUN_CHARS);
      // Keep a surrogate pair in one piece.
      if (end < run.length && /[\uDC00-\uDFFF]/.test(run[end]!)) end--;
      total += count(run.slice(at, end));
      at = end;
    }
    last = match.index + run.length;
  }
  return last === 0 ? count(text) : total + count(text.slice(last));
}

/**
 * The real BPE counters (gpt-tokenizer), for the Node and Deno entries only: the ranks are
 * about 1 MiB gzipped, more than the Workers bundle can carry, so the worker counts with the
 * approximation. Special-token text (`<|endoftext|>`) in user content is counted as text.
 */
const asText = { disallowedSpecial: new Set<string>() };
export const bpeTokenEncoders: TokenEncoders = {
  o200k_base: (text) => countInPieces((piece) => countO200k(piece, asText), text),
  cl100k_base: (text) => countInPieces((piece) => countCl100k(piece, asText), text),
};
