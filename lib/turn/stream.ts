import type { Model, ModelRequest, ModelResult } from '../models/model.ts';
import { ModelError } from '../models/errors.ts';
import type { TurnEvent } from './types.ts';

/** Model events to turn events, and the model call a turn starts before its claim has landed. */

export async function streamModel(
  model: Model,
  request: ModelRequest,
  firstSeq: number,
  emit: (event: TurnEvent) => void,
): Promise<ModelResult> {
  let index = 0;
  for await (const event of model.stream(request)) {
    if (event.type === 'text_delta') emit({ event: 'output_text.delta', data: { delta: event.delta } });
    else if (event.type === 'item_done')
      emit({ event: 'output_item.done', data: { item: { ...event.item, seq: firstSeq + index++ } } });
    else return event.result;
  }
  throw new ModelError('the model stream ended without a result');
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
  /** Aborts the call from outside (a background turn closed by someone else). */
  stop?: AbortSignal,
): Promise<ModelResult | null> {
  const controller = new AbortController();
  if (stop?.aborted) controller.abort();
  stop?.addEventListener('abort', () => controller.abort(), { once: true });
  const held: TurnEvent[] = [];
  let open = false;
  const forward = (event: TurnEvent) => (open ? emit!(event) : held.push(event));
  const call = emit
    ? streamModel(model, { ...request, signal: controller.signal }, started.data.first_seq, forward)
    : model.generate({ ...request, signal: controller.signal });
  // Settled either way: an aborted call's failure is nobody's.
  call.catch(() => undefined);
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
