import { createRoute } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { z } from 'zod';
import { NotFoundError, AbortedError } from '../../../lib/errors.ts';
import type { DeliveredNotice } from '../../../lib/inbox/inbox.ts';
import type { Tool } from '../../../lib/items.ts';
import {
  buildChatCompletion,
  ChatChunkWriter,
  chatMessagesToItems,
  chatModelSettings,
  type ChatMessageBody,
} from '../../../lib/openai/chat.ts';
import { randomId } from '../../../lib/openai/ids.ts';
import { runStateless, type StatelessRequest } from '../../../lib/openai/stateless.ts';
import { resolveStrategyNames } from '../../../lib/turn.ts';
import { authorizeSession } from '../../auth.ts';
import { checkItemSizes } from '../../item-size.ts';
import { jsonBody } from '../../openapi-helpers.ts';
import { createRouter, type AppEnv } from '../../router.ts';
import { requires } from '../../tokens.ts';
import { OpenAIApiError } from '../../../lib/openai/errors.ts';
import { openaiErrorBody } from './errors.ts';
import { modelOf } from '../../../lib/openai/facade.ts';
import { eventQueue, sseResponse, type SseMessage } from '../../../lib/openai/sse.ts';
import { facadeOf, openaiErrors } from './facade-context.ts';
import {
  chatCompletionCreateSchema,
  openaiObjectSchema,
  type ChatCompletionCreateBody,
} from '../../../lib/openai/schemas.ts';

/**
 * POST /v1/chat/completions: stateless. The client sends the whole conversation every time;
 * the strategies (`x-tailgate-strategies`, default PROMPT_STRATEGY) prepare the prompt from
 * it, so a resending client still gets cache-stable pruning, and nothing is stored. With
 * `x-tailgate-session`, that session's inbox is consumed (when `inbox` is among the
 * strategies): its notices go into the prompt, and an `abort` notice is a 409.
 */

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
    ...openaiErrors(400, 401, 403, 404, 409, 413, 502, 503, 504),
  },
});

function toTools(tools: ChatCompletionCreateBody['tools']): Tool[] {
  return (tools ?? []).map(({ function: tool }) => ({
    type: 'function' as const,
    name: tool.name,
    ...(tool.description ? { description: tool.description } : {}),
    ...(tool.parameters ? { parameters: tool.parameters } : {}),
  }));
}

/**
 * Consumes the inbox of the named session for this call (turn 0 in the delivery records: no
 * session turn). An `abort` notice gives the others back and is answered 409 `aborted`.
 */
async function consumeNotices(c: Context<AppEnv>, sessionId: string, strategies: string[]): Promise<DeliveredNotice[]> {
  const { sessions, inbox } = c.var.services;
  const session = await sessions.get(sessionId).catch((error: unknown) => {
    throw error instanceof NotFoundError
      ? new OpenAIApiError(
          404,
          'not_found',
          `Session '${sessionId}' (x-tailgate-session) not found.`,
          'x-tailgate-session',
        )
      : error;
  });
  if (!strategies.includes('inbox')) return [];
  const consumed = await inbox.consume(sessionId, { turn: 0, sessionExists: true, since: session.created_at });
  if (consumed.abort) {
    const { abort } = consumed;
    if (consumed.delivered.length > 0) await inbox.giveBack(sessionId, consumed.delivered, 0);
    throw new AbortedError(abort.reason, {
      reason: abort.reason,
      notice: abort.name,
      stored_as: abort.stored_as,
      turn: 0,
    });
  }
  return consumed.delivered;
}

async function createChatCompletion(
  c: Context<AppEnv>,
  body: ChatCompletionCreateBody,
  headers: { 'x-tailgate-strategies'?: string | undefined; 'x-tailgate-session'?: string | undefined },
): Promise<Response> {
  const services = c.var.services;
  const sessionId = headers['x-tailgate-session'] ?? null;
  authorizeSession(c, sessionId);
  const model = modelOf(facadeOf(c), body.model);
  const { instructions, items } = chatMessagesToItems(body.messages as ChatMessageBody[]);
  checkItemSizes(items, c.var.config.maxItemBytes);
  if (items.length === 0)
    throw new OpenAIApiError(400, 'invalid_request', 'messages hold no user, assistant or tool message', 'messages');
  const strategies = resolveStrategyNames(headers['x-tailgate-strategies'], services.env);
  const maxOutputTokens = body.max_completion_tokens ?? body.max_tokens ?? undefined;
  const notices = sessionId !== null ? await consumeNotices(c, sessionId, strategies) : [];
  const request: StatelessRequest = {
    items,
    instructions,
    tools: body.tool_choice === 'none' ? [] : toTools(body.tools),
    model,
    strategies,
    notices,
    ...(maxOutputTokens ? { maxOutputTokens } : {}),
    ...(body.temperature !== undefined && body.temperature !== null ? { temperature: body.temperature } : {}),
    ...(body.prompt_cache_key ? { promptCacheKey: body.prompt_cache_key } : {}),
    settings: chatModelSettings(body),
  };
  // Notices go back to the inbox when no model answered them.
  const giveBack = async (error: unknown): Promise<never> => {
    if (sessionId !== null && notices.length > 0) await services.inbox.giveBack(sessionId, notices, 0);
    throw error;
  };
  const id = randomId('chatcmpl');
  const created = new Date();
  const tailgate = (context: unknown) => ({ context, ...(sessionId !== null ? { session_id: sessionId } : {}) });

  if (!body.stream) {
    const result = await runStateless(services, request).catch(giveBack);
    return c.json(
      buildChatCompletion({
        id,
        created,
        model: body.model,
        output: result.output,
        usage: result.usage,
        ...(body.service_tier ? { serviceTier: body.service_tier } : {}),
        tailgate: tailgate(result.context),
      }),
      200,
    );
  }
  const queue = eventQueue<SseMessage>();
  const writer = new ChatChunkWriter(
    { id, created, model: body.model, includeUsage: body.stream_options?.include_usage === true },
    (chunk) => queue.push({ data: JSON.stringify(chunk) }),
  );
  void runStateless(services, request, (event) =>
    event.type === 'text_delta' ? writer.delta(event.delta) : writer.itemDone(event.item),
  )
    .catch(giveBack)
    .then(
      (result) => {
        writer.done(result.usage, tailgate(result.context));
        queue.push({ data: '[DONE]' });
      },
      (error: unknown) => queue.push({ data: JSON.stringify(openaiErrorBody(error, services.log).body) }),
    )
    .finally(() => queue.close());
  return sseResponse(queue);
}

/** POST /v1/chat/completions. */
export function chatRoutes() {
  return createRouter().openapi(chatRoute, async (c) =>
    createChatCompletion(c, c.req.valid('json'), c.req.valid('header')),
  );
}
