import { type Content, mediaParts } from '../content.ts';

/**
 * Token estimates for images and files, by Anthropic's published rule for images: about
 * width * height / 750 tokens, an image being scaled down to at most about 1.15 megapixels
 * (so at most {@link MAX_IMAGE_TOKENS}). An image of unknown size (an https URL) counts the
 * maximum. A file (PDF) counts {@link MAX_IMAGE_TOKENS} per 100 KB started: an estimate, as
 * its page count is not read.
 */
export const MAX_IMAGE_TOKENS = 1600;
const FILE_BYTES_PER_UNIT = 100 * 1024;

/** Estimated tokens of the images and files of a content (0 for a string). */
export function mediaTokens(content: Content): number {
  let total = 0;
  for (const part of mediaParts(content)) {
    if (part.type === 'input_file') {
      total += MAX_IMAGE_TOKENS * Math.max(1, Math.ceil((part.bytes ?? 0) / FILE_BYTES_PER_UNIT));
    } else if (part.width && part.height) {
      total += Math.min(MAX_IMAGE_TOKENS, Math.ceil((part.width * part.height) / 750));
    } else total += MAX_IMAGE_TOKENS;
  }
  return total;
}
