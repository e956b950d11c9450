import { z } from 'zod';
import { idSchema, toolListSchema, toolSchema } from '../items.ts';
import { budgetSchema, sessionUsageSchema } from '../ledger/usage.ts';
import { splitStrategyNames } from '../history.ts';

/**
 * The wire schemas of a session (docs/API.md, "Sessions"): what a client sends to create or
 * change one and what it gets back. The routes validate bodies with them (and publish them in
 * /openapi.json); lib/ derives its types from them. A new session field is added here, in
 * `sessionFields` and `sessionSchema`, and in the stored config (lib/session/records.ts).
 */

/** The most strategy names a list holds (a session's export carries them: lib/session/export-format.ts). */
export const MAX_STRATEGIES = 50;

/**
 * A strategy list: comma-separated, or an array of names, applied in order. A string holds at
 * most MAX_STRATEGIES names, as an array does: the session stores the names, and its export's
 * header takes no more.
 */
export const strategiesFieldSchema = z
  .union([
    z
      .string()
      .max(1000)
      .refine((list) => splitStrategyNames(list).length <= MAX_STRATEGIES, {
        message: `names at most ${MAX_STRATEGIES} strategies`,
      }),
    z.array(z.string().min(1).max(100)).max(MAX_STRATEGIES),
  ])
  .meta({
    description: 'A comma-separated string or an array of strategy names (at most 50), applied in order.',
    example: 'shorten_tools_epoch_increment,inbox',
  });

/** Strategy thresholds by key, checked against the strategies' config schema where they are used. */
export const strategyConfigFieldSchema = z.record(z.string(), z.number()).meta({
  description: 'Strategy thresholds by snake_case key, e.g. epoch_size. An unknown key is a 400.',
  example: { epoch_size: 10 },
});

/** The longest retention a deployment or a session may set, in days (100 years). */
export const MAX_TTL_DAYS = 36_500;
/** What a turn does when another turn holds the session (docs/API.md, "Busy sessions"). */
export const onBusySchema = z.enum(['reject', 'enqueue', 'interrupt']).meta({
  description:
    'When another turn runs: reject (409 turn_in_progress), enqueue (store the input, 202 ' +
    '{queued_turn, position}; it runs as its own turn after the current one), interrupt (cancel the ' +
    'running turn, run this one).',
});
export type OnBusy = z.infer<typeof onBusySchema>;

/** The config fields of a session; null or absent takes the deployment default. */
const sessionFields = {
  instructions: z
    .string()
    .nullable()
    .optional()
    .meta({ description: 'The system prompt; at most MAX_INSTRUCTIONS_BYTES (256 KiB) of UTF-8, else 413.' }),
  model: z.string().min(1).max(200).nullable().optional().meta({ example: 'echo' }),
  strategies: strategiesFieldSchema.nullable().optional(),
  strategy_config: strategyConfigFieldSchema.nullable().optional(),
  tools: toolListSchema.nullable().optional(),
  on_busy: onBusySchema.nullable().optional(),
  metadata: z
    .record(z.string(), z.unknown())
    .nullable()
    .optional()
    .meta({ description: 'Free-form JSON; at most MAX_METADATA_BYTES (64 KiB) as JSON, else 413.' }),
  budget: budgetSchema
    .nullable()
    .optional()
    .meta({ description: 'Limits on what the turns spend; a turn past one is refused (402 budget_exhausted).' }),
  expires_after_days: z.number().int().min(1).max(MAX_TTL_DAYS).nullable().optional().meta({
    description: 'Idle days after which the retention sweep deletes the session; null: SESSION_TTL_DAYS.',
  }),
  webhook_url: z
    .string()
    .max(2048)
    .nullable()
    .optional()
    .meta({
      description:
        'Where signed turn.completed, turn.failed, turn.cancelled, session.idle and session.held events go; ' +
        'null: WEBHOOK_URL. ' +
        'https only; a private or loopback address is a 400 unless WEBHOOK_ALLOW_PRIVATE is set; ' +
        'a port fetch refuses (a "bad port") is a 400.',
    }),
};

export const sessionPatchSchema = z.object(sessionFields).strict().meta({ id: 'SessionPatch' });

export const sessionCreateSchema = sessionPatchSchema
  .extend({ id: idSchema.optional() })
  .strict()
  .meta({ id: 'SessionCreate' });

export const sessionForkSchema = sessionCreateSchema
  .extend({
    at_turn: z
      .number()
      .int()
      .positive()
      .optional()
      .meta({ description: 'Fork after this turn (its outputs included).' }),
    at_seq: z
      .number()
      .int()
      .positive()
      .optional()
      .meta({ description: 'Fork after the turn or append whose items end at this seq.' }),
  })
  .strict()
  .refine((body) => (body.at_turn === undefined) !== (body.at_seq === undefined), {
    message: 'give exactly one of at_turn and at_seq',
    path: ['at_turn'],
  })
  .meta({ id: 'SessionFork' });

export const sessionCountsSchema = z.object({
  items: z.number().int(),
  turns: z.number().int(),
  tool_calls: z.number().int(),
});

export const sessionSchema = z
  .object({
    id: z.string(),
    created_at: z.string(),
    instructions: z.string().nullable(),
    model: z.string().nullable(),
    strategies: z.array(z.string()).nullable(),
    strategy_config: z.record(z.string(), z.unknown()),
    tools: z.array(toolSchema),
    on_busy: onBusySchema,
    metadata: z.record(z.string(), z.unknown()),
    /** Present when the session sets its own retention. */
    expires_after_days: z.number().int().optional(),
    /** Present when the session sets its own webhook; GET /v1/sessions/{id} shows it to admin tokens only. */
    webhook_url: z.string().optional(),
    counts: sessionCountsSchema,
    budget: budgetSchema.nullable(),
    usage: sessionUsageSchema,
    /** A fork: the session whose history it continues, and the last seq it shares. */
    forked_from: z.object({ id: z.string(), seq: z.number().int() }).optional(),
  })
  .meta({ id: 'Session' });

/** The fields a session is created with; null = the deployment default. */
export type NewSession = z.infer<typeof sessionCreateSchema>;
/** The fields a PATCH changes; absent = unchanged, null = back to the deployment default. */
export type SessionPatch = z.infer<typeof sessionPatchSchema>;
/** A session as the log returns it: its stored config plus counts from the newest record. */
export type SessionRecord = z.infer<typeof sessionSchema>;
