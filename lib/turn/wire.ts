import { z } from 'zod';
import { clientItemSchema, functionCallItemSchema, messageItemSchema, toolListSchema } from '../items.ts';
import { truncationSchema } from '../compaction/truncate-prompt.ts';
import type { ModelSettings } from '../models/model.ts';
import { onBusySchema, strategiesFieldSchema, strategyConfigFieldSchema } from '../session/fields.ts';
import { turnUsageSchema } from '../ledger/usage.ts';

/**
 * The wire schemas of a turn (docs/API.md, "Turns"): the body of `POST .../turns`, its
 * `context` and its answer. The route validates with them and publishes them in
 * /openapi.json; the pipeline's types are derived from them, so the two cannot drift.
 */

export const turnRequestSchema = z
  .object({
    input: z.union([z.string().min(1), z.array(clientItemSchema).max(10_000)]).meta({
      description:
        'One user message, or an array of items. An empty array takes the newest turn again when it failed or ' +
        'was cancelled (its input stands unanswered in the history): the model answers the history as it ' +
        'stands and the turn stores only its output; otherwise 400 invalid_request naming `input`.',
    }),
    model: z.string().min(1).max(200).optional(),
    strategies: strategiesFieldSchema.optional(),
    strategy_config: strategyConfigFieldSchema.optional(),
    tools: toolListSchema.optional(),
    stream: z.boolean().optional(),
    background: z
      .boolean()
      .optional()
      .meta({
        description:
          'Answer 202 `{turn, status: "queued"}` at once and run the turn with no client connected (a queue ' +
          'consumer on Workers, the process on Node and Deno); its receipt tells how it ends.',
      }),
    on_busy: onBusySchema.optional(),
    max_output_tokens: z.number().int().positive().max(1_000_000).optional(),
    temperature: z.number().min(0).max(2).optional(),
    truncation: z
      .enum(['auto', 'disabled'])
      .optional()
      .meta({
        description:
          "A prompt over the model's window: absent, the overflow safety net drops its oldest items behind a " +
          'stored boundary (without `compact` in the strategies); `auto` drops just enough for this turn; ' +
          '`disabled` refuses it (413 context_too_large).',
      }),
  })
  .strict()
  .meta({ id: 'TurnRequest' });

type TurnBody = z.infer<typeof turnRequestSchema>;

/**
 * A turn as the pipeline takes it: the route's body without `stream`, `background` and
 * `on_busy` (how the answer is sent, and what a busy session does with it), plus what only
 * the OpenAI-compatible routes set.
 */
export type TurnRequest = Omit<TurnBody, 'stream' | 'background' | 'on_busy'> & {
  /** Passed to providers that route prompt caching by a key (OpenAI's `prompt_cache_key`). */
  prompt_cache_key?: string;
  /**
   * Compact in this turn even without `compact` among the strategies (OpenAI's
   * `context_management`): at `threshold` prompt tokens when given, else as the strategy does.
   */
  compaction?: { threshold?: number };
  /**
   * What the client asked of the model call besides the prompt (OpenAI's `top_p`, `reasoning`,
   * `text.format`, `tool_choice`, `user`...): passed on to the model, and kept with the turn's
   * record as the rest of the request is.
   */
  model_settings?: ModelSettings;
};

export const turnContextSchema = z
  .object({
    strategies: z.array(z.string()),
    items_in_prompt: z.number().int(),
    prompt_chars: z.number().int(),
    tool_calls_total: z.number().int(),
    kept_full: z.number().int(),
    compacted: z.number().int(),
    dropped: z.number().int(),
    notices_delivered: z.array(z.string()),
    prompt_tokens: z
      .number()
      .int()
      .optional()
      .meta({ description: 'With `compact` in the list: the tokens of the prompt as counted for the budget.' }),
    context_start_seq: z.number().int().optional().meta({
      description:
        'With a compacted context: the first seq of the current context (the summary stands for the older items).',
    }),
    compaction: z
      .object({
        start_seq: z.number().int(),
        summarized: z.object({ first_seq: z.number().int(), last_seq: z.number().int() }),
        interrupted: z.array(z.string()),
        pending: z.literal(true).optional().meta({
          description:
            'Only in a prompt preview: the next turn compacts here; its summary, not written yet, is the pending item.',
        }),
      })
      .optional()
      .meta({ description: 'Set when this turn compacted the context (in a preview: when the next turn will).' }),
    truncation: truncationSchema
      .optional()
      .meta({ description: 'Set when `truncation: "auto"` dropped items to fit the window.' }),
    overflow_dropped: truncationSchema
      .extend({ tool_start_seq: z.number().int(), message_start_seq: z.number().int(), moved: z.boolean() })
      .optional()
      .meta({
        description:
          'Set when the overflow safety net left items out: tool pairs whose call is older than `tool_start_seq` ' +
          'and messages older than `message_start_seq` (stored, not in the prompt); `moved` when this turn ' +
          'moved that boundary. The messages a stored boundary left out before go uncounted, and alone set nothing.',
      }),
  })
  .meta({ id: 'TurnContext' });

/** The API's `context` object of a turn. */
export type TurnContext = z.infer<typeof turnContextSchema>;

const cutField = z
  .literal(true)
  .optional()
  .meta({
    description:
      'Present on the item the answer stopped in when it stopped short (`incomplete`): the last of the ' +
      'output, when the model ended it (a call it never ended is left out, and then no item has it).',
  });

/** An item a turn's model produced, with the seq it is stored at. */
export const outputItemSchema = z.discriminatedUnion('type', [
  messageItemSchema.extend({ role: z.literal('assistant'), seq: z.number().int(), incomplete: cutField }),
  functionCallItemSchema.extend({ seq: z.number().int(), incomplete: cutField }),
]);
export type OutputItem = z.infer<typeof outputItemSchema>;

export const turnResponseSchema = z
  .object({
    session_id: z.string(),
    turn: z.number().int(),
    output: z.array(outputItemSchema),
    usage: turnUsageSchema,
    compaction_usage: turnUsageSchema.optional().meta({
      description:
        "What the summary of this turn's compaction used (its own model call; the session's totals count " +
        'both). Absent when the turn compacted nothing.',
    }),
    context: turnContextSchema,
    incomplete: z
      .enum(['max_output_tokens', 'content_filter'])
      .optional()
      .meta({
        description:
          'Present when the answer stopped short: at its output token limit (max_output_tokens) or at ' +
          "the provider's content filter.",
      }),
  })
  .meta({ id: 'TurnResponse' });

/** The API's 200 body of a turn. */
export type TurnResponse = z.infer<typeof turnResponseSchema>;
