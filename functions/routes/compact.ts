import { createRoute } from '@hono/zod-openapi';
import { indexedCompaction } from '../../lib/openai/compact-response.ts';
import { compactSessionFrom } from '../../lib/turn/compact-session.ts';
import { createRouter } from '../router.ts';
import { requires } from '../tokens.ts';
import { errorResponses, jsonResponse } from '../openapi-helpers.ts';
import { compactRequestSchema, compactResultSchema, sessionIdParamsSchema } from '../schemas.ts';
import { facadeOf } from './openai/facade-context.ts';

const compactRoute = createRoute({
  method: 'post',
  path: '/v1/sessions/{id}/compact',
  tags: ['sessions'],
  summary: 'Summarize the older part of the current context and move the context start (the history keeps everything)',
  security: requires('session:turn'),
  request: {
    params: sessionIdParamsSchema,
    body: { required: false, content: { 'application/json': { schema: compactRequestSchema } } },
  },
  responses: {
    200: jsonResponse(compactResultSchema, 'The context start after the call'),
    ...errorResponses(400, 401, 402, 403, 404, 409, 502, 503, 504),
  },
});

/**
 * POST /v1/sessions/:id/compact. Its compaction is indexed as a response's is
 * (lib/openai/history-index.ts): a Responses client that sends the conversation's compaction
 * item first (and the items it kept, as the conversation lists them after it), then new items,
 * continues the session.
 */
export function compactRoutes() {
  return createRouter().openapi(compactRoute, async (c) => {
    const { id } = c.req.valid('param');
    const body = c.req.valid('json') ?? {};
    const services = c.var.services;
    if (body.model !== undefined) services.model(body.model);
    const { answer, madeOf, generation } = await compactSessionFrom(services, id, body);
    if (answer.compacted && answer.context)
      await indexedCompaction(facadeOf(c), id, { ...answer.context, ...(generation ? { generation } : {}) }, madeOf);
    return c.json(answer, 200);
  });
}
