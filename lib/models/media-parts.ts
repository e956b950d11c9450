import type { FilePart, TextPart, ToolResultPart } from 'ai';
import {
  type Content,
  type ContentPart,
  describePart,
  imagePlaceholder,
  mediaParts,
  type InputFilePart,
  type InputImagePart,
} from '../content.ts';
import type { PromptItem } from '../items.ts';
import { encodeBase64 } from '../media.ts';
import type { Model } from './model.ts';

/**
 * Content parts (lib/content.ts) as the AI SDK's parts: text, image and file parts for a user
 * message, `content` output for a tool result. An image or file goes as its bytes (read by
 * the turn into `data`) or its https URL; one whose bytes were not read, or a tool result's
 * when the provider takes no media there, goes as a text placeholder (`placeholderText`): an
 * image as `imagePlaceholder` of its item's seq (`[image omitted: image/png 1280x800, 142 KB,
 * item 57]`), the very text `shorten_images` puts in its place, so that pruning an image the
 * provider never got leaves the request as it was (its prompt cache holds); a file as its
 * description (`[application/pdf report.pdf, 12 KB]`).
 */

export type UserPart = TextPart | FilePart;

/** What a provider takes in a user message (`Model.fileUrls`, `Model.imageBytesOnly`). */
export interface UserMedia {
  /** A file by its https URL (else its description). */
  fileUrls: boolean;
  /** Images only as their bytes, and no files (Workers AI): the rest as descriptions. */
  imageBytesOnly: boolean;
  /** The longest image side the provider takes (`Model.maxImageSide`): a larger image as its description. */
  maxImageSide?: number;
  /** The most bytes of an image the provider takes (`Model.maxImageBytes`): a larger one as its description. */
  maxImageBytes?: number;
  /** No image or file at all (`Model.textOnly`): each as its description. */
  textOnly?: boolean;
  /** The parts that go as their description whatever the rules above (`sentAsText` of a prompt's media). */
  asText?: (part: InputImagePart | InputFilePart) => boolean;
}

/** The image limits of a provider (`Model.maxImageSide`, `Model.maxImageBytes`). */
export type ImageLimits = Pick<Model, 'maxImageSide' | 'maxImageBytes'>;

/**
 * Whether `part` is an image whose known width or height is over `maxImageSide`, or whose
 * stored bytes are over `maxImageBytes`.
 */
export function overImageLimits(part: ContentPart, { maxImageSide, maxImageBytes }: ImageLimits = {}): boolean {
  if (part.type !== 'input_image') return false;
  if (maxImageBytes !== undefined && (part.bytes ?? 0) > maxImageBytes) return true;
  if (maxImageSide === undefined) return false;
  return (part.width ?? 0) > maxImageSide || (part.height ?? 0) > maxImageSide;
}

/** What a model takes as images and files, as such: the fields of `Model` that say it. */
export type MediaSupport = Pick<
  Model,
  'toolResultMedia' | 'fileUrls' | 'imageBytesOnly' | 'maxImageSide' | 'maxImageBytes' | 'assistantMedia' | 'textOnly'
>;

/** The media support of `model`, its fields alone. */
export function mediaSupport(model: MediaSupport): MediaSupport {
  return {
    toolResultMedia: model.toolResultMedia === 'after' ? 'after' : model.toolResultMedia === true,
    fileUrls: model.fileUrls === true,
    imageBytesOnly: model.imageBytesOnly === true,
    assistantMedia: model.assistantMedia === true,
    textOnly: model.textOnly === true,
    ...(model.maxImageSide !== undefined ? { maxImageSide: model.maxImageSide } : {}),
    ...(model.maxImageBytes !== undefined ? { maxImageBytes: model.maxImageBytes } : {}),
  };
}

/**
 * The media support of one prompt (`promptMedia`): `MediaSupport`, and what the prompt's
 * number of images changes in it (`Model.manyImages`).
 */
export interface PromptMedia extends MediaSupport {
  /** Whether an image of unknown size goes as a text placeholder too (a request with many images). */
  readonly sizeKnown?: true;
  /**
   * The oldest images and files of the prompt that go as text placeholders: its images but the
   * newest `manyImages.over.images` where the newest is over that rule's side, its oldest images
   * past `manyImages.most`, and its oldest images and files past `manyImages.mostBytes`.
   */
  readonly oldestAsText?: ReadonlySet<ContentPart>;
}

/**
 * Which images and files of `item` (at `index` of its prompt, when the media is a prompt's) the
 * model gets as text placeholders (`partText`): every one where it takes none at all
 * (`Model.textOnly`); every one of an assistant's or system message where it takes none there
 * (`Model.assistantMedia`), and of a tool output sent as a tool result (`toolResult`, asked only
 * then) where it takes no media there; else each file by URL where it takes none, each image by
 * URL and file where it takes images only as bytes, each image larger than it takes
 * (`Model.maxImageSide`) or of unknown size where that must be known (`PromptMedia.sizeKnown`),
 * and the oldest images and files of a prompt holding more than it takes (`PromptMedia.oldestAsText`).
 * A tool output sent as user text (answered after other items) goes as a user message does.
 */
export function sentAsText(
  media: PromptMedia,
  item: PromptItem,
  toolResult: () => boolean,
): (part: InputImagePart | InputFilePart) => boolean {
  if (media.textOnly) return () => true;
  if (item.type === 'message' && item.role !== 'user' && !media.assistantMedia) return () => true;
  if (item.type === 'function_call_output' && !media.toolResultMedia && toolResult()) return () => true;
  const byRule = (part: InputImagePart | InputFilePart) =>
    overImageLimits(part, media) ||
    (media.sizeKnown === true &&
      part.type === 'input_image' &&
      (part.width === undefined || part.height === undefined)) ||
    (media.imageBytesOnly
      ? part.type === 'input_file' || part.image_url !== undefined
      : !media.fileUrls && part.type === 'input_file' && part.file_url !== undefined);
  const oldest = media.oldestAsText;
  return oldest === undefined ? byRule : (part) => oldest.has(part) || byRule(part);
}

/**
 * The media support of `media` for one prompt (`Model.manyImages`; `toolResult` says whether the
 * item at an index goes as a tool result). With more than `over` images the prompt sends as such
 * (`sentAsText`), its `maxImageSide` is lowered to the many-image one and an image of unknown
 * size (an https URL, one stored without it) goes as a text placeholder too, as the provider
 * could refuse it; unless the newest image is such an image (a large screenshot just taken, which
 * that would hide): then the newest `over.images` go as they are, and the older as text
 * placeholders, a fifth of `over.images` at a time. With more than `most` images sent as such
 * after that, the oldest images go as text placeholders; with more than `mostBytes` of base64 in
 * the images and files sent as such, the oldest images and files do (`oldestOver`): the
 * placeholders then move only once every so many new images or bytes, not on every turn, so the
 * prompt's prefix (and the provider's cache of it) holds between. The adapter and the receipt
 * work it out alike from the prompt's structure (the parts' stored `bytes`), not from which
 * blobs were read.
 */
export function promptMedia(
  media: MediaSupport,
  manyImages: Model['manyImages'],
  prompt: readonly PromptItem[],
  toolResult: (index: number) => boolean,
): PromptMedia {
  if (!manyImages) return media;
  const { over, most, mostBytes } = manyImages;
  let many: PromptMedia = media;
  let sent = sentMedia(media, prompt, toolResult);
  const oldest: (InputImagePart | InputFilePart)[] = [];
  const images = () => sent.filter((part) => part.type === 'input_image');
  if (over !== undefined && images().length > over.images) {
    const all = images();
    if (beyondSide(all.at(-1)!, over.maxImageSide)) {
      // Lowering the side would send the newest image (the screenshot just taken) as text: the
      // request holds the newest `over.images` images instead, as large as they are.
      const cut = new Set<InputImagePart | InputFilePart>(oldestOf(all, over.images));
      oldest.push(...cut);
      sent = sent.filter((part) => !cut.has(part));
    } else {
      const maxImageSide = Math.min(media.maxImageSide ?? over.maxImageSide, over.maxImageSide);
      many = { ...mediaSupport(media), maxImageSide, sizeKnown: true };
      sent = sentMedia(many, prompt, toolResult);
    }
  }
  if (most !== undefined) oldest.push(...oldestOf(images(), most));
  if (mostBytes !== undefined) oldest.push(...sent.slice(0, oldestOver(sent.map(base64Length), mostBytes)));
  return oldest.length === 0 ? many : { ...many, oldestAsText: new Set(oldest) };
}

/** The oldest of `images` that go as text so at most `most` are left (`oldestOver`, each weighing 1). */
function oldestOf(images: readonly InputImagePart[], most: number): InputImagePart[] {
  return images.slice(
    0,
    oldestOver(
      images.map(() => 1),
      most,
    ),
  );
}

/** Whether an image is larger than `side` on a side, or of unknown size. */
function beyondSide(image: InputImagePart, side: number): boolean {
  return image.width === undefined || image.height === undefined || Math.max(image.width, image.height) > side;
}

/**
 * How many of the oldest of the media weighing `weights` (oldest first: 1 each for a count, base64
 * bytes for a size) go as text so the rest weigh at most `most`: none when all do; else all
 * those that start before the first multiple of a fifth of `most` (`oldestStep`) that is at
 * least what must go. Where each image starts depends only on the images before it, so the cut
 * moves only once the images after it outgrow `most` by another step.
 */
export function oldestOver(weights: readonly number[], most: number): number {
  const total = weights.reduce((sum, weight) => sum + weight, 0);
  if (total <= most) return 0;
  const step = oldestStep(most);
  const cut = Math.ceil((total - most) / step) * step;
  let before = 0;
  let count = 0;
  while (count < weights.length && before < cut) before += weights[count++]!;
  return count;
}

/** How much of `most` goes as text at a time in a prompt over it (`oldestOver`): a fifth. */
export function oldestStep(most: number): number {
  return Math.max(1, Math.floor(most / 5));
}

/** The images and files `media` sends as such (`sentAsText`), in order. */
function sentMedia(
  media: PromptMedia,
  prompt: readonly PromptItem[],
  toolResult: (index: number) => boolean,
): (InputImagePart | InputFilePart)[] {
  const parts: (InputImagePart | InputFilePart)[] = [];
  for (let index = 0; index < prompt.length; index++) {
    const item = prompt[index]!;
    if (item.type === 'function_call') continue;
    const found = mediaParts(item.type === 'message' ? item.content : item.output);
    if (found.length === 0) continue;
    const asText = sentAsText(media, item, () => toolResult(index));
    for (const part of found) if (!asText(part)) parts.push(part);
  }
  return parts;
}

/**
 * The length in base64 of an image's or file's bytes as a request carries them: a stored one's,
 * an inline `data:` URL's or `file_data`'s; 0 for an https URL, which the provider fetches itself.
 */
function base64Length(part: InputImagePart | InputFilePart): number {
  if (part.blob !== undefined) return Math.ceil((part.bytes ?? 0) / 3) * 4;
  if (part.type === 'input_file') return part.file_data?.length ?? 0;
  return part.image_url !== undefined && /^data:/i.test(part.image_url) ? part.image_url.length : 0;
}

/**
 * How a part reads where the provider does not get it as such: text as is, an image as
 * `imagePlaceholder` of `seq` (its item's), a file as its description.
 */
export function partText(part: ContentPart, seq: number | undefined): string {
  if (part.type === 'input_text') return part.text;
  return part.type === 'input_image' ? imagePlaceholder(part, seq) : describePart(part);
}

/**
 * The text of a content where the provider takes no media in its place (a tool result's on
 * Workers AI, an assistant's or system message's): a string as is, parts joined by newlines,
 * each as `partText`. `seq` is the item's.
 */
export function placeholderText(content: Content, seq: number | undefined): string {
  if (typeof content === 'string') return content;
  return content.map((part) => partText(part, seq)).join('\n');
}

/**
 * The parts of a user message made from `content` (of the item numbered `seq`); `options` go
 * on the last part. An image or file the provider does not take (`media`) goes as `partText`.
 */
export function userParts(
  content: Content,
  seq: number | undefined,
  options: Pick<TextPart, 'providerOptions'>,
  media: UserMedia,
): UserPart[] {
  const parts: UserPart[] =
    typeof content === 'string'
      ? [{ type: 'text', text: content }]
      : content
          // A blank text block is refused (Anthropic: "text content blocks must contain non-whitespace text").
          .filter((part) => part.type !== 'input_text' || part.text.trim() !== '')
          .map((part) => userPart(part, seq, media));
  const last = parts.length - 1;
  return parts.map((part, index) =>
    index === last && options.providerOptions
      ? { ...part, providerOptions: { ...part.providerOptions, ...options.providerOptions } }
      : part,
  );
}

/**
 * An image or file as a user message's part, or as its `partText` where the provider does not
 * take it (`media`) or neither its bytes nor an https URL are at hand. An image's `detail` goes
 * as the part's `openaiCompatible` provider options, which the AI SDK's OpenAI-compatible
 * provider spreads into the part it sends (lib/models/openai-compatible-model.ts moves it into
 * `image_url`); other providers ignore it.
 */
export function userPart(part: ContentPart, seq: number | undefined, media: UserMedia): UserPart {
  if (part.type === 'input_text') return { type: 'text', text: part.text };
  const source = sourceOf(part);
  if (
    !source ||
    media.textOnly ||
    overImageLimits(part, media) ||
    media.asText?.(part) ||
    (source instanceof URL && part.type === 'input_file' && !media.fileUrls) ||
    (media.imageBytesOnly && (part.type === 'input_file' || source instanceof URL))
  )
    return { type: 'text', text: partText(part, seq) };
  return {
    type: 'file',
    data: source,
    mediaType: part.media_type ?? (part.type === 'input_image' ? 'image' : 'application/pdf'),
    ...(part.type === 'input_file' && part.filename ? { filename: part.filename } : {}),
    ...(part.type === 'input_image' && part.detail
      ? { providerOptions: { openaiCompatible: { detail: part.detail } } }
      : {}),
  };
}

/**
 * A tool result's output (of the item numbered `seq`): a string as text; parts as `content` with
 * media inline when `media` (the provider takes images and files in tool results), without
 * blank text parts, else one text, `placeholderText` (also when every part is blank text). An
 * image over `limits` (`overImageLimits`), or one `asText` says (`sentAsText` of the prompt's media), goes as
 * `partText` too.
 */
export function toolResultOutput(
  content: Content,
  seq: number | undefined,
  media: boolean,
  limits?: ImageLimits,
  asText?: (part: InputImagePart | InputFilePart) => boolean,
): ToolResultPart['output'] {
  // A blank text block is refused inside a tool result too ("text content blocks must be non-empty"):
  // blank text goes as none.
  const text = (value: string) => ({ type: 'text' as const, value: value.trim() === '' ? '' : value });
  if (typeof content === 'string') return text(content);
  const parts = content.filter((part) => part.type !== 'input_text' || part.text.trim() !== '');
  if (!media || parts.length === 0) return text(placeholderText(content, seq));
  const value = parts.map((part) => {
    const source =
      part.type === 'input_text' || overImageLimits(part, limits) || asText?.(part) ? undefined : sourceOf(part);
    if (part.type === 'input_text' || !source) return { type: 'text' as const, text: partText(part, seq) };
    const data =
      source instanceof URL
        ? { type: 'url' as const, url: source }
        : { type: 'data' as const, data: encodeBase64(source) };
    const mediaType = part.media_type ?? (part.type === 'input_image' ? 'image' : 'application/pdf');
    const filename = part.type === 'input_file' && part.filename ? { filename: part.filename } : {};
    return { type: 'file' as const, mediaType, data, ...filename };
  });
  return { type: 'content', value };
}

/** The bytes read for a part, or its https URL; undefined when neither is at hand. */
function sourceOf(part: Exclude<ContentPart, { type: 'input_text' }>): Uint8Array | URL | undefined {
  if (part.data) return part.data;
  const url = part.type === 'input_image' ? part.image_url : part.file_url;
  return url?.startsWith('https://') ? new URL(url) : undefined;
}
