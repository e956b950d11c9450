import type { FunctionCallItem, MessageItem, PromptItem, ReasoningItem, Tool } from '../items.ts';
import type { TokenLogprob } from './logprobs.ts';
import { InvalidRequestError } from '../errors.ts';

export type { TokenLogprob } from './logprobs.ts';

/**
 * The one interface every provider adapter implements. Adapters translate `PromptItem[]`
 * into the provider's wire format and the provider's answer back into items.
 */
export interface ModelRequest {
  /** The prepared prompt: system/user/assistant messages and tool traffic, in order. */
  prompt: PromptItem[];
  tools: Tool[];
  maxOutputTokens?: number;
  /**
   * The tokens the model's window leaves the answer: the window less the prompt's estimated
   * tokens (lib/tokens/model-limits.ts `outputRoom`); absent when the window has no end. An
   * adapter whose provider refuses a request asking for more (Anthropic's `max_tokens`) asks for
   * no more.
   */
  outputRoom?: number;
  temperature?: number;
  /**
   * Index into `prompt` of the last item of the stable (cache-friendly) prefix, if any.
   * Adapters with explicit prompt caching (Anthropic) place their breakpoint there.
   */
  cacheBreakpoint?: number;
  /**
   * A key grouping requests that share a prompt prefix, for providers that route caching by it
   * (OpenAI's `prompt_cache_key`); others ignore it.
   */
  promptCacheKey?: string;
  /** What the client asked of this call besides the prompt (the OpenAI-compatible routes set them). */
  settings?: ModelSettings;
  signal?: AbortSignal;
}

/** A JSON Schema object (structured output). */
export type JsonSchema = Record<string, unknown>;

/**
 * Settings a client may ask of one call. lib/models/sdk-model.ts passes each to the AI SDK
 * (call settings, `reasoning`, the response format) or, through the provider wrapper, as
 * provider options; the echo model honours `toolChoice` and the response format.
 */
export interface ModelSettings {
  topP?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  stopSequences?: string[];
  /** A sampling seed (Chat Completions' `seed`), for providers that take one. */
  seed?: number;
  toolChoice?: 'auto' | 'none' | 'required' | { name: string };
  /**
   * The names of the only tools the model may call (OpenAI's `allowed_tools`), under `toolChoice`
   * `auto` or `required`. A provider that takes the restriction itself (`Model.allowsTools`) gets every tool, so the
   * prompt stays the same whatever the subset (OpenAI); the others get the listed tools alone
   * (`toolsSent`).
   */
  allowedTools?: string[];
  /** Reasoning effort: OpenAI's `reasoning_effort`, Anthropic's thinking budget (the AI SDK maps it). */
  reasoningEffort?: 'none' | 'minimal' | 'low' | 'medium' | 'high' | 'xhigh' | 'max';
  verbosity?: 'low' | 'medium' | 'high';
  parallelToolCalls?: boolean;
  responseFormat?:
    | { type: 'json_object' }
    | {
        type: 'json_schema';
        name: string;
        schema: JsonSchema;
        description?: string | undefined;
        strict?: boolean | null | undefined;
      };
  user?: string;
  safetyIdentifier?: string;
  /** How long the provider keeps the prompt cached (OpenAI's `prompt_cache_retention`), where it takes it. */
  promptCacheRetention?: 'in_memory' | '24h';
  /** The prompt cache's minimum lifetime (OpenAI's `prompt_cache_options.ttl`), where the provider takes it. */
  promptCacheTtl?: '30m' | '12h';
  /**
   * Set when the client asked for the output tokens' log probabilities: how many of the most
   * likely tokens at each position it wants too (0 to 20). A model whose provider gives them
   * (`Model.logprobs`) answers them (`ModelResult.logprobs`, `text_delta` events); others none.
   */
  logprobs?: number;
}

export interface ModelUsage {
  input_tokens: number;
  output_tokens: number;
  /** Input tokens the provider read from its prompt cache, when it reports some (absent: none). */
  cached_input_tokens?: number | undefined;
  /** Input tokens the provider wrote to its prompt cache (Anthropic's cache_creation_input_tokens). */
  cache_write_tokens?: number | undefined;
  /** Output tokens spent on reasoning, part of `output_tokens` (OpenAI's reasoning_tokens). */
  reasoning_tokens?: number | undefined;
  /** The answer gave no input count (a backend that left its usage out): its counts are 0, and it is estimated. */
  unreported?: true | undefined;
}

/** `incomplete`: the item the answer stopped in (lib/items.ts, cutFields; see markCut). */
export type ModelOutputItem = ((MessageItem & { role: 'assistant' }) | FunctionCallItem) & {
  incomplete?: true | undefined;
};

export interface ModelResult {
  output: ModelOutputItem[];
  usage: ModelUsage;
  /** Why the answer stopped short: its output token limit, or the provider's content filter. */
  incomplete?: IncompleteReason;
  /**
   * With `settings.logprobs`, from a model that gives them: the log probabilities of each output
   * item's text tokens, by its index in `output` (a call's, and a message's the provider gave
   * none of, are empty).
   */
  logprobs?: TokenLogprob[][];
}

/** OpenAI's `incomplete_details.reason` (Chat Completions' `finish_reason` `length`, `content_filter`). */
export type IncompleteReason = 'max_output_tokens' | 'content_filter';

/**
 * The output of an answer that stopped short (`incomplete`), its last item marked `incomplete`:
 * the item the model was writing when it stopped (the Open Responses item lifecycle). None is
 * when the model stopped in a call it never ended (`leftOut`: such a call is not in the output,
 * and the items before it were written whole).
 */
export function markCut(
  output: ModelOutputItem[],
  incomplete: IncompleteReason | undefined,
  leftOut = false,
): ModelOutputItem[] {
  const last = output.at(-1);
  if (!incomplete || leftOut || !last) return output;
  return [...output.slice(0, -1), { ...last, incomplete: true }];
}

export type ModelStreamEvent =
  /** `logprobs`: the delta's tokens', when they were asked for and the provider gives them. */
  | { type: 'text_delta'; delta: string; logprobs?: TokenLogprob[] }
  /** A function call began: its `arguments_delta`s follow, then its `item_done`. */
  | { type: 'call_start'; call_id: string; name: string }
  /** A piece of an open call's arguments: their concatenation is the finished call's `arguments`. */
  | { type: 'arguments_delta'; call_id: string; delta: string }
  /** A block of the model's reasoning ended: it is the `reasoning` of the next item to end. */
  | { type: 'reasoning_done'; item: ReasoningItem }
  | { type: 'item_done'; item: ModelOutputItem }
  /**
   * The provider reported the call's input usage before its output (Anthropic's message_start):
   * what a call stopped before its answer is charged for its input (lib/turn/stopped-spend.ts).
   */
  | { type: 'input_reported'; usage: ModelUsage }
  | { type: 'done'; result: ModelResult };

export interface Model {
  /** The `provider:name` id (or `echo`). */
  readonly id: string;
  /**
   * Whether images and files in tool results reach the model as such (Anthropic's tool_result
   * image blocks; the echo model), or `after`: in a user message after the tool messages (Chat
   * Completions, lib/models/tool-media.ts; its labels counted in a prompt's tokens). Otherwise
   * they go as text placeholders, and the receipt counts them (`media_as_text`).
   */
  readonly toolResultMedia?: boolean | 'after';
  /**
   * Whether a file given by its https URL (`file_url`) reaches the model as such (Anthropic's
   * document blocks; the echo model). Otherwise it goes as a text placeholder, counted in
   * `media_as_text` too (Chat Completions takes a file only as its bytes).
   */
  readonly fileUrls?: boolean;
  /**
   * Whether the model takes an image only as its bytes and no file at all (Workers AI): an image
   * by its URL and every file go as text placeholders, counted in `media_as_text`.
   */
  readonly imageBytesOnly?: boolean;
  /**
   * The longest side, in pixels, of an image the provider takes (Anthropic refuses a request
   * holding a larger one). A larger image, its size read from its header when it was stored,
   * goes as a text placeholder, counted in `media_as_text` (its blob is read only when its item
   * sends another image or file).
   */
  readonly maxImageSide?: number;
  /**
   * The most bytes of an image the provider takes (Anthropic refuses a request holding one whose
   * base64 is over 5 MiB). A larger image goes as a text placeholder, as one over `maxImageSide`.
   */
  readonly maxImageBytes?: number;
  /**
   * What the provider takes of a request's images together (lib/models/media-parts.ts
   * `promptMedia`). `over`: the longest image side it takes in a request holding more than
   * `images` images (Anthropic: over 20, 2000 pixels, "max allowed size for many-image
   * requests"): in such a request each larger image goes as a text placeholder too, counted in
   * `media_as_text`, unless the newest is one (its newest `images` are sent then, the older as
   * placeholders). A token estimate counts such an image as the image it would be in a smaller
   * request (an estimate over, never under, what is sent). An image of unknown size (an https URL,
   * one stored before its header was read) goes as a text placeholder in such a request too: the
   * provider could refuse it. `most`: the most images a request may hold (Anthropic: 100,
   * OpenAI: 500); `mostBytes`: the most bytes of base64 its images and files may come to
   * (Anthropic: 24 MiB of the 32 MB a request may be, leaving room for its text; OpenAI: 45 MiB of
   * the 50 MB of images it takes). Past either, the oldest images (and files, past `mostBytes`) go
   * as text placeholders, moved a fifth of the limit at a time so the prompt's prefix holds
   * between (`oldestOver`).
   */
  readonly manyImages?: {
    readonly over?: { readonly images: number; readonly maxImageSide: number };
    readonly most?: number;
    readonly mostBytes?: number;
  };
  /**
   * Whether images and files in an assistant or system message reach the model as such (the echo
   * model). Otherwise the message goes as its text, each image and file as a text placeholder
   * (lib/models/convert-to-model-messages.ts), counted in `media_as_text`; their bytes are not read.
   */
  readonly assistantMedia?: boolean;
  /**
   * Whether the model takes no image or file at all (an `openai-compatible:` backend unless
   * OPENAI_COMPATIBLE_IMAGES says it takes images, OpenAI's and Workers AI's text models): every
   * image and file, in any message and in tool results, goes as a text placeholder, counted in
   * `media_as_text`; their bytes are not read.
   */
  readonly textOnly?: boolean;
  /**
   * Whether the model takes `settings.allowedTools` itself, every tool sent (OpenAI's
   * `allowed_tools`, the echo model). Otherwise a call sends the allowed tools alone (`toolsSent`).
   */
  readonly allowsTools?: boolean;
  /** The most tools a call may offer (OpenAI's 128): more is refused unsent (`refuseOverToolLimit`). */
  readonly maxTools?: number;
  /** Whether the model answers `settings.logprobs` with the provider's log probabilities. */
  readonly logprobs?: boolean;
  generate(request: ModelRequest): Promise<ModelResult>;
  /**
   * Yields deltas and finished items, and ends with exactly one `done` event. Items open and end
   * one at a time, in the order of the output: a message's `text_delta`s, or a call's
   * `call_start` and `arguments_delta`s (an adapter whose provider streams the arguments), then
   * its `item_done`; a call may also come as its `item_done` alone.
   */
  stream(request: ModelRequest): AsyncIterable<ModelStreamEvent>;
}

/**
 * The tools a call of `model` sends: the allowed ones alone (`settings.allowedTools`), unless the
 * model takes the restriction itself (`Model.allowsTools`); what a receipt's prompt shape hashes.
 */
export function toolsSent(
  model: Pick<Model, 'allowsTools'>,
  tools: readonly Tool[],
  settings: ModelSettings | undefined,
): readonly Tool[] {
  const allowed = settings?.allowedTools;
  if (model.allowsTools || !allowed) return tools;
  return tools.filter((tool) => allowed.includes(tool.name));
}

/**
 * Refuses a call of `model` offering more tools than it takes (`Model.maxTools`, OpenAI's 128), counted as
 * sent (`toolsSent`), a 400 naming `field`. A session's config is refused when written
 * (functions/session-fields.ts), a turn at its claim (lib/turn/plan.ts `checkTurnModels`) and a stateless call
 * before its stream starts, nothing stored and no model called; the model call checks again what reaches it
 * unchecked: a queued input or a background turn run after its session's model or tools changed (their runs'
 * claims check nothing), which fails as its turn, its input stored.
 */
export function refuseOverToolLimit(
  model: Pick<Model, 'id' | 'allowsTools' | 'maxTools'>,
  tools: readonly Tool[],
  settings: ModelSettings | undefined,
  field = 'tools',
): void {
  const offered = toolsSent(model, tools, settings).length;
  if (model.maxTools === undefined || offered <= model.maxTools) return;
  throw new InvalidRequestError(`model ${model.id} takes at most ${model.maxTools} tools, offered ${offered}`, {
    field,
  });
}
