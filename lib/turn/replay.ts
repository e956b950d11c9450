import { contentText } from '../content.ts';
import { ReplayedError } from '../errors.ts';
import type { ClaimAttempt } from '../session/log/claim.ts';
import { doneItem } from './model-call.ts';
import type { TurnEvent, TurnResponse } from './types.ts';

/**
 * The answer to a request its turn's claim found already taken (its Idempotency-Key's turn): the
 * stored response, emitted as a stream would have been (`replay: true`), or the original error.
 */
export function replay(
  begun: Extract<ClaimAttempt, { kind: 'replay' }>,
  emit?: (event: TurnEvent) => void,
): TurnResponse {
  if (begun.status !== 'completed' || begun.response === undefined) {
    throw new ReplayedError(begun.error ?? { code: 'model_error', message: `the original turn ${begun.status}` });
  }
  const response = begun.response as TurnResponse;
  if (emit) {
    emit({
      event: 'turn.started',
      data: { turn: response.turn, first_seq: begun.outputSeq ?? response.output[0]?.seq ?? 0 },
      replay: true,
    });
    for (const item of response.output) {
      for (const reasoning of item.reasoning ?? []) emit({ event: 'reasoning.done', data: { item: reasoning } });
      const text = item.type === 'message' ? contentText(item.content) : '';
      if (text !== '') emit({ event: 'output_text.delta', data: { delta: text } });
      emit({ event: 'output_item.done', data: { item: doneItem(item) } });
    }
  }
  return response;
}
