import { createRoute } from '@hono/zod-openapi';
import { InvalidRequestError } from '../../lib/errors.ts';
import { previewPrompt } from '../../lib/turn.ts';
import { createRouter } from '../router.ts';
import { checkJsonValue } from '../request-json.ts';
import { errorResponses, jsonResponse } from '../openapi-helpers.ts';
import { promptPreviewSchema, promptQuerySchema, sessionIdParamsSchema } from '../schemas.ts';

const previewRoute = createRoute({
  method: 'get',
  path: '/v1/sessions/{id}/prompt',
  tags: ['prompt'],
  summary: 'What the model would be sent now (no side effects; pending notices marked)',
  request: { params: sessionIdParamsSchema, query: promptQuerySchema },
  responses: { 200: jsonResponse(promptPreviewSchema, 'The prompt and its context'), ...errorResponses(400, 401, 404, 503) },
});

/** GET /v1/sessions/:id/prompt. */
export function promptRoutes() {
  return createRouter().openapi(previewRoute, async (c) => {
    const { id } = c.req.valid('param');
    const query = c.req.valid('query');
    const preview = await previewPrompt(c.var.services, id, {
      ...(query.strategies !== undefined ? { strategies: query.strategies } : {}),
      ...(query.strategy_config !== undefined ? { strategy_config: parseConfigQuery(query.strategy_config) } : {}),
    });
    return c.json(preview, 200);
  });
}

function parseConfigQuery(text: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new InvalidRequestError('query.strategy_config: not valid JSON', { field: 'strategy_config' });
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidRequestError('query.strategy_config: must be a JSON object', { field: 'strategy_config' });
  }
  checkJsonValue(value, 'query.strategy_config');
  return value as Record<string, unknown>;
}
