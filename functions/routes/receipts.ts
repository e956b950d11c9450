import { createRoute } from '@hono/zod-openapi';
import { contentSchema } from '../../lib/content.ts';
import { sessionUsageSchema, turnUsageSchema } from '../../lib/ledger/usage.ts';
import { z } from 'zod';
import { turnAsItStands, turnsAsTheyStand } from '../../lib/turn/index.ts';
import { createRouter } from '../router.ts';
import { requires } from '../tokens.ts';
import { errorResponses, jsonResponse } from '../openapi-helpers.ts';
import {
  integerText,
  sessionCountsSchema,
  sessionIdParamsSchema,
  storedItemOutSchema,
  turnParamsSchema,
} from '../schemas.ts';
import { syntheticEntrySchema } from '../../lib/session/log/receipt-schema.ts';

/**
 * Reading back what happened: the session listing, turn receipts (each turn's outcome,
 * settings, counts and what its model saw), and the items of a turn with their treatment.
 * The data behind the /ui inspector, useful on its own.
 */

const seqRangeSchema = z.object({ first_seq: z.number().int(), last_seq: z.number().int() });

const turnSummarySchema = z
  .object({
    turn: z.number().int(),
    status: z.enum(['queued', 'in_progress', 'completed', 'failed', 'cancelled', 'aborted']).meta({
      description:
        'queued: a background turn no runner has started; in_progress: open; cancelled: ended by ' +
        'POST .../cancel (its error is turn_cancelled).',
    }),
    started_at: z.string().nullable(),
    completed_at: z.string().nullable(),
    model: z
      .string()
      .nullable()
      .meta({
        description:
          'The model the turn called, stored at its own close; a turn without that (running, cancelled, ' +
          "interrupted, its lease run out, aborted) shows its request's `model`, null when it named none.",
      }),
    strategies: z.array(z.string()),
    context: z
      .record(z.string(), z.unknown())
      .nullable()
      .meta({ description: 'The `context` counts of the turn, as its response gave them (TurnContext).' }),
    notices: z.array(z.object({ name: z.string(), stored_as: z.string(), posted_at: z.string() })),
    usage: turnUsageSchema.nullable().meta({
      description:
        "What the turn's model call used. A turn closed by someone else (cancelled, interrupted, its lease run " +
        'out) shows what its aborted call spent once the stopped turn stored it (null before, and when it never does).',
    }),
    usage_estimated: z
      .literal(true)
      .optional()
      .meta({
        description:
          'Present when `usage` is an estimate: an answer that gave no input count (a backend that leaves its ' +
          "usage out), a stopped turn's call the provider reported no usage for, a " +
          "failed turn's call its provider may have run (timed out in flight, broke off after it was accepted), " +
          'or a call aborted and made again (a notice its prompt showed did not move, a claim lost) counted in ' +
          "(the prompt's tokens as counted, " +
          'the output streamed).',
      }),
    compaction_usage: turnUsageSchema
      .optional()
      .meta({ description: "What the summary of the turn's compaction used (present only when it compacted)." }),
    incomplete: z
      .enum(['max_output_tokens', 'content_filter'])
      .optional()
      .meta({ description: "Present when the answer stopped short (the turn response's `incomplete`)." }),
    background: z
      .literal(true)
      .optional()
      .meta({ description: 'Present when the turn ran in the background (its request said `background: true`).' }),
    error: z.object({ code: z.string(), message: z.string(), details: z.unknown().optional() }).nullable(),
    input: seqRangeSchema.nullable(),
    output: seqRangeSchema.nullable(),
    prefix_reused_chars: z
      .number()
      .int()
      .nullable()
      .meta({
        description:
          "Characters of this turn's provider prompt (tools, instructions, items) that repeat the previous turn's " +
          'prompt from its start, in whole items; null when either prompt is unknown (a turn refused before its ' +
          'prompt was built, or stored before receipts kept prompt shapes).',
      }),
  })
  .meta({ id: 'TurnSummary' });

const turnDetailSchema = turnSummarySchema
  .extend({
    receipt: z
      .object({
        seen: z.array(seqRangeSchema.extend({ treatment: z.enum(['whole', 'compacted', 'dropped']) })).meta({
          description:
            'Every seq up to the turn input, in runs: sent whole, compacted (hash-stamped), or not sent (dropped).',
        }),
        synthetic: z.array(syntheticEntrySchema),
        context_start_seq: z.number().int().nullable(),
        abort: z.object({ name: z.string(), stored_as: z.string(), reason: z.string() }).nullable(),
        media_as_text: z
          .number()
          .int()
          .optional()
          .meta({
            description:
              'Images and files that went to the model as text placeholders: those of tool results where its ' +
              'provider takes none there, and files by URL where it takes none (absent when none did).',
          }),
      })
      .nullable(),
  })
  .meta({ id: 'TurnDetail' });

const pageQuerySchema = (max: number) =>
  z.object({
    before: integerText('before', Number.MAX_SAFE_INTEGER)
      .optional()
      .meta({ param: { name: 'before', in: 'query' } }),
    limit: integerText('limit', max)
      .optional()
      .meta({ param: { name: 'limit', in: 'query' } }),
  });

const listTurnsRoute = createRoute({
  method: 'get',
  path: '/v1/sessions/{id}/turns',
  tags: ['turns'],
  summary: 'Model turns, newest first (turns numbered below `before`; `limit` 1..100, default 20)',
  security: requires('session:read'),
  request: { params: sessionIdParamsSchema, query: pageQuerySchema(100) },
  responses: {
    200: jsonResponse(
      z.object({ turns: z.array(turnSummarySchema), has_more: z.boolean(), next_before: z.number().int().nullable() }),
      'A page of turns',
    ),
    ...errorResponses(400, 401, 403, 404, 503),
  },
});

const getTurnRoute = createRoute({
  method: 'get',
  path: '/v1/sessions/{id}/turns/{turn}',
  tags: ['turns'],
  summary: 'One turn with its receipt: what the model saw, rebuilt from the receipt and the stored items',
  security: requires('session:read'),
  request: { params: turnParamsSchema },
  responses: { 200: jsonResponse(turnDetailSchema, 'The turn'), ...errorResponses(400, 401, 403, 404, 503) },
});

const turnItemsRoute = createRoute({
  method: 'get',
  path: '/v1/sessions/{id}/turns/{turn}/items',
  tags: ['turns'],
  summary:
    "A page of the items up to the turn's input, newest first, each with its treatment in that turn (and the " +
    'compacted text the model got)',
  security: requires('session:read'),
  request: { params: turnParamsSchema, query: pageQuerySchema(1000) },
  responses: {
    200: jsonResponse(
      z.object({
        items: z.array(
          storedItemOutSchema.extend({
            treatment: z.enum(['whole', 'compacted', 'dropped']),
            compacted_as: z.object({ output: contentSchema.optional(), arguments: z.string().optional() }).optional(),
          }),
        ),
        has_more: z.boolean(),
        next_before: z.number().int().nullable(),
      }),
      'A page of items',
    ),
    ...errorResponses(400, 401, 403, 404, 503),
  },
});

const listSessionsQuerySchema = z.object({
  after: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,80}$/, 'after must be the next_after of a previous page (or a session id)')
    .optional()
    .meta({
      param: { name: 'after', in: 'query' },
      description:
        'The `next_after` of the previous page (opaque). A session id, as earlier versions returned, ' +
        'continues after that session; any other value (a session id naming no session too) is a 400.',
    }),
  limit: integerText('limit', 100)
    .optional()
    .meta({ param: { name: 'limit', in: 'query' } }),
  counts: z
    .enum(['true', 'false'])
    .optional()
    .meta({
      param: { name: 'counts', in: 'query' },
      description: 'false: counts and last activity are null (the page costs the same either way).',
    }),
});

const listSessionsRoute = createRoute({
  method: 'get',
  path: '/v1/sessions',
  tags: ['sessions'],
  summary:
    'Sessions, newest created first (one listing of the session index per page; ' +
    'about 1 MiB a page at most; `limit` 1..100, default 20)',
  security: requires('admin'),
  request: { query: listSessionsQuerySchema },
  responses: {
    200: jsonResponse(
      z.object({
        sessions: z.array(
          z.object({
            id: z.string(),
            created_at: z.string(),
            metadata: z.record(z.string(), z.unknown()),
            metadata_complete: z.boolean().meta({
              description:
                'false when the metadata is too large for the listing (`metadata` is then {}): ' +
                'GET /v1/sessions/{id} has it.',
            }),
            counts: sessionCountsSchema.nullable(),
            usage: sessionUsageSchema.nullable(),
            last_activity_at: z.string().nullable(),
            expires_at: z.string().nullable(),
          }),
        ),
        has_more: z.boolean(),
        next_after: z.string().nullable(),
      }),
      'A page of sessions',
    ),
    ...errorResponses(400, 401, 403, 503),
  },
});

/** GET /v1/sessions, GET /v1/sessions/:id/turns[/:turn[/items]]. */
export function receiptRoutes() {
  return createRouter()
    .openapi(listSessionsRoute, async (c) => {
      const { after, limit, counts } = c.req.valid('query');
      const page = await c.var.services.sessions.listSessions({
        limit: limit ?? 20,
        counts: counts !== 'false',
        background: c.var.services.background,
        ...(after !== undefined ? { after } : {}),
      });
      return c.json(page, 200);
    })
    .openapi(listTurnsRoute, async (c) => {
      const { id } = c.req.valid('param');
      const { before, limit } = c.req.valid('query');
      return c.json(
        await turnsAsTheyStand(
          c.var.services,
          id,
          await c.var.services.sessions.listTurns(id, {
            limit: limit ?? 20,
            ...(before !== undefined ? { before } : {}),
          }),
        ),
        200,
      );
    })
    .openapi(getTurnRoute, async (c) => {
      const { id, turn } = c.req.valid('param');
      return c.json(await turnAsItStands(c.var.services, id, turn), 200);
    })
    .openapi(turnItemsRoute, async (c) => {
      const { id, turn } = c.req.valid('param');
      const { before, limit } = c.req.valid('query');
      return c.json(
        await c.var.services.sessions.turnItems(id, turn, {
          limit: limit ?? 100,
          ...(before !== undefined ? { before } : {}),
        }),
        200,
      );
    });
}
