import { clientError } from '../error-codes.ts';
import type { Item } from '../items.ts';
import { trackCall } from '../session/log/open-calls.ts';
import { errorRecord } from '../turn/index.ts';
import { OpenAIApiError } from './errors.ts';
import type { Facade } from './facade.ts';
import { type ItemKind, randomId } from './ids.ts';
import { echoedModel, partInRequest, type PreparedRequest } from './request.ts';
import { buildResponse, usageOf, type TailgateResponse } from './responses.ts';
import { outputItems } from './output-items.ts';
import { responseEventStream } from './sse.ts';
import {
  callStateless,
  clientGone,
  prepareStateless,
  unlessGone,
  type PreparedStateless,
  type StatelessRequest,
} from './stateless.ts';
import { openaiTools } from './stored-responses.ts';

/** The prefix of the random id of an item of a response that is not stored, by kind. */
const RANDOM_ID_PREFIX: Record<ItemKind, string> = {
  message: 'msg',
  function_call: 'fc',
  function_call_output: 'fco',
  reasoning: 'rs',
};

/**
 * As a stored response's input (lib/session/log/commit.ts), with no call open before it: a
 * function_call_output must answer a function_call sent before it, once (else a 400 naming
 * `input[i].call_id`, `i` its position in the request's input). A call may go unanswered (the
 * prompt gives it a placeholder output, as to a stored call still open).
 */
export function checkInputCalls({ body: { input }, origins }: PreparedRequest): void {
  if (typeof input === 'string') return;
  const pending = new Set<string>();
  input.forEach((entry, index) => {
    if (entry.type === 'function_call' || entry.type === 'function_call_output')
      trackCall(pending, entry as Item, `input.${origins[index] ?? index}`);
  });
}

/** What a `store: false` response asks of its model call besides the prompt. */
type StatelessOptions = Omit<StatelessRequest, 'items' | 'instructions' | 'tools' | 'model'>;

/**
 * A `store: false` response: the strategies and the model run on the input alone and nothing
 * is stored (lib/openai/stateless.ts), or `continued` prepares the prompt of the conversation its
 * previous_response_id or conversation names (./continued-stateless.ts). Its ids are random. With `include:
 * ["reasoning.encrypted_content"]` its reasoning items carry the provider's payload, which the
 * input takes back (inputToItems puts it on the item after it), so a tool loop keeps thinking.
 */
export async function createStatelessResponse(
  facade: Facade,
  prepared: PreparedRequest,
  /** Under previous_response_id or conversation: that conversation's next turn's prompt (./continued-stateless.ts). */
  continued?: (options: StatelessOptions) => Promise<PreparedStateless>,
): Promise<TailgateResponse | Response> {
  const { services } = facade;
  const { body, model, instructions, items, tools, turnTools } = prepared;
  if (body.context_management?.[0]) {
    throw new OpenAIApiError(
      400,
      'invalid_request',
      'context_management compacts a stored conversation; ' +
        'with store: false, call POST /v1/responses/compact and send its output as input',
      'context_management',
    );
  }
  // A token that may start no conversation has its session's budget to keep: it runs nothing unstored.
  facade.authorize(null);
  if (!continued) checkInputCalls(prepared);
  const options: StatelessOptions = {
    ...(body.max_output_tokens ? { maxOutputTokens: body.max_output_tokens } : {}),
    ...(body.temperature !== undefined && body.temperature !== null ? { temperature: body.temperature } : {}),
    ...(body.prompt_cache_key ? { promptCacheKey: body.prompt_cache_key } : {}),
    ...(Object.keys(prepared.modelSettings).length > 0 ? { settings: prepared.modelSettings } : {}),
    ...(body.truncation ? { truncation: body.truncation } : {}),
  };
  const request = {
    ...options,
    items,
    instructions,
    tools: turnTools ?? [],
    model: model ?? facade.config.defaultModel,
  };
  // A refused image or file is named by its position in the request's input.
  const named = (error: unknown): never => {
    throw partInRequest(error, prepared.positions.items) ?? error;
  };
  const ready = continued ? await continued(options) : await prepareStateless(services, request).catch(named);
  const conversation = typeof body.conversation === 'string' ? body.conversation : body.conversation?.id;
  const fields = {
    ...prepared.echo,
    model: echoedModel(facade, prepared, ready.model.id),
    tools: openaiTools(ready.ran?.tools ?? tools ?? []),
    // Off a stored conversation, the instructions it ran with, as the stored create echoes them.
    ...(ready.ran ? { instructions: ready.ran.instructions } : {}),
    conversationId: conversation ?? null,
    store: false,
  };
  const ids = new Map<string, string>();
  const idAt = (index: number, item: { type: ItemKind }) => {
    const key = `${item.type}:${index}`;
    if (!ids.has(key)) ids.set(key, randomId(RANDOM_ID_PREFIX[item.type]));
    return ids.get(key)!;
  };
  // OpenAI's contract: a reasoning item's payload comes only when asked for (the client resends it).
  const encrypted = body.include?.includes('reasoning.encrypted_content') === true;
  const id = randomId('resp');
  // When the request came: one created_at from response.created to response.completed.
  const createdAt = services.clock();
  const finish = (result: Awaited<ReturnType<typeof callStateless>>) =>
    buildResponse({
      ...fields,
      id,
      createdAt,
      completedAt: services.clock(),
      status: result.incomplete ? 'incomplete' : 'completed',
      ...(result.incomplete ? { incomplete: result.incomplete } : {}),
      output: result.output.flatMap((item, index) =>
        outputItems(item, (type) => idAt(index, { type }), encrypted, result.logprobs?.[index]),
      ),
      usage: usageOf(result.usage),
      tailgate: { context: result.context },
    });
  if (!body.stream) {
    const call = callStateless(services, ready, undefined, facade.signal).catch(continued ? undefined : named);
    const result = await unlessGone(call, facade.signal);
    return result instanceof Response ? result : finish(result);
  }
  const gone = clientGone(facade.signal);
  const stream = responseEventStream(idAt, { encryptedReasoning: encrypted, onCancel: gone.stop });
  const { writer } = stream;
  writer.started(buildResponse({ ...fields, id, createdAt, status: 'in_progress', output: [] }));
  void callStateless(services, ready, (event) => writer.modelEvent(event), gone.signal)
    .then(
      (result) => writer.completed(finish(result)),
      (error: unknown) => {
        // Its client gone (the call aborted), nobody reads its failure: not one to log.
        if (gone.signal.aborted) return;
        services.log('tailgate: streamed response failed', error);
        writer.failed(
          buildResponse({
            ...fields,
            id,
            createdAt,
            completedAt: services.clock(),
            status: 'failed',
            output: [],
            error: clientError(errorRecord(error)),
          }),
        );
      },
    )
    .finally(stream.close);
  return stream.response();
}
