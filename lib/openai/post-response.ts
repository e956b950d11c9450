import { createStoredResponse } from './create-response.ts';
import { prepareContinued } from './continued-stateless.ts';
import { OpenAIApiError } from './errors.ts';
import type { Facade } from './facade.ts';
import { resolveItemReferences } from './item-references.ts';
import { prepareResponseRequest } from './request.ts';
import type { TailgateResponse } from './responses.ts';
import type { ResponseCreateBody } from './schemas.ts';
import { createStatelessResponse } from './stateless-response.ts';

/**
 * POST /v1/responses: a turn of the conversation's session (lib/openai/sessions.ts says which,
 * ./create-response.ts maps the request onto it), or with `store: false` a model call that stores
 * nothing (./stateless-response.ts): on the input alone, or under previous_response_id or
 * conversation on the prompt that conversation's next turn would send (./continued-stateless.ts).
 * Answers the response object, or with `stream: true` the Responses server-sent events.
 */
export async function createResponse(
  facade: Facade,
  body: ResponseCreateBody,
  idempotencyKey: string | undefined,
): Promise<TailgateResponse | Response> {
  const { input, origins } = await resolveItemReferences(facade, body.input);
  const prepared = prepareResponseRequest(facade, { ...body, input }, origins);
  if (body.store === false && body.background)
    throw new OpenAIApiError(
      400,
      'invalid_request',
      'background responses are stored: store must not be false',
      'background',
    );
  if (body.store !== false) return createStoredResponse(facade, prepared, idempotencyKey);
  const continued = body.previous_response_id || body.conversation;
  return createStatelessResponse(
    facade,
    prepared,
    continued ? (options) => prepareContinued(facade, prepared, options) : undefined,
  );
}
