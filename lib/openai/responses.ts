import { contentText } from '../content.ts';
import { responseContent } from './input-content.ts';
import type {
  Response,
  ResponseFunctionToolCall,
  ResponseItem,
  ResponseOutputItem,
  ResponseOutputMessage,
  ResponseUsage,
} from 'openai/resources/responses/responses';
import { parseCompactionId } from './ids.ts';
import type { SentCompaction } from './request-input.ts';
import type { ClientItem, StoredItem } from '../items.ts';
import type { IncompleteReason, ModelOutputItem, ModelUsage, TokenLogprob } from '../models/model.ts';
import { outputTextLogprobs } from './logprobs.ts';
import type { TurnUsage } from '../ledger/usage.ts';

/**
 * Pure mapping between OpenAI's Responses API shapes (the `openai` package's types) and
 * tailgate items and turns. No I/O: functions/routes/openai/ does the HTTP and storage.
 */

/**
 * A model's output item in OpenAI's shape, under the given id (its reasoning aside: outputItems);
 * a message's text with the provider's log probabilities of its tokens (`logprobs`).
 */
export function outputItem(item: ModelOutputItem, id: string, logprobs?: readonly TokenLogprob[]): ResponseOutputItem {
  if (item.type === 'function_call') return functionCall(item, id, statusOf(item));
  return message(contentText(item.content), id, statusOf(item), logprobs);
}

/**
 * An output item's status: `incomplete` for the item the model stopped in when its answer stopped
 * short (the one ModelOutputItem.incomplete marks, lib/models/model.ts markCut), as the Open
 * Responses item lifecycle has it; every other item is `completed`.
 */
function statusOf(item: { incomplete?: true | undefined }): 'completed' | 'incomplete' {
  return item.incomplete ? 'incomplete' : 'completed';
}

export function message(
  text: string,
  id: string,
  status: ResponseOutputMessage['status'] = 'completed',
  logprobs?: readonly TokenLogprob[],
): ResponseOutputMessage {
  return {
    type: 'message',
    id,
    status,
    role: 'assistant',
    content: [{ type: 'output_text', text, annotations: [], logprobs: outputTextLogprobs(logprobs) }],
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
  if (item.type === 'function_call') return functionCall(item, id, statusOf(item));
  if (item.type === 'function_call_output') {
    return {
      type: 'function_call_output',
      id,
      call_id: item.call_id,
      output: responseContent(item.output),
      status: 'completed',
    };
  }
  if (item.role === 'assistant') return message(contentText(item.content), id, statusOf(item));
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
