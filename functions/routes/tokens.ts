import { createRoute } from '@hono/zod-openapi';
import { NotConfiguredError } from '../../lib/errors.ts';
import { z } from 'zod';
import { idSchema } from '../../lib/items.ts';
import { budgetRemaining } from '../../lib/ledger/budget.ts';
import { budgetSchema, sessionUsage, sessionUsageSchema } from '../../lib/ledger/usage.ts';
import { createRouter } from '../router.ts';
import { errorResponses, jsonBody, jsonResponse, noFieldsBody } from '../openapi-helpers.ts';
import { sessionIdParamsSchema } from '../schemas.ts';
import {
  anyToken,
  DEFAULT_TTL_SECONDS,
  MAX_TTL_SECONDS,
  mintToken,
  requires,
  scopeSchema,
  signingKey,
} from '../tokens.ts';

const mintRequestSchema = z
  .object({
    scopes: z
      .array(scopeSchema)
      .min(1)
      .meta({ description: 'inbox:write, inbox:read, session:read, session:turn (includes session:read) or admin' }),
    session_id: idSchema.optional().meta({
      description:
        'Bind the token to this session: it works only on /v1/sessions/{id} and below, and is revocable there.',
    }),
    ttl_seconds: z
      .number()
      .int()
      .positive()
      .max(MAX_TTL_SECONDS)
      .optional()
      .meta({
        description: `Lifetime in seconds (default ${DEFAULT_TTL_SECONDS}, at most ${MAX_TTL_SECONDS}: 30 days).`,
      }),
    budget: budgetSchema.optional().meta({
      description:
        "Limits on what this token's turns spend across all its sessions; a turn past one is refused " +
        '(402 budget_exhausted, details.budget: token).',
    }),
  })
  .strict();

const mintedSchema = z.object({
  token: z.string(),
  scopes: z.array(scopeSchema),
  session_id: z.string().nullable(),
  budget: budgetSchema.nullable(),
  expires_at: z.string().meta({ description: 'ISO 8601' }),
});

const currentSchema = z.object({
  scopes: z.array(scopeSchema),
  session_id: z.string().nullable().meta({ description: 'The session the token is bound to; null: any session.' }),
  expires_at: z.string().nullable().meta({ description: 'ISO 8601; null for API_TOKEN and anonymous access.' }),
  budget: budgetSchema.nullable().meta({ description: "The token's budget; null: none (its turns are not counted)." }),
  usage: sessionUsageSchema.nullable().meta({
    description:
      "What the token's completed turns spent across its sessions and stateless calls, as a session's usage " +
      'shows it (each charged before its answer); null without a budget.',
  }),
  remaining: budgetSchema.nullable().meta({
    description:
      'Each limit of the budget less what was spent (max_cost_usd against priced_cost_usd), 0 once reached: ' +
      'its next turn is refused with 402 budget_exhausted. Null without a budget.',
  }),
});

const currentRoute = createRoute({
  method: 'get',
  path: '/v1/tokens/current',
  tags: ['tokens'],
  summary: "The bearer token's scopes, binding, expiry, budget and what its turns spent",
  security: anyToken(),
  responses: {
    200: jsonResponse(currentSchema, 'What applies to the token that sends the request'),
    ...errorResponses(401, 404, 503),
  },
});

const revokedSchema = z.object({
  session_id: z.string(),
  token_generation: z
    .number()
    .int()
    .meta({ description: 'Tokens bound to the session and minted before this generation get 401.' }),
});

const mintRoute = createRoute({
  method: 'post',
  path: '/v1/tokens',
  tags: ['tokens'],
  summary: 'Mint a scoped, expiring bearer token, optionally bound to one session',
  security: requires('admin'),
  request: { body: jsonBody(mintRequestSchema) },
  responses: {
    201: jsonResponse(mintedSchema, 'The token (shown once; the service stores nothing)'),
    ...errorResponses(400, 401, 403, 404, 503),
  },
});

const revokeRoute = createRoute({
  method: 'post',
  path: '/v1/sessions/{id}/tokens/revoke',
  tags: ['tokens'],
  summary: 'Revoke every token bound to the session minted so far',
  security: requires('admin'),
  request: { params: sessionIdParamsSchema, body: noFieldsBody },
  responses: {
    200: jsonResponse(revokedSchema, 'The session token generation after the call'),
    ...errorResponses(400, 401, 403, 404, 503),
  },
});

/** POST /v1/tokens, GET /v1/tokens/current and POST /v1/sessions/:id/tokens/revoke. */
export function tokenRoutes(clock: () => Date) {
  return createRouter()
    .openapi(currentRoute, async (c) => {
      const { principal } = c.var;
      const { sessions, tokenSpend } = c.var.services;
      // A bound token is checked against its session's config (revoked: 401), beside the spend's one get.
      const [spent] = await Promise.all([
        tokenSpend?.read() ?? null,
        principal.sessionId !== null ? sessions.tokenBinding(principal.sessionId) : null,
      ]);
      const budget = principal.budget?.limits ?? null;
      return c.json(
        {
          scopes: principal.scopes,
          session_id: principal.sessionId,
          expires_at: principal.expires === null ? null : new Date(principal.expires * 1000).toISOString(),
          budget,
          usage: spent ? sessionUsage(spent) : null,
          remaining: budget && spent ? budgetRemaining(budget, spent) : null,
        },
        200,
      );
    })
    .openapi(mintRoute, async (c) => {
      const body = c.req.valid('json');
      const key = await signingKey(c.var.config);
      if (!key) {
        throw new NotConfiguredError(
          'minting tokens needs TOKEN_SIGNING_KEY: at least 32 random bytes in base64 ' +
            '(generate one with `openssl rand -base64 32`; see docs/SECURITY.md)',
          { variable: 'TOKEN_SIGNING_KEY' },
        );
      }
      const sessionId = body.session_id ?? null;
      // A bound token carries its session's generation, read now (404 for a missing session).
      // ...and its incarnation: a token for a deleted session never opens one created again
      // (or imported) with its id, and a delete of its newest turn keeps it.
      const { generation, incarnation } =
        sessionId === null ? { generation: 0, incarnation: '' } : await c.var.services.sessions.tokenBinding(sessionId);
      const minted = await mintToken(
        key,
        {
          scopes: body.scopes,
          sessionId,
          generation,
          incarnation,
          ttlSeconds: body.ttl_seconds ?? DEFAULT_TTL_SECONDS,
          budget: body.budget,
          // A minted token mints nothing that outlives it or escapes its budget.
          minter: c.var.principal,
        },
        clock(),
      );
      return c.json(minted, 201);
    })
    .openapi(revokeRoute, async (c) => {
      const { id } = c.req.valid('param');
      return c.json({ session_id: id, token_generation: await c.var.services.sessions.revokeTokens(id) }, 200);
    });
}
