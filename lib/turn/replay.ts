import { contentText } from '../content.ts';
import { ReplayedError } from '../errors.ts';
import type { ClaimAttempt } from '../session/log/claim.ts';
import { receiptSchema } from '../session/log/receipt-schema.ts';
import { doneItem } from './model-call.ts';
import type { TurnEvent, TurnRequest, TurnResponse, TurnServices } from './types.ts';

/**
 * The answer to a request its turn's claim found already taken (its Idempotency-Key's turn): the
 * stored response, emitted as a stream would have been (`replay: true`), or the original error. A
 * failure stored without its error is a `model_error` naming the model it ran with, as its receipt
 * names it; a receipt naming none (an older turn's), the model the request runs with (one more
 * read, of the session, when the request names none).
 */
export async function replay(
  services: TurnServices,
  sessionId: string,
  request: Pick<TurnRequest, 'model'>,
  begun: Extract<ClaimAttempt, { kind: 'replay' }>,
  emit?: (event: TurnEvent) => void,
): Promise<TurnResponse> {
  if (begun.status !== 'completed' || begun.response === undefined) {
    if (begun.error) throw new ReplayedError(begun.error);
    const model =
      receiptSchema.parse(begun.receipt).model ??
      request.model ??
      (await services.sessions.get(sessionId)).model ??
      services.config.defaultModel;
    throw new ReplayedError({ code: 'model_error', message: `the original turn ${begun.status}`, details: { model } });
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
