import { contentText } from '../content.ts';
import { contentOf, type InputPartBody, responseContent } from './input-content.ts';
import type {
  Response,
  ResponseFunctionToolCall,
  ResponseItem,
  ResponseOutputItem,
  ResponseOutputMessage,
  ResponseUsage,
} from 'openai/resources/responses/responses';
import { SUMMARY_HEADER } from '../compaction/summary-transcript.ts';
import { InvalidRequestError } from '../errors.ts';
import { parseCompactionId } from './ids.ts';
import type { ClientItem, ReasoningItem, StoredItem } from '../items.ts';
import type { IncompleteReason, ModelOutputItem, ModelUsage } from '../models/model.ts';
import type { TurnUsage } from '../ledger/usage.ts';

/**
 * Pure mapping between OpenAI's Responses API shapes (the `openai` package's types) and
 * tailgate items and turns. No I/O: functions/routes/openai/ does the HTTP and storage.
 */

/** An input item as the request schema (functions/routes/openai/schemas.ts) validated it. */
export type InputItemBody =
  | {
      type?: 'message' | undefined;
      role: 'user' | 'assistant' | 'system' | 'developer';
      content: string | InputPartBody[];
    }
  | { type: 'function_call'; call_id: string; name: string; arguments: string }
  | { type: 'function_call_output'; call_id: string; output: string | InputPartBody[] }
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
 * `field` is the request's name for the list, which an error names (`items` of a conversation).
 */
export function inputToItems(input: string | InputItemBody[], field = 'input'): RequestInput {
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
          `${field}[${index}]: a ${entry.role} message must come before every other item (it becomes the instructions)`,
          { field: `${field}.${index}.role` },
        );
      }
      instructions.push(contentText(contentOf(entry.content)));
    } else push({ type: 'message', role: entry.role, content: contentOf(entry.content) }, index);
  });
  return { instructions, items, history, compactedAt, ...(anchor ? { anchor } : {}), compactions, positions };
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

/** A model's output item in OpenAI's shape, under the given id (its reasoning aside: outputItems). */
export function outputItem(item: ModelOutputItem, id: string): ResponseOutputItem {
  if (item.type === 'function_call') return functionCall(item, id);
  return message(contentText(item.content), id);
}

export function message(
  text: string,
  id: string,
  status: ResponseOutputMessage['status'] = 'completed',
): ResponseOutputMessage {
  return {
    type: 'message',
    id,
    status,
    role: 'assistant',
    content: [{ type: 'output_text', text, annotations: [], logprobs: [] }],
  };
}

export function functionCall(
  item: { call_id: string; name: string; arguments: string },
  id: string,
  status: NonNullable<ResponseFunctionToolCall['status']> = 'completed',
): ResponseFunctionToolCall & { id: string; status: NonNullable<ResponseFunctionToolCall['status']> } {
  return { type: 'function_call', id, call_id: item.call_id, name: item.name, arguments: item.arguments, status };
}

/** A stored history item as an item of `input_items` or a conversation's item list. */
export function storedItem(item: StoredItem, id: string): ResponseItem {
  if (item.type === 'function_call') return functionCall(item, id);
  if (item.type === 'function_call_output') {
    return {
      type: 'function_call_output',
      id,
      call_id: item.call_id,
      output: responseContent(item.output),
      status: 'completed',
    };
  }
  if (item.role === 'assistant') return message(contentText(item.content), id);
  return {
    type: 'message',
    id,
    role: item.role,
    status: 'completed',
    content:
      typeof item.content === 'string' ? [{ type: 'input_text', text: item.content }] : responseContent(item.content),
  } as ResponseItem;
}

/** Tailgate's usage as OpenAI's (each detail is what the provider reported, else 0). */
export function usageOf(usage: ModelUsage): ResponseUsage {
  return {
    input_tokens: usage.input_tokens,
    input_tokens_details: {
      cached_tokens: usage.cached_input_tokens ?? 0,
      cache_write_tokens: usage.cache_write_tokens ?? 0,
    },
    output_tokens: usage.output_tokens,
    output_tokens_details: { reasoning_tokens: usage.reasoning_tokens ?? 0 },
    total_tokens: usage.input_tokens + usage.output_tokens,
  };
}

/**
 * What a turn cost, as a response's `tailgate` carries it: `cost_usd`, its receipt's
 * `usage.cost_usd` (null: the model has no known price), and `compaction_cost_usd`, its
 * compaction summary's, when the turn compacted (counted in the session's totals beside it).
 */
export function turnCost(turn: { usage: TurnUsage | null; compaction_usage?: TurnUsage | undefined }): {
  cost_usd: number | null;
  compaction_cost_usd?: number | null;
} {
  return {
    cost_usd: turn.usage?.cost_usd ?? null,
    ...(turn.compaction_usage ? { compaction_cost_usd: turn.compaction_usage.cost_usd } : {}),
  };
}

/**
 * The settings a response echoes: what the request asked (lib/openai/request.ts), else these
 * defaults, the values a model call uses when none is sent.
 */
export interface ResponseSettings {
  temperature: number;
  top_p: number;
  presence_penalty: number;
  frequency_penalty: number;
  top_logprobs: number;
  tool_choice: Response['tool_choice'];
  parallel_tool_calls: boolean;
  max_tool_calls: number | null;
  max_output_tokens: number | null;
  text: NonNullable<Response['text']>;
  reasoning: Response['reasoning'];
  service_tier: NonNullable<Response['service_tier']>;
  user: string | null;
  safety_identifier: string | null;
  prompt_cache_key: string | null;
  truncation: 'auto' | 'disabled';
  metadata: Record<string, string>;
}

export const DEFAULT_SETTINGS: ResponseSettings = {
  temperature: 1,
  top_p: 1,
  presence_penalty: 0,
  frequency_penalty: 0,
  top_logprobs: 0,
  tool_choice: 'auto',
  parallel_tool_calls: true,
  max_tool_calls: null,
  max_output_tokens: null,
  text: { format: { type: 'text' }, verbosity: 'medium' },
  reasoning: null,
  service_tier: 'default',
  user: null,
  safety_identifier: null,
  prompt_cache_key: null,
  truncation: 'disabled',
  metadata: {},
};

/** What a response object is built from. */
export interface ResponseFields {
  id: string;
  createdAt: Date;
  /**
   * When an ended response ended, by the app's clock; without it, its `createdAt` (a response
   * rebuilt from its stored items: the time they were stored).
   */
  completedAt?: Date;
  status: NonNullable<Response['status']>;
  model: string;
  output: ResponseOutputItem[];
  /** Absent while the response runs: `usage` is then null. */
  usage?: ResponseUsage;
  instructions: string | null;
  tools: Response['tools'];
  settings: ResponseSettings;
  previousResponseId: string | null;
  conversationId: string | null;
  store: boolean;
  /** Created with `background: true` (lib/openai/background-response.ts). */
  background?: boolean;
  error?: { code: string; message: string; details?: unknown };
  /** Why an `incomplete` response stopped short. */
  incomplete?: IncompleteReason;
  /** tailgate's own account of the turn (session, turn, notices, context counts). */
  tailgate?: Record<string, unknown>;
}

/** How a stored turn is answered: the ids of its response and items, and the fixed fields. */
export interface StoredContext {
  session: { id: string; created_at: string };
  inputCount: number;
  /** `createdAt`: when the request came, as OpenAI's `created_at` (one time from `response.created` on). */
  fields: Omit<ResponseFields, 'id' | 'status' | 'output'>;
  /**
   * The conversation's whole history before the output, when the request held it (no
   * `previous_response_id` or `conversation`): indexed when the turn ends (lib/openai/history-index.ts),
   * replacing the entry the request matched.
   */
  history?: { before: readonly ClientItem[]; replaced: string | undefined; scope: string };
  /** What of the conversation the input resent (answered as `tailgate.resent`): input_items lists it. */
  resent?: ResentHistory;
  /**
   * With `previous_response_id`: the tag of the request's loop, kept with the response (./sessions.ts
   * loopTag); with `conversation`, its input's (./conversation-resend.ts conversationTag).
   */
  loop?: string;
}

/**
 * The stored items a whole-history request resent (seqs `first_seq` to `last_seq`; none when
 * `last_seq` is below `first_seq`) and the compaction items among them, each after `at` of
 * them: by id when it is the conversation's own, else with its summary.
 */
export interface ResentHistory {
  first_seq: number;
  last_seq: number;
  compactions: { at: number; id: string; encrypted_content?: string }[];
}

/**
 * What a request that continued conversation `sessionId` resent of it: the `known` items of the
 * matched history, which ends at seq `lastSeq`, and the compaction items it sent among them.
 */
export function resentHistory(
  prepared: { compactions: readonly SentCompaction[] },
  sessionId: string,
  known: number,
  lastSeq: number,
): ResentHistory {
  return {
    first_seq: lastSeq - known + 1,
    last_seq: lastSeq,
    // One without an id is not listed (an item list's items are named).
    compactions: prepared.compactions.flatMap(({ at, id, summary }) =>
      id === null
        ? []
        : [parseCompactionId(id)?.sessionId === sessionId ? { at, id } : { at, id, encrypted_content: summary }],
    ),
  };
}

export type TailgateResponse = Response & { tailgate?: Record<string, unknown> };

/**
 * A response object with every field the Open Responses specification requires (a field the
 * spec and OpenAI's SDK types disagree on follows the spec: docs/OPENAI.md says where).
 * `completed_at` is set once the response has ended.
 */
export function buildResponse(fields: ResponseFields): TailgateResponse {
  const seconds = (date: Date) => Math.floor(date.getTime() / 1000);
  const ended = fields.status !== 'queued' && fields.status !== 'in_progress';
  const response = {
    id: fields.id,
    object: 'response',
    created_at: seconds(fields.createdAt),
    completed_at: ended ? seconds(fields.completedAt ?? fields.createdAt) : null,
    status: fields.status,
    background: fields.background ?? false,
    // With the details the client is told (a failed model call's model and status), as a
    // retrieve of a background response reads them from the turn's receipt.
    error: fields.error
      ? ({
          code: fields.error.code as NonNullable<Response['error']>['code'],
          message: fields.error.message,
          ...(fields.error.details !== undefined ? { details: fields.error.details } : {}),
        } as NonNullable<Response['error']>)
      : null,
    incomplete_details: fields.incomplete ? { reason: fields.incomplete } : null,
    instructions: fields.instructions,
    model: fields.model,
    output: fields.output,
    output_text: outputText(fields.output),
    previous_response_id: fields.previousResponseId,
    conversation: fields.conversationId === null ? null : { id: fields.conversationId },
    store: fields.store,
    tools: fields.tools,
    ...fields.settings,
    usage: fields.usage ?? null,
    ...(fields.tailgate ? { tailgate: fields.tailgate } : {}),
  };
  return response as unknown as TailgateResponse;
}

/** The concatenated text of the output messages (the SDKs' `output_text`). */
export function outputText(output: readonly ResponseOutputItem[]): string {
  return output
    .flatMap((item) =>
      item.type === 'message' ? item.content.flatMap((part) => (part.type === 'output_text' ? [part.text] : [])) : [],
    )
    .join('');
}
