import type { FilePart, TextPart, ToolResultPart } from 'ai';
import type { Content } from '../content.ts';
import { partText, type UserMedia, userPart } from './media-parts.ts';

/**
 * A tool result for a provider whose tool messages hold text only (Chat Completions): its
 * `output`, the text of the tool message, and the `parts` of the user message that follows the
 * run of tool messages answering one assistant message (lib/models/convert-to-model-messages.ts;
 * nothing may stand between a tool message and its assistant message, a user message after the
 * last of them may).
 */
export interface ToolResultAfter {
  output: ToolResultPart['output'];
  /** Each image and file the provider takes as such, after the text that names its call. */
  parts: (TextPart | FilePart)[];
}

/**
 * A tool result's content (of the item numbered `seq`, answering the call sent as `callId`) with
 * its images and files after the tool messages: the tool message is the content's text, parts
 * joined by newlines, an image or file the provider takes (`userPart`: its bytes or https URL
 * read, within `media`) as `[image 1: in the message after the tool results]`, any other as
 * `partText`; the user message has each taken one as `Image 1 of tool call <callId>:` and the
 * part itself (images and files numbered apart, from 1 in each result). A content with none
 * taken is the text placeholders alone: the tool message as it reads where the provider takes no
 * media in tool results, so a prompt whose tool outputs hold no image is sent as it was, and an
 * image pruned later (`shorten_images`) changes the request from its tool message on.
 */
export function toolResultAfter(
  content: Content,
  seq: number | undefined,
  callId: string,
  media: UserMedia,
): ToolResultAfter {
  if (typeof content === 'string') return { output: { type: 'text', value: content }, parts: [] };
  const numbers = { image: 0, file: 0 };
  const parts: ToolResultAfter['parts'] = [];
  const lines = content.map((part) => {
    if (part.type === 'input_text') return part.text;
    const sent = userPart(part, seq, media);
    if (sent.type !== 'file') return partText(part, seq);
    const kind = part.type === 'input_image' ? 'image' : 'file';
    numbers[kind] += 1;
    const { placeholder, label } = sentAfter(kind, numbers[kind], callId);
    parts.push({ type: 'text', text: label }, sent);
    return placeholder;
  });
  return { output: { type: 'text', value: lines.join('\n') }, parts };
}

/**
 * The texts of a tool result's `number`th image (or file) sent after the tool messages: its
 * placeholder in the tool message, and the label before it in the user message (what a token
 * count of the prompt counts for it: lib/tokens/token-counter.ts).
 */
export function sentAfter(kind: 'image' | 'file', number: number, callId: string) {
  const name = `${kind} ${number}`;
  return {
    placeholder: `[${name}: in the message after the tool results]`,
    label: `${name[0]!.toUpperCase()}${name.slice(1)} of tool call ${callId}:`,
  };
}
