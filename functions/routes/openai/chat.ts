import { createRoute } from '@hono/zod-openapi';
import { z } from 'zod';
import { createChatCompletion } from '../../../lib/openai/chat-completion.ts';
import { chatCompletionCreateSchema } from '../../../lib/openai/chat-schemas.ts';
import { openaiObject, openaiObjectSchema } from '../../../lib/openai/schemas.ts';
import { jsonBody } from '../../openapi-helpers.ts';
import { createRouter } from '../../router.ts';
import { requires } from '../../tokens.ts';
import { facadeOf, openaiErrors } from './facade-context.ts';

/** POST /v1/chat/completions (lib/openai/chat-completion.ts does the work). */

const chatRoute = createRoute({
  method: 'post',
  path: '/v1/chat/completions',
  tags: ['openai'],
  summary:
    'Create a chat completion (OpenAI Chat Completions): the strategies run on the messages sent, nothing is stored',
  description:
    'Needs session:turn. Without x-tailgate-session it touches no session, which a token bound to a session may ' +
    'not do; with it, the token must be bound to that session or to none.',
  security: requires('session:turn'),
  request: {
    body: jsonBody(chatCompletionCreateSchema),
    headers: z.object({
      'x-tailgate-strategies': z
        .string()
        .min(1)
        .max(1000)
        .optional()
        .meta({ description: 'Comma-separated strategy names (default: PROMPT_STRATEGY, else the default list).' }),
      'x-tailgate-session': z.string().min(1).max(64).optional().meta({
        description: 'A session whose inbox notices this call delivers (and whose abort notice it answers with 409).',
      }),
    }),
  },
  responses: {
    200: {
      description:
        'The chat completion, or with `stream: true` chat.completion.chunk server-sent events ending with [DONE]',
      content: { 'application/json': { schema: openaiObjectSchema }, 'text/event-stream': { schema: z.string() } },
    },
    ...openaiErrors(400, 401, 402, 403, 404, 409, 413, 429, 502, 503, 504),
  },
});

/** POST /v1/chat/completions. */
export function chatRoutes() {
  return createRouter().openapi(chatRoute, async (c) => {
    const result = await createChatCompletion(facadeOf(c), c.req.valid('json'), c.req.valid('header'));
    return result instanceof Response ? result : c.json(openaiObject(result), 200);
  });
}
