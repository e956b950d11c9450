import { AbortedError, NotFoundError, TailgateError, UnknownStrategyError } from '../errors.ts';
import { consumeForModelCall, type DeliveredNotice } from '../inbox/index.ts';
import { idSchema, type Tool } from '../items.ts';
import { resolveStrategyNames } from '../turn/index.ts';
import {
  buildChatCompletion,
  ChatChunkWriter,
  chatMessagesToItems,
  chatModelSettings,
  type ChatMessageBody,
  type TailgateChatCompletion,
} from './chat.ts';
import { chatAbortRetry, keepChatAbort } from './aborted-retry.ts';
import { OpenAIApiError } from './errors.ts';
import { modelOf, type Facade } from './facade.ts';
import { makesBlock } from '../models/cache-breakpoints.ts';
import { randomId } from './ids.ts';
import { partInRequest } from './request.ts';
import { callsNone, checkToolChoice, fromChatToolChoice } from './tool-choice.ts';
import type { ChatCompletionCreateBody } from './chat-schemas.ts';
import { eventQueue, sseResponse, type SseMessage } from './sse.ts';
import {
  callStateless,
  clientGone,
  prepareStateless,
  runStateless,
  unlessGone,
  type StatelessRequest,
} from './stateless.ts';

/**
 * POST /v1/chat/completions: stateless. The client sends the whole conversation every time;
 * the strategies (`x-tailgate-strategies`, default PROMPT_STRATEGY) prepare the prompt from
 * it, so a resending client still gets cache-stable pruning, and nothing is stored. With
 * `x-tailgate-session`, that session's inbox is consumed (when `inbox` is among the
 * strategies): its notices go into the prompt, and an `abort` notice is a 409.
 */

function toTools(tools: ChatCompletionCreateBody['tools']): Tool[] {
  return (tools ?? []).map(({ function: tool }) => ({
    type: 'function' as const,
    name: tool.name,
    ...(tool.description ? { description: tool.description } : {}),
    ...(tool.parameters ? { parameters: tool.parameters } : {}),
    ...(tool.strict ? { strict: true } : {}),
  }));
}

/**
 * Consumes the inbox of the named session for this call (turn 0 in the delivery records: no
 * session turn). An `abort` notice gives the others back and is answered 409 `aborted`; a
 * retry of the request it refused (the same messages, the session as it stood) is refused
 * again with that error, nothing consumed (lib/openai/aborted-retry.ts).
 */
async function consumeNotices(
  facade: Facade,
  request: Parameters<typeof chatAbortRetry>[1],
  strategies: string[],
): Promise<{ notices: DeliveredNotice[]; createdAt?: string }> {
  const { sessions, inbox } = facade.services;
  const { sessionId } = request;
  // Only a call that consumes the inbox meets an abort (and so may retry one).
  const consumes = strategies.includes('inbox');
  const [session, retried] = await Promise.all([
    sessions.get(sessionId).catch((error: unknown) => {
      throw error instanceof NotFoundError
        ? new OpenAIApiError(
            404,
            'not_found',
            `Session '${sessionId}' (x-tailgate-session) not found.`,
            'x-tailgate-session',
          )
        : error;
    }),
    consumes ? chatAbortRetry(facade, request) : undefined,
  ]);
  if (!consumes) return { notices: [] };
  const refusal = await retried?.(session);
  if (refusal) throw refusal;
  const consumed = await consumeForModelCall(
    inbox,
    sessionId,
    { created_at: session.created_at, incarnation: undefined },
    0,
  );
  if (consumed.abort) {
    const { abort } = consumed;
    if (consumed.delivered.length > 0)
      await inbox.giveBack(sessionId, consumed.delivered, 0, { created_at: session.created_at });
    const aborted = new AbortedError(abort.reason, {
      reason: abort.reason,
      notice: abort.name,
      stored_as: abort.stored_as,
      turn: 0,
    });
    await keepChatAbort(facade, request, session, aborted);
    throw aborted;
  }
  return { notices: consumed.delivered, createdAt: session.created_at };
}

/** The header a call's strategies come from. */
const STRATEGIES_HEADER = 'x-tailgate-strategies';

/**
 * The strategies a call runs: the header's, else the deployment's. An unknown name is a 400 naming the header as a
 * header's other refusals do (functions/error-handler.ts validationError): `details.field` and `param` are its name,
 * and the message starts `header.x-tailgate-strategies: `.
 */
function strategiesOf(header: string | undefined, env: Parameters<typeof resolveStrategyNames>[1]): string[] {
  try {
    return resolveStrategyNames(header, env);
  } catch (error) {
    if (header === undefined || !(error instanceof UnknownStrategyError)) throw error;
    const message = `header.${STRATEGIES_HEADER}: ${error.message}`;
    const details = { field: STRATEGIES_HEADER, ...(error.details as object) };
    throw new OpenAIApiError(400, error.code, message, STRATEGIES_HEADER, details);
  }
}

/**
 * POST /v1/chat/completions: the completion object, or the chunk stream as server-sent events.
 */
export async function createChatCompletion(
  facade: Facade,
  body: ChatCompletionCreateBody,
  headers: { 'x-tailgate-strategies'?: string | undefined; 'x-tailgate-session'?: string | undefined },
): Promise<TailgateChatCompletion | Response> {
  const services = facade.services;
  const sessionId = headers['x-tailgate-session'] ?? null;
  if (sessionId !== null && !idSchema.safeParse(sessionId).success)
    throw new OpenAIApiError(
      400,
      'invalid_request',
      'x-tailgate-session: a session id must match ^[A-Za-z0-9_-]{1,64}$',
      'x-tailgate-session',
    );
  facade.authorize(sessionId, 'x-tailgate-session');
  const model = modelOf(facade, body.model);
  const { instructions, items, origins } = chatMessagesToItems(body.messages as ChatMessageBody[]);
  facade.checkItems(items, 'messages', origins);
  // A message with no text but whitespace is not sent (lib/models/convert-to-model-messages.ts):
  // messages of nothing else (or of instructions alone) leave the model nothing to answer but a
  // session's notices; without one the model's refusal of the prompt names messages (giveBack).
  if (sessionId === null && !items.some(makesBlock))
    throw new OpenAIApiError(
      400,
      'invalid_request',
      'messages hold no user, assistant or tool message with content (one with no text but whitespace is not sent)',
      'messages',
    );
  const choice = fromChatToolChoice(body.tool_choice);
  // A stateless call offers only the request's tools: a named or required choice needs them (as a response's).
  checkToolChoice(
    choice,
    toTools(body.tools),
    'tools',
    (index) => `tool_choice.allowed_tools.tools.${index}.function.name`,
  );
  const strategies = strategiesOf(headers['x-tailgate-strategies'], services.env);
  const maxOutputTokens = body.max_completion_tokens ?? body.max_tokens ?? undefined;
  const { notices, createdAt } =
    sessionId !== null ? await consumeNotices(facade, { sessionId, instructions, items }, strategies) : { notices: [] };
  const request: StatelessRequest = {
    items,
    instructions,
    tools: callsNone(choice) ? [] : toTools(body.tools),
    model,
    strategies,
    notices,
    ...(maxOutputTokens ? { maxOutputTokens } : {}),
    ...(body.temperature !== undefined && body.temperature !== null ? { temperature: body.temperature } : {}),
    ...(body.prompt_cache_key ? { promptCacheKey: body.prompt_cache_key } : {}),
    settings: chatModelSettings(body),
  };
  // Notices go back to the inbox when no model answered them; a refused image or file is named
  // by its message's position.
  const giveBack = async (error: unknown): Promise<never> => {
    // Named as the session the notices were consumed for, as a closed turn names it: one deleted
    // and created again under the id meanwhile does not get them (lib/inbox/carry.ts giveBack).
    if (sessionId !== null && notices.length > 0)
      await services.inbox.giveBack(
        sessionId,
        notices,
        0,
        createdAt === undefined ? undefined : { created_at: createdAt },
      );
    const named = partInRequest(error, origins, 'messages');
    if (named) throw named;
    // A refusal of the prompt as a whole (lib/models/sdk-model.ts) names the request's messages.
    if (error instanceof TailgateError && error.code === 'invalid_request') {
      const details = (error.details ?? {}) as { field?: unknown };
      if (details.field === 'input')
        throw new TailgateError(error.code, error.message, { ...details, field: 'messages' });
    }
    throw error;
  };
  const id = randomId('chatcmpl');
  const created = services.clock();
  const tailgate = (context: unknown) => ({ context, ...(sessionId !== null ? { session_id: sessionId } : {}) });

  if (!body.stream) {
    const call = runStateless(services, request, undefined, facade.signal).catch(giveBack);
    // Its end (the notices given back) still lands once its client is gone (a Worker's waitUntil).
    services.background(call.then(undefined, () => undefined));
    const result = await unlessGone(call, facade.signal);
    if (result instanceof Response) return result;
    return buildChatCompletion({
      id,
      created,
      model: body.model,
      output: result.output,
      usage: result.usage,
      incomplete: result.incomplete,
      ...(body.service_tier ? { serviceTier: body.service_tier } : {}),
      logprobs: body.logprobs === true,
      tokens: result.logprobs,
      tailgate: tailgate(result.context),
    });
  }
  // Refusals before the model call (a prompt over the window, a spent budget) are answered with their status.
  const prepared = await prepareStateless(services, request).catch(giveBack);
  const queue = eventQueue<SseMessage>();
  const writer = new ChatChunkWriter(
    {
      id,
      created,
      model: body.model,
      includeUsage: body.stream_options?.include_usage === true,
      logprobs: body.logprobs === true,
    },
    (chunk) => queue.push({ data: JSON.stringify(chunk) }),
  );
  const gone = clientGone(facade.signal);
  services.background(
    callStateless(services, prepared, (event) => writer.modelEvent(event), gone.signal)
      .catch(giveBack)
      .then(
        (result) => {
          writer.done(result.usage, result.incomplete, tailgate(result.context));
          queue.push({ data: '[DONE]' });
        },
        // Its client gone (the call aborted), nobody reads its error.
        (error: unknown) => gone.signal.aborted || queue.push({ data: JSON.stringify(facade.errorBody(error)) }),
      )
      .finally(() => queue.close()),
  );
  return sseResponse(queue, gone.stop);
}
