import { type Content, type InputImagePart, mediaParts } from '../content.ts';

/**
 * Token estimates for images and files, by each provider's published rule for images:
 *
 * - `anthropic` (Anthropic, and every model of no known family): about width * height / 750
 *   tokens, an image being scaled down to at most about 1.15 megapixels (so at most
 *   {@link MAX_IMAGE_TOKENS}).
 * - `openai` (the OpenAI families of lib/tokens/model-limits.ts): `detail: "low"` is
 *   {@link OPENAI_LOW_DETAIL_TOKENS}; otherwise the image is scaled to fit 2048x2048, then
 *   down so its shortest side is at most 768, and costs 85 plus 170 per 512-pixel tile.
 *
 * An image of unknown size (an https URL) counts the rule's maximum. A file (PDF) counts
 * {@link MAX_IMAGE_TOKENS} per 100 KB started under either: an estimate, as its page count is
 * not read.
 */
export type ImageTokenRule = 'anthropic' | 'openai';

export const MAX_IMAGE_TOKENS = 1600;
export const OPENAI_LOW_DETAIL_TOKENS = 85;
/** The most tiles an image can take under OpenAI's rule (8, e.g. 768x2048 after scaling). */
const OPENAI_MAX_TOKENS = 85 + 170 * 8;
const FILE_BYTES_PER_UNIT = 100 * 1024;

/** Estimated tokens of the images and files of a content (0 for a string). */
export function mediaTokens(content: Content, rule: ImageTokenRule = 'anthropic'): number {
  let total = 0;
  for (const part of mediaParts(content)) {
    if (part.type === 'input_file') {
      total += MAX_IMAGE_TOKENS * Math.max(1, Math.ceil((part.bytes ?? 0) / FILE_BYTES_PER_UNIT));
    } else total += rule === 'openai' ? openAiImageTokens(part) : anthropicImageTokens(part);
  }
  return total;
}

function anthropicImageTokens(part: InputImagePart): number {
  if (!part.width || !part.height) return MAX_IMAGE_TOKENS;
  return Math.min(MAX_IMAGE_TOKENS, Math.ceil((part.width * part.height) / 750));
}

function openAiImageTokens(part: InputImagePart): number {
  if (part.detail === 'low') return OPENAI_LOW_DETAIL_TOKENS;
  if (!part.width || !part.height) return OPENAI_MAX_TOKENS;
  let scale = Math.min(1, 2048 / Math.max(part.width, part.height));
  scale *= Math.min(1, 768 / (Math.min(part.width, part.height) * scale));
  const tiles = Math.ceil((part.width * scale) / 512) * Math.ceil((part.height * scale) / 512);
  return 85 + 170 * tiles;
}
