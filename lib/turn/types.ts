import type { ServiceConfig } from '../config.ts';
import type { Item, Tool } from '../items.ts';
import type { Model, ModelOutputItem, ModelUsage } from '../models/model.ts';
import type { Inbox } from '../inbox/inbox.ts';
import type { SessionLog } from '../session/session-log.ts';
import type { Truncation } from '../compaction/index.ts';
import type { TokenEncoders } from '../tokens/token-counter.ts';

/** The wire and service types of a turn, and the errors the pipeline throws. */

export type StoredError = { code: string; message: string; details?: unknown };

/** The part of the session log the pipeline uses (a Pick, so tests can hand in a wrapper). */
export type TurnSessionLog = Pick<
  SessionLog,
  | 'get'
  | 'beginTurn'
  | 'readContext'
  | 'needsView'
  | 'previewContext'
  | 'hydrate'
  | 'completeTurn'
  | 'pack'
  | 'renewLease'
  | 'exists'
> &
  Partial<Pick<SessionLog, 'commitTurnContext'>>;

/** The part of the inbox the pipeline uses. */
export type TurnInbox = Pick<Inbox, 'consume' | 'peek' | 'recover' | 'recordCarrier' | 'giveBack'>;

/** Everything one request's pipeline works with, built per request by the runtime entry. */
export interface TurnServices {
  sessions: TurnSessionLog;
  inbox: TurnInbox;
  config: ServiceConfig;
  /** The plain string environment (strategy thresholds, PROMPT_STRATEGY). */
  env: Record<string, string | undefined>;
  /** Resolves a model id (throws a 400-coded error for an unknown one). */
  model: (id: string) => Model;
  /** Runs work that must outlive the response (waitUntil on Workers). */
  background: (task: Promise<unknown>) => void;
  log: (message: string, details?: unknown) => void;
  /** Real tokenizers the runtime provides (Node, Deno); the approximation without them. */
  tokenEncoders?: TokenEncoders;
}

/** The body of POST /v1/sessions/:id/turns, validated. */
export interface TurnRequest {
  input: string | Item[];
  model?: string;
  strategies?: string | string[];
  strategy_config?: Record<string, unknown>;
  tools?: Tool[];
  max_output_tokens?: number;
  temperature?: number;
  /** Passed to providers that route prompt caching by a key (OpenAI's `prompt_cache_key`). */
  prompt_cache_key?: string;
  /**
   * `auto`: a prompt over the model's window drops its oldest tool pairs, then its oldest
   * messages outside the newest user turn, until it fits (lib/compaction/truncate-prompt.ts);
   * otherwise it is refused (context_too_large).
   */
  truncation?: 'auto' | 'disabled';
}

/** The API's `context` object. */
export interface TurnContext {
  strategies: string[];
  items_in_prompt: number;
  prompt_chars: number;
  tool_calls_total: number;
  kept_full: number;
  compacted: number;
  dropped: number;
  notices_delivered: string[];
  /** With `compact` in the list: the prompt's tokens (as counted for the budget). */
  prompt_tokens?: number;
  /** With a compacted context: the first seq of the current context. */
  context_start_seq?: number;
  /** Set when this turn compacted: the seqs its summary replaced. */
  compaction?: { start_seq: number; summarized: { first_seq: number; last_seq: number }; interrupted: string[] };
  /** Set when `truncation: "auto"` dropped items to fit the window. */
  truncation?: Truncation;
}

export type OutputItem = ModelOutputItem & { seq: number };

/** The API's 200 body of a turn. */
export interface TurnResponse {
  session_id: string;
  turn: number;
  output: OutputItem[];
  usage: ModelUsage;
  context: TurnContext;
}

export type TurnEvent =
  /** `first_seq`: the seq the turn's first output item gets. */
  | { event: 'turn.started'; data: { turn: number; first_seq: number } }
  | { event: 'output_text.delta'; data: { delta: string } }
  | { event: 'output_item.done'; data: { item: OutputItem } }
  | { event: 'turn.completed'; data: TurnResponse }
  | { event: 'error'; data: { error: StoredError }; cause: unknown };
