import { contentText } from '../content.ts';
import { SUMMARY_HEADER } from '../compaction/summary-transcript.ts';
import { InvalidRequestError } from '../errors.ts';
import type { ClientItem, ReasoningItem } from '../items.ts';
import { contentOf, type InputPartBody } from './input-content.ts';

/**
 * A Responses request's input (a conversation's `items`) as tailgate items: pure mapping, no I/O.
 */

/** An input item as the request schema (functions/routes/openai/schemas.ts) validated it. */
export type InputItemBody =
  | {
      type?: 'message' | undefined;
      role: 'user' | 'assistant' | 'system' | 'developer';
      content: string | InputPartBody[];
    }
  | { type: 'function_call'; call_id: string; name: string; arguments: string }
  | {
      type: 'function_call_output';
      call_id: string;
      output: string | Exclude<InputPartBody, { type: 'refusal' }>[];
    }
  | { type: 'compaction'; encrypted_content: string; id?: string | null | undefined }
  /** The model's reasoning sent back: the `reasoning` of the assistant message or function_call after it. */
  | {
      type: 'reasoning';
      summary: { type: 'summary_text'; text: string }[];
      encrypted_content?: string | null | undefined;
    };

/** A compaction item the input starts from (nothing before it kept): its id and summary. */
export interface InputAnchor {
  id: string;
  summary: string;
}

/** A compaction item of a request's input: `at` items of its history came before it. */
export interface SentCompaction {
  at: number;
  id: string | null;
  summary: string;
}

/** A request's input as inputToItems reads it (what PreparedRequest, lib/openai/request.ts, carries of it). */
export interface RequestInput {
  instructions: string[];
  items: ClientItem[];
  /**
   * The items as the client holds them, compaction items left out, and how many come before the
   * last compaction item: what a resent history is matched by (lib/openai/history-index.ts).
   */
  history: ClientItem[];
  compactedAt: number;
  /** The compaction item the input starts from, when it keeps nothing before it. */
  anchor?: InputAnchor;
  /** Each compaction item sent, and how many items of `history` come before it. */
  compactions: SentCompaction[];
  /** The position in `input` of each item of `items` (a summary: its compaction item's), and of `history`. */
  positions: { items: number[]; history: number[] };
}

/**
 * The request input as tailgate items, with the leading system and developer messages taken
 * out as instructions (tailgate keeps one system prompt: the session's `instructions`).
 * A system message after the first other item is refused. A compaction item replaces every
 * item before it: the items start with its summary as a user message (as a compacted
 * context's prompt does). `history` is every item as the client holds it, compaction items left
 * out, and `compactedAt` how many of them come before the last compaction item (0: none): a
 * client that appends each response's output, its compaction item included, resends the whole
 * history so (lib/openai/history-index.ts). `anchor` is the compaction item (with an id) the
 * input starts from when it keeps no item before it: a client that drops everything before a
 * compaction item, as OpenAI recommends, resends its history so. A reasoning item goes with the
 * assistant message or function_call right after it, as that item's `reasoning` (its summary
 * and `encrypted_content`, which the provider gets back); before any other item it is left out.
 * An error names the entry by its place in `input` (lib/openai/request.ts `inputInRequest` names it
 * by its place in the request: a conversation's `items`).
 */
export function inputToItems(input: string | InputItemBody[]): RequestInput {
  const field = 'input';
  if (typeof input === 'string') {
    const items: ClientItem[] = [{ type: 'message', role: 'user', content: input }];
    return {
      instructions: [],
      items,
      history: items,
      compactedAt: 0,
      compactions: [],
      positions: { items: [0], history: [0] },
    };
  }
  const compactions: SentCompaction[] = [];
  const instructions: string[] = [];
  let items: ClientItem[] = [];
  const history: ClientItem[] = [];
  let compactedAt = 0;
  let anchor: InputAnchor | undefined;
  const positions: { items: number[]; history: number[] } = { items: [], history: [] };
  // The reasoning items since the last other item: the reasoning of the next one, when it is the
  // model's (an assistant message or a function_call); before any other item it is left out.
  let reasoning: ReasoningItem[] = [];
  const push = (item: ClientItem, index: number) => {
    const model = item.type === 'function_call' || (item.type === 'message' && item.role === 'assistant');
    const taken = model && reasoning.length > 0 ? ({ ...item, reasoning } as ClientItem) : item;
    reasoning = [];
    items.push(taken);
    history.push(taken);
    positions.items.push(index);
    positions.history.push(index);
  };
  input.forEach((entry, index) => {
    if (entry.type === 'reasoning') {
      reasoning.push(reasoningOf(entry, index, reasoning.length, field));
      return;
    }
    if (entry.type === 'compaction') {
      reasoning = [];
      items = [{ type: 'message', role: 'user', content: SUMMARY_HEADER + entry.encrypted_content }];
      positions.items = [index];
      compactedAt = history.length;
      compactions.push({ at: history.length, id: entry.id ?? null, summary: entry.encrypted_content });
      if (history.length === 0) anchor = entry.id ? { id: entry.id, summary: entry.encrypted_content } : undefined;
    } else if (entry.type === 'function_call')
      push({ type: 'function_call', call_id: entry.call_id, name: entry.name, arguments: entry.arguments }, index);
    else if (entry.type === 'function_call_output')
      push({ type: 'function_call_output', call_id: entry.call_id, output: contentOf(entry.output) }, index);
    else if (entry.role === 'system' || entry.role === 'developer') {
      if (items.length > 0) {
        throw new InvalidRequestError(
          `${field}[${index}].role: a ${entry.role} message must come before every other item ` +
            '(it becomes the instructions)',
          { field: `${field}.${index}.role` },
        );
      }
      checkParts(entry.role, entry.content, `${field}[${index}]`, `${field}.${index}`);
      instructions.push(contentText(contentOf(entry.content)));
    } else {
      checkParts(entry.role, entry.content, `${field}[${index}]`, `${field}.${index}`);
      push({ type: 'message', role: entry.role, content: contentOf(entry.content) }, index);
    }
  });
  return { instructions, items, history, compactedAt, ...(anchor ? { anchor } : {}), compactions, positions };
}

/**
 * The parts OpenAI takes by role: the model's (`output_text`, `refusal`) in an assistant message
 * alone, an image or file in any other. An assistant message's `input_text` is taken, as text
 * (a stored item sent back by reference carries such parts: lib/openai/item-references.ts).
 */
function checkParts(role: string, content: string | InputPartBody[], name: string, field: string): void {
  if (typeof content === 'string') return;
  const assistant = role === 'assistant';
  const at = content.findIndex((part) =>
    assistant ? part.type === 'input_image' || part.type === 'input_file' : /^(output_text|refusal)$/.test(part.type),
  );
  const part = content[at];
  if (!part) return;
  if (part.type === 'refusal')
    throw new InvalidRequestError(`${name}.content[${at}]: a refusal part goes in an assistant message alone`, {
      field: `${field}.content.${at}`,
    });
  const allowed = assistant ? 'output_text, refusal (or input_text)' : 'input_text, input_image, input_file';
  throw new InvalidRequestError(
    `${name}.content[${at}].type: ${assistant ? 'an' : 'a'} ${role} message takes ${allowed} parts, not ${part.type}`,
    { field: `${field}.content.${at}.type` },
  );
}

/** Most reasoning items an item carries (lib/items.ts). */
const MAX_REASONING = 100;

/** A reasoning item of the input as an item's `reasoning` entry: its summary and `encrypted_content`. */
function reasoningOf(
  entry: Extract<InputItemBody, { type: 'reasoning' }>,
  index: number,
  before: number,
  field: string,
): ReasoningItem {
  if (before >= MAX_REASONING)
    throw new InvalidRequestError(
      `${field}[${index}]: at most ${MAX_REASONING} reasoning items may come before an item`,
      { field: `${field}.${index}` },
    );
  const summary = entry.summary.map((part) => ({ type: 'summary_text' as const, text: part.text }));
  const payload = typeof entry.encrypted_content === 'string' ? { encrypted_content: entry.encrypted_content } : {};
  return { type: 'reasoning', summary, ...payload };
}
