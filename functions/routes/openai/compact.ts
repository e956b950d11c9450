import { createRoute } from '@hono/zod-openapi';
import { compactResponse } from '../../../lib/openai/compact-response.ts';
import { openaiObject, openaiObjectSchema, responseCompactSchema } from '../../../lib/openai/schemas.ts';
import { jsonBody } from '../../openapi-helpers.ts';
import { createRouter } from '../../router.ts';
import { requires } from '../../tokens.ts';
import { facadeOf, openaiErrors } from './facade-context.ts';

/** POST /v1/responses/compact (lib/openai/compact-response.ts does the work). */

const compactResponseRoute = createRoute({
  method: 'post',
  path: '/v1/responses/compact',
  tags: ['openai'],
  summary: "Compact a conversation (OpenAI's responses.compact): summarize it and start its context at the summary",
  description:
    'Needs session:turn. With previous_response_id the session is compacted (a token bound to it may); ' +
    'with input alone nothing is stored (a token bound to no session).',
  security: requires('session:turn'),
  request: { body: jsonBody(responseCompactSchema) },
  responses: {
    200: {
      description: 'The compacted response (object `response.compaction`)',
      content: { 'application/json': { schema: openaiObjectSchema } },
    },
    ...openaiErrors(400, 401, 402, 403, 404, 409, 413, 502, 503, 504),
  },
});

/** POST /v1/responses/compact. */
export function compactResponseRoutes() {
  return createRouter().openapi(compactResponseRoute, async (c) =>
    c.json(openaiObject(await compactResponse(facadeOf(c), c.req.valid('json'))), 200),
  );
}
