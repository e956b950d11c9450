import { type Content, mediaParts } from '../content.ts';
import type { TokenCounter } from './token-counter.ts';

/**
 * Token estimates for images and files, by Anthropic's published rule for images: about
 * width * height / 750 tokens, an image being scaled down to at most about 1.15 megapixels
 * (so at most {@link MAX_IMAGE_TOKENS}). An image of unknown size (an https URL) counts the
 * maximum. A file (PDF) counts {@link MAX_IMAGE_TOKENS} per 100 KB started: an estimate, as
 * its page count is not read. An image with `detail: "low"` counts the counter's
 * `lowDetailImageTokens` where its provider has such a flat rule (OpenAI's models:
 * {@link LOW_DETAIL_IMAGE_TOKENS}), else by its size as above.
 */
export const MAX_IMAGE_TOKENS = 1600;
/** OpenAI's published cost of an image sent with `detail: "low"`, whatever its size. */
export const LOW_DETAIL_IMAGE_TOKENS = 85;
const FILE_BYTES_PER_UNIT = 100 * 1024;

/** Estimated tokens of the images and files of a content (0 for a string). */
export function mediaTokens(content: Content, counter: Pick<TokenCounter, 'lowDetailImageTokens'> = {}): number {
  let total = 0;
  for (const part of mediaParts(content)) {
    if (part.type === 'input_image' && part.detail === 'low' && counter.lowDetailImageTokens !== undefined) {
      total += counter.lowDetailImageTokens;
    } else if (part.type === 'input_file') {
      total += MAX_IMAGE_TOKENS * Math.max(1, Math.ceil((part.bytes ?? 0) / FILE_BYTES_PER_UNIT));
    } else if (part.width && part.height) {
      total += Math.min(MAX_IMAGE_TOKENS, Math.ceil((part.width * part.height) / 750));
    } else total += MAX_IMAGE_TOKENS;
  }
  return total;
}
