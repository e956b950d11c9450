import type { Item, PromptItem, Tool } from '../items.ts';
import { inlineAttachments } from '../session/attachments.ts';
import { refuseOverToolLimit, type ModelResult, type ModelSettings } from '../models/model.ts';
import { fitPrompt } from '../compaction/index.ts';
import { resolveStrategyConfig } from '../strategies/index.ts';
import { resolveStrategyNames, type TurnContext, type TurnServices } from '../turn/index.ts';
import { assemblePrompt, promptContext } from '../turn/assemble-prompt.ts';
import { buildModelRequest, callModel, promptBudget, type ModelOutputEvent } from '../turn/model-call.ts';
import { CallMeter } from '../turn/stopped-spend.ts';
import { providerMayHaveRun } from '../models/provider-reach.ts';
import { countPromptTokens, type TokenCounter } from '../tokens/token-counter.ts';
import { outputRoom } from '../tokens/model-limits.ts';

/**
 * A model call that stores nothing (`store: false` responses): the strategies run on the
 * items the request sent (the deployment's list, PROMPT_STRATEGY or the default), the
 * instructions go first, and the model answers. There is no session to compact; `inbox`
 * appends the notices the caller consumed (none unless a chat completion names a session).
 */
export interface StatelessRequest {
  items: Item[];
  instructions: string | null;
  tools: Tool[];
  model: string;
  strategies?: string | string[];
  maxOutputTokens?: number;
  temperature?: number;
  promptCacheKey?: string;
  /** What the client asked of the model call besides the prompt (lib/models/model.ts ModelSettings). */
  settings?: ModelSettings;
  /** `auto`: drop the oldest items until the prompt fits the model's window (else context_too_large). */
  truncation?: 'auto' | 'disabled';
  /** Inbox notices consumed for this call (chat completions naming a session): the `inbox` strategy appends them. */
  notices?: { name: string; content: string }[];
}

export type StatelessEvent = ModelOutputEvent;

/** A stateless call's model, request and context, once its prompt is built. */
export interface PreparedStateless {
  model: ReturnType<TurnServices['model']>;
  modelRequest: ReturnType<typeof buildModelRequest>;
  context: TurnContext;
  /** The counter of the model's window: a call that fails on its own is estimated with it. */
  counter: TokenCounter;
  /** Off a stored conversation: the instructions and tools it ran with (the request's, else the conversation's). */
  ran?: { instructions: string | null; tools: readonly Tool[] };
}

/**
 * A stateless call up to its model request: what refuses it (more tools than its model takes,
 * a spent budget, a prompt over the window) throws here, so a streamed call can answer its
 * status before the stream starts.
 */
export async function prepareStateless(
  services: Pick<TurnServices, 'env' | 'model' | 'tokenEncoders' | 'config' | 'tokenSpend' | 'background'>,
  request: StatelessRequest,
): Promise<PreparedStateless> {
  // The model first (an unknown one is a 404 whatever the spend), then a budgeted token's spend.
  const { model, assembled, budget, notices, inputFromSeq } = assembleStateless(services, request);
  refuseOverToolLimit(model, request.tools, request.settings);
  await services.tokenSpend?.checkNow();
  const fit = fitPrompt({ prepared: assembled.prepared, hydrated: assembled.prompt }, request.tools, budget, {
    truncation: request.truncation ?? 'disabled',
    compacting: false,
    boundary: null,
    turn: 0,
    // An input of user messages alone (or one ending in an answer) keeps from its last user message.
    keepFromSeq: inputFromSeq > 1 && inputFromSeq <= request.items.length ? inputFromSeq : undefined,
  });
  const prompt = fit.built.hydrated;
  const tokens = () => fit.promptTokens ?? countPromptTokens(prompt, request.tools, budget.counter);
  const modelRequest = buildModelRequest(
    prompt,
    request.tools,
    undefined,
    request,
    outputRoom(budget.contextLimit, tokens),
  );
  const context: TurnContext = {
    ...promptContext(assembled.prepared, prompt),
    notices_delivered: notices.map((notice) => notice.name),
    ...fit.context,
  };
  return { model, modelRequest, context, counter: budget.counter };
}

/** The index of the model's last item (a call or an answer): the newest turn follows it (a tool loop's outputs). */
const lastSpoken = (items: readonly PromptItem[]) =>
  items.findLastIndex(
    (item) => item.type === 'function_call' || (item.type === 'message' && item.role === 'assistant'),
  );

/**
 * The prompt a stateless call's strategies build from its items and instructions, before it is
 * fitted to the model's window, with that window's budget (its counter counts the prompt).
 */
export function assembleStateless(
  services: Pick<TurnServices, 'env' | 'model' | 'tokenEncoders' | 'config'>,
  request: StatelessRequest,
) {
  const model = services.model(request.model);
  const strategies = resolveStrategyNames(request.strategies, services.env);
  // Numbered like a history, so the strategies can tell calls and outputs apart by position.
  const items = inlineAttachments(request.items, services.config);
  const history: PromptItem[] = items.map((item, index) => ({ ...item, seq: index + 1 }));
  // The newest turn (numbered from 1): the items after the last call or answer.
  const inputFromSeq = lastSpoken(history) + 2;
  const notices = request.notices ?? [];
  const config = resolveStrategyConfig({ env: services.env });
  const assembled = assemblePrompt({
    history,
    contextStart: null,
    strategies,
    strategyConfig: config,
    env: services.env,
    notices,
    instructions: request.instructions,
    inputFromSeq,
  });
  // As a stored turn: a model with a known window never gets a prompt that must fail.
  const budget = promptBudget(model, config, request, services.tokenEncoders);
  return { model, assembled, config, budget, notices, inputFromSeq };
}

/**
 * What stops a stateless call whose client went away: `signal` (the request's) aborting, or `stop`
 * (its stream's cancel, which a Worker sees without the request signal's flag). Nothing is stored
 * and nobody reads its answer: its model call is aborted, and its token charged what it spent.
 */
export function clientGone(signal: AbortSignal | undefined) {
  const controller = new AbortController();
  const stop = () => controller.abort();
  if (signal?.aborted) stop();
  else signal?.addEventListener('abort', stop, { once: true });
  return { signal: controller.signal, stop };
}

/** A stateless call's answer, or once its client went away (`gone`) and it failed, a 499 nobody reads. */
export function unlessGone<Answer>(call: Promise<Answer>, gone: AbortSignal | undefined): Promise<Answer | Response> {
  return call.catch((error: unknown) => {
    if (gone?.aborted) return new Response(null, { status: 499 });
    throw error;
  });
}

/**
 * The model call of a prepared stateless call, and the token's charge after it (before its answer);
 * `gone` aborts it (clientGone), charged as any call that failed after its provider got it.
 */
export async function callStateless(
  services: Pick<TurnServices, 'config' | 'tokenSpend' | 'log' | 'info' | 'background'>,
  prepared: PreparedStateless,
  emit?: (event: StatelessEvent) => void,
  gone?: AbortSignal,
): Promise<ModelResult & { context: TurnContext }> {
  // A client gone before the call: no provider gets it.
  gone?.throwIfAborted();
  const { model, context, counter } = prepared;
  const modelRequest = gone ? { ...prepared.modelRequest, signal: gone } : prepared.modelRequest;
  const spend = services.tokenSpend;
  const price = services.config.modelPrices[model.id];
  const meter = new CallMeter();
  meter.calling(() => countPromptTokens(modelRequest.prompt, modelRequest.tools, counter), counter);
  const seen =
    emit &&
    ((event: StatelessEvent) => {
      meter.saw(event);
      emit(event);
    });
  const result = await callModel(model, modelRequest, seen).catch(async (error: unknown) => {
    // Run by its provider (timed out in flight, broken off after it was accepted) or broken off
    // after output, as a turn's call (lib/turn/close-turn.ts): its provider bills what it worked
    // on, charged estimated, as no turn, before its error answer.
    const spent = meter.failed(price, providerMayHaveRun(error));
    // Stopped as its client went away: a routine line (a client's timeout, a stop button), no failure.
    if (gone?.aborted) services.info(`tailgate: a call of ${model.id} stopped: its client went away`);
    if (spent) await spend?.chargeNow(services, spent.usage, 0);
    throw error;
  });
  meter.answered(result.usage, result.output);
  const { usage, estimated } = meter.spent(price)!;
  await spend?.chargeNow(services, usage);
  // A backend that left its usage out: the answer shows the estimate its token is charged.
  return { ...result, ...(estimated ? { usage } : {}), context };
}

/** A stateless call, prepared and made. */
export async function runStateless(
  services: Pick<
    TurnServices,
    'env' | 'model' | 'tokenEncoders' | 'config' | 'tokenSpend' | 'background' | 'log' | 'info'
  >,
  request: StatelessRequest,
  emit?: (event: StatelessEvent) => void,
  gone?: AbortSignal,
): Promise<ModelResult & { context: TurnContext }> {
  return callStateless(services, await prepareStateless(services, request), emit, gone);
}
