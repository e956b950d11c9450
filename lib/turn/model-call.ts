import type { Tool, PromptItem } from '../items.ts';
import type { Model, ModelRequest, ModelResult, ModelSettings, ModelStreamEvent } from '../models/model.ts';
import { ModelError } from '../models/errors.ts';
import { type MediaSupport, mediaSupport } from '../models/media-parts.ts';
import type { StrategyConfig } from '../strategies/index.ts';
import { resolveTokenBudget, type TokenBudget } from '../tokens/model-limits.ts';
import type { TokenEncoders } from '../tokens/token-counter.ts';
import type { CallMeter } from './stopped-spend.ts';
import type { TurnEvent, TurnRequest } from './types.ts';

/**
 * The model call, the one way turns and stateless calls (lib/openai/stateless.ts) make it: the
 * request built from the prompt, the call streamed or not, and for a turn its events and the
 * call started before the claim landed.
 */

/** What a caller asks of a model call besides the prompt and the tools. */
export interface ModelCallOptions {
  maxOutputTokens?: number | undefined;
  temperature?: number | undefined;
  promptCacheKey?: string | undefined;
  settings?: ModelSettings | undefined;
}

/** A model call's request; `outputRoom`: what the window leaves the answer (lib/tokens/model-limits.ts). */
export function buildModelRequest(
  prompt: PromptItem[],
  tools: Tool[],
  cacheBreakpoint: number | undefined,
  options: ModelCallOptions,
  outputRoom?: number,
): ModelRequest {
  return {
    prompt,
    tools,
    ...(cacheBreakpoint !== undefined ? { cacheBreakpoint } : {}),
    ...(options.maxOutputTokens !== undefined ? { maxOutputTokens: options.maxOutputTokens } : {}),
    ...(outputRoom !== undefined ? { outputRoom } : {}),
    ...(options.temperature !== undefined ? { temperature: options.temperature } : {}),
    ...(options.promptCacheKey !== undefined ? { promptCacheKey: options.promptCacheKey } : {}),
    ...(options.settings !== undefined ? { settings: options.settings } : {}),
  };
}

/**
 * The window a prompt for `model` must fit, the response's reserve left out; its counter
 * counts an image or file the model gets as a text placeholder as that text (`mediaSupport`).
 */
export function promptBudget(
  model: Pick<Model, 'id'> & MediaSupport,
  config: StrategyConfig,
  options: ModelCallOptions,
  encoders: TokenEncoders | undefined,
): TokenBudget {
  return resolveTokenBudget(model.id, config, {
    ...(options.maxOutputTokens !== undefined ? { maxOutputTokens: options.maxOutputTokens } : {}),
    ...(encoders ? { encoders } : {}),
    media: mediaSupport(model),
  });
}

/** A turn request's options of its model call. */
export function turnCallOptions(request: TurnRequest): ModelCallOptions {
  return {
    maxOutputTokens: request.max_output_tokens,
    temperature: request.temperature,
    promptCacheKey: request.prompt_cache_key,
    settings: request.model_settings,
  };
}

/** A streamed event of the model's output (its deltas and finished items). */
export type ModelOutputEvent = Exclude<ModelStreamEvent, { type: 'done' }>;

/** Calls the model: streamed when `emit` takes its output events, else generated at once. */
export async function callModel(
  model: Model,
  request: ModelRequest,
  emit?: (event: ModelOutputEvent) => void,
): Promise<ModelResult> {
  if (!emit) return model.generate(request);
  for await (const event of model.stream(request)) {
    if (event.type === 'done') return event.result;
    emit(event);
  }
  throw new ModelError('the model stream ended without a result', { model: model.id });
}

/** A streamed model call as turn events: each output item numbered from `firstSeq`. */
function streamModel(
  model: Model,
  request: ModelRequest,
  firstSeq: number,
  emit: (event: TurnEvent) => void,
  meter: CallMeter | undefined,
): Promise<ModelResult> {
  let index = 0;
  return callModel(model, request, (event) => {
    meter?.saw(event);
    if (event.type === 'text_delta') {
      const logprobs = event.logprobs ? { logprobs: event.logprobs } : {};
      emit({ event: 'output_text.delta', data: { delta: event.delta, ...logprobs } });
    } else if (event.type === 'call_start')
      emit({ event: 'function_call.started', data: { call_id: event.call_id, name: event.name } });
    else if (event.type === 'arguments_delta')
      emit({ event: 'function_call_arguments.delta', data: { call_id: event.call_id, delta: event.delta } });
    else if (event.type === 'reasoning_done') emit({ event: 'reasoning.done', data: { item: event.item } });
    else if (event.type === 'item_done')
      emit({ event: 'output_item.done', data: { item: doneItem({ ...event.item, seq: firstSeq + index++ }) } });
  });
}

/**
 * An output item as its `output_item.done` event carries it, live or replayed: without
 * `incomplete`, which the turn's response (`turn.completed`) has on the item its answer stopped
 * in, as a live stream only knows it once the answer ended, after that item was done.
 */
export function doneItem<Item extends { incomplete?: true | undefined }>(item: Item): Item {
  const { incomplete: _cut, ...done } = item;
  return done as Item;
}

/** What a turn's writes before its output say about a model call started ahead of them. */
export type GateOutcome = 'pass' | 'changed';

/**
 * Calls the model while `gate` (the turn's claim, then its notice moves) settles, so the call
 * does not wait for those writes. Until the gate passes nothing of the call is emitted:
 * `turn.started` goes first, then what the model streamed meanwhile. When the gate says the
 * prompt no longer holds ('changed': a notice it shows was not moved) or fails (the claim was
 * lost), the call is aborted and its output dropped: null, or the gate's error.
 */
export async function gatedModelCall(
  model: Model,
  request: ModelRequest,
  gate: Promise<GateOutcome>,
  started: TurnEvent & { event: 'turn.started' },
  emit: ((event: TurnEvent) => void) | undefined,
  /** Aborts the call from outside (a turn its lease renewal found closed by someone else). */
  stop?: AbortSignal,
  /** Counts what the call streamed, for a turn stopped before it answered. */
  meter?: CallMeter,
): Promise<ModelResult | null> {
  const controller = new AbortController();
  if (stop?.aborted) controller.abort();
  stop?.addEventListener('abort', () => controller.abort(), { once: true });
  const held: TurnEvent[] = [];
  let open = false;
  const forward = (event: TurnEvent) => (open ? emit!(event) : held.push(event));
  const call = emit
    ? streamModel(model, { ...request, signal: controller.signal }, started.data.first_seq, forward, meter)
    : callModel(model, { ...request, signal: controller.signal });
  // Settled either way: an aborted call's failure is nobody's but its meter's, which charges
  // nothing for a call its provider never got.
  if (meter) meter.track(call);
  else call.catch(() => undefined);
  let outcome: GateOutcome;
  try {
    outcome = await gate;
  } catch (error) {
    controller.abort();
    throw error;
  }
  if (outcome === 'changed') {
    controller.abort();
    return null;
  }
  if (emit) {
    emit(started);
    for (const event of held) emit(event);
    open = true;
  }
  return call;
}
