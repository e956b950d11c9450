import { type Content, type ContentPart, withoutData } from '../content.ts';

/** Content parts between the Responses API's shapes and tailgate's (lib/content.ts). */

/** A content part of a request's input (lib/openai/schemas.ts). */
export type InputPartBody =
  | { type: 'input_text' | 'output_text'; text: string }
  | {
      type: 'input_image';
      image_url: string;
      detail?: 'auto' | 'low' | 'high' | 'original' | null | undefined;
      file_id?: null | undefined;
    }
  | {
      type: 'input_file';
      file_data?: string | undefined;
      filename?: string | undefined;
      file_url?: string | undefined;
      file_id?: null | undefined;
    };

/**
 * Input content as tailgate's: text parts alone join into one string (as before images);
 * with an image or file, the parts stay parts (`output_text` read as `input_text`).
 */
export function contentOf(content: string | InputPartBody[]): Content {
  if (typeof content === 'string') return content;
  if (content.every((part) => part.type === 'input_text' || part.type === 'output_text'))
    return content.map((part) => (part as { text: string }).text).join('\n');
  return content.map((part): ContentPart => {
    if (part.type === 'input_text' || part.type === 'output_text') return { type: 'input_text', text: part.text };
    // A null field (`file_id`, `detail`) is one not sent.
    return Object.fromEntries(
      Object.entries(part).filter(([, value]) => value !== undefined && value !== null),
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
