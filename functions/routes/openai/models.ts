import { createRoute } from '@hono/zod-openapi';
import { z } from 'zod';
import { modelById, modelList } from '../../../lib/openai/models.ts';
import { openaiObject, openaiObjectSchema } from '../../../lib/openai/schemas.ts';
import { createRouter } from '../../router.ts';
import { requires } from '../../tokens.ts';
import { openaiErrors } from './facade-context.ts';

/** GET /v1/models and GET /v1/models/{id}: the configured models and MODEL_ALIASES (lib/openai/models.ts). */

const listModelsRoute = createRoute({
  method: 'get',
  path: '/v1/models',
  tags: ['openai'],
  summary: 'The models a request may name: DEFAULT_MODEL, SUMMARY_MODEL, echo and every MODEL_ALIASES name',
  description: 'Needs session:read; a token bound to a session may list them (they name no session).',
  security: requires('session:read'),
  responses: {
    200: { description: 'A list of models', content: { 'application/json': { schema: openaiObjectSchema } } },
    ...openaiErrors(401, 403),
  },
});

const getModelRoute = createRoute({
  method: 'get',
  path: '/v1/models/{id}',
  tags: ['openai'],
  summary: 'A model by name: a listed one, or any tailgate model id (404 model_not_found otherwise)',
  description:
    'Answered whether or not its provider is configured: tailgate.configured says (tailgate.setting: what it needs).',
  security: requires('session:read'),
  request: {
    params: z.object({
      id: z
        .string()
        .min(1)
        .max(300)
        .meta({ param: { name: 'id', in: 'path' }, example: 'echo' }),
    }),
  },
  responses: {
    200: { description: 'The model', content: { 'application/json': { schema: openaiObjectSchema } } },
    ...openaiErrors(401, 403, 404),
  },
});

export function modelRoutes() {
  return createRouter()
    .openapi(listModelsRoute, (c) => c.json(openaiObject(modelList(c.var.config, c.var.services.model)), 200))
    .openapi(getModelRoute, (c) =>
      c.json(openaiObject(modelById(c.var.config, c.var.services.model, c.req.valid('param').id)), 200),
    );
}
