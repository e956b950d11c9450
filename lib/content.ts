import { z } from 'zod';

/**
 * Content parts: a message's `content`, or a function_call_output's `output`, may be a string
 * or an array of parts, as in OpenAI's Responses API (docs/API.md, "Content parts").
 *
 * A client sends an image as `image_url` (https or a `data:` URL) and a file as `file_data`
 * (base64) or `file_url`. The log keeps https URLs as given; a `data:` payload is stored once
 * as a blob (lib/session/attachments.ts) and the part keeps a reference to it:
 * `{blob, media_type, bytes, width?, height?}`. In a prompt being sent, a referenced part
 * carries its bytes in `data` (read by the turn only for parts it sends).
 */

/** The reference a stored part keeps of its blob (all set together, by the service). */
const blobRefFields = {
  /** SHA-256 (hex) of the bytes: the blob's key under `blob/<generation>/`. */
  blob: z
    .string()
    .regex(/^[0-9a-f]{64}$/)
    .optional()
    .meta({
      description:
        'Written by the service: the SHA-256 of the stored bytes, served by GET /v1/sessions/{id}/blobs/{sha256}',
    }),
  media_type: z.string().optional().meta({ description: 'Written by the service: the media type read from the bytes' }),
  bytes: z.number().int().nonnegative().optional().meta({ description: 'Written by the service: the size in bytes' }),
  width: z
    .number()
    .int()
    .positive()
    .optional()
    .meta({ description: "Written by the service: from the image's header" }),
  height: z
    .number()
    .int()
    .positive()
    .optional()
    .meta({ description: "Written by the service: from the image's header" }),
};

export const inputTextPartSchema = z.object({ type: z.literal('input_text'), text: z.string() }).strict();

const detailSchema = z.enum(['auto', 'low', 'high', 'original']).meta({
  description:
    'Passed to OpenAI-compatible providers as image_url.detail (low: 85 tokens for OpenAI models); ' +
    'Anthropic has no such setting and gets the image as is',
});

export const inputImagePartSchema = z
  .object({
    type: z.literal('input_image'),
    image_url: z
      .string()
      .optional()
      .meta({
        description:
          'An https URL (stored and passed on as given, never fetched) or a base64 data: URL ' +
          '(PNG, JPEG, GIF or WebP, at most MAX_IMAGE_BYTES; stored as a blob, replaced by `blob`)',
      }),
    detail: detailSchema.optional(),
    ...blobRefFields,
  })
  .strict()
  .refine((part) => (part.image_url === undefined) !== (part.blob === undefined), {
    message: 'an input_image needs `image_url` (https or data: URL)',
  });

export const inputFilePartSchema = z
  .object({
    type: z.literal('input_file'),
    filename: z.string().min(1).max(256).optional().meta({ description: 'The file name; required with `file_data`' }),
    file_data: z.string().optional().meta({
      description:
        'A PDF as base64 or a base64 data: URL, at most MAX_FILE_BYTES; stored as a blob, replaced by `blob`',
    }),
    file_url: z.string().optional().meta({ description: 'An https URL, stored and passed on as given, never fetched' }),
    ...blobRefFields,
  })
  .strict()
  .refine((part) => [part.file_data, part.file_url, part.blob].filter((value) => value !== undefined).length === 1, {
    message: 'an input_file needs exactly one of `file_data` (base64, with `filename`) and `file_url`',
  });

export const contentPartSchema = z.discriminatedUnion('type', [
  inputTextPartSchema,
  inputImagePartSchema,
  inputFilePartSchema,
]);

/** A string, or at least one part. */
export const contentSchema = z.union([z.string(), z.array(contentPartSchema).min(1).max(1000)]);

export type InputTextPart = z.infer<typeof inputTextPartSchema>;
export type InputImagePart = z.infer<typeof inputImagePartSchema> & { data?: Uint8Array | undefined };
export type InputFilePart = z.infer<typeof inputFilePartSchema> & { data?: Uint8Array | undefined };
export type ContentPart = InputTextPart | InputImagePart | InputFilePart;
export type Content = string | ContentPart[];

/**
 * How an image or file reads as text: `[image/png 1280x800, 142 KB]`, `[image https://…]`,
 * `[application/pdf report.pdf, 12 KB]`. The echo model, transcripts and placeholders use it.
 */
export function describePart(part: InputImagePart | InputFilePart): string {
  const name = part.type === 'input_file' && part.filename ? ` ${part.filename}` : '';
  if (part.blob === undefined) {
    const kind = part.type === 'input_image' ? 'image' : 'file';
    const url = part.type === 'input_image' ? part.image_url : part.file_url;
    return `[${kind}${name} ${url && !/^data:/i.test(url) ? url : 'inline'}]`;
  }
  const size = part.width && part.height ? ` ${part.width}x${part.height}` : '';
  return `[${part.media_type}${name}${size}, ${Math.max(1, Math.round((part.bytes ?? 0) / 1024))} KB]`;
}

/**
 * How an image reads where a prompt carries it as text: the image as `describePart` names it
 * and the seq of its item, e.g. `[image omitted: image/png 1280x800, 142 KB, item 57]`. Built
 * from the part's reference alone, so the same image always gives the same bytes. One text for
 * both ways an image becomes text: `shorten_images` pruning it (lib/strategies/shorten-images.ts)
 * and a provider adapter sending it where the provider takes no image
 * (lib/models/media-parts.ts), so that pruning an image the provider never got changes no byte
 * of the prompt. The seq, not the turn: items do not carry their turn, and on a tail view the
 * records that know it are not read (why: lib/strategies/README.md, `shorten_images`).
 */
export function imagePlaceholder(part: InputImagePart, seq: number | undefined): string {
  const item = seq === undefined ? '' : `, item ${seq}`;
  return `[image omitted: ${describePart(part).slice(1, -1)}${item}]`;
}

/** The text of a content: a string as is; parts joined, each image or file described. */
export function contentText(content: Content): string {
  if (typeof content === 'string') return content;
  return content.map((part) => (part.type === 'input_text' ? part.text : describePart(part))).join('\n');
}

/** What mediaParts gives a content without images or files: one array, made once. */
const NO_MEDIA: readonly (InputImagePart | InputFilePart)[] = Object.freeze([]);

/**
 * The image and file parts of a content (none for a string). A content without any is given
 * the same empty array, not a new one: a turn asks this of every item of its prompt, several
 * times (token counts, media reads, the receipt).
 */
export function mediaParts(content: Content): readonly (InputImagePart | InputFilePart)[] {
  if (typeof content === 'string' || !content.some((part) => part.type !== 'input_text')) return NO_MEDIA;
  return content.filter((part): part is InputImagePart | InputFilePart => part.type !== 'input_text');
}

/**
 * A content as one string that changes whenever the content does (a string as is; parts as
 * JSON, without bytes read for a prompt): for prompt hashes and history matching.
 */
export function contentKey(content: Content): string {
  if (typeof content === 'string') return content;
  return JSON.stringify(withoutData(content));
}

/** A content without the bytes a turn read into it (for responses that show the prompt). */
export function withoutData(content: Content): Content {
  if (typeof content === 'string') return content;
  return content.map((part) => {
    if (part.type === 'input_text' || part.data === undefined) return part;
    const { data: _data, ...rest } = part;
    return rest;
  });
}
