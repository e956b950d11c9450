import { type Content, type ContentPart, withoutData } from '../content.ts';

/** Content parts between the Responses API's shapes and tailgate's (lib/content.ts). */

/** A part's `prompt_cache_breakpoint` (advisory, not kept). */
type CacheBreakpoint = { mode: 'explicit'; ttl?: '30m' | '12h' | undefined } | null | undefined;

/** A content part of a request's input (lib/openai/input-schemas.ts). */
export type InputPartBody =
  | { type: 'input_text' | 'output_text'; text: string; prompt_cache_breakpoint?: CacheBreakpoint }
  /** An assistant message's refusal sent back (history from OpenAI): its text. */
  | { type: 'refusal'; refusal: string }
  | {
      type: 'input_image';
      image_url: string;
      detail?: 'auto' | 'low' | 'high' | 'original' | null | undefined;
      file_id?: null | undefined;
      prompt_cache_breakpoint?: CacheBreakpoint;
    }
  | {
      type: 'input_file';
      file_data?: string | undefined;
      filename?: string | undefined;
      file_url?: string | undefined;
      file_id?: null | undefined;
      detail?: 'auto' | 'low' | 'high' | null | undefined;
      prompt_cache_breakpoint?: CacheBreakpoint;
    };

/** A text part's text (a refusal's is its `refusal`). */
function textOf(part: InputPartBody): string | undefined {
  if (part.type === 'refusal') return part.refusal;
  return part.type === 'input_text' || part.type === 'output_text' ? part.text : undefined;
}

/**
 * Input content as tailgate's: text parts alone join into one string (as before images);
 * with an image or file, the parts stay parts (`output_text` and a `refusal` read as
 * `input_text`). What is advisory is not kept: a part's `prompt_cache_breakpoint`, a file's `detail`.
 */
export function contentOf(content: string | InputPartBody[]): Content {
  if (typeof content === 'string') return content;
  if (content.every((part) => textOf(part) !== undefined)) return content.map(textOf).join('\n');
  return content.map((part): ContentPart => {
    const text = textOf(part);
    if (text !== undefined) return { type: 'input_text', text };
    const { prompt_cache_breakpoint: _breakpoint, ...kept } = part as Exclude<InputPartBody, { type: 'refusal' }>;
    if (kept.type === 'input_file') delete kept.detail;
    // A null field (`file_id`, an image's `detail`) is one not sent.
    return Object.fromEntries(
      Object.entries(kept).filter(([, value]) => value !== undefined && value !== null),
    ) as ContentPart;
  });
}

/**
 * Stored content as the facade shows it: parts as stored, an image or file kept out of line
 * with its reference (`blob`, `media_type`, `bytes`; its bytes at GET /v1/sessions/{id}/blobs/{blob}).
 */
export function responseContent<Value extends Content>(content: Value): never {
  return withoutData(content) as never;
}
