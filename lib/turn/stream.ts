import type { Model, ModelRequest, ModelResult } from '../models/model.ts';
import { ModelError } from '../errors.ts';
import type { TurnEvent } from './types.ts';

/** Streaming a turn: model events to turn events, and the queue between the pipeline and the response. */

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

/** An unbounded single-consumer queue: the producer never waits for the consumer. */
export class EventChannel<T> implements AsyncIterable<T> {
  #buffer: T[] = [];
  #closed = false;
  #wake: (() => void) | undefined;

  push(value: T): void {
    if (this.#closed) return;
    this.#buffer.push(value);
    this.#wake?.();
  }

  close(): void {
    this.#closed = true;
    this.#wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      const next = this.#buffer.shift();
      if (next !== undefined) {
        yield next;
        continue;
      }
      if (this.#closed) return;
      await new Promise<void>((resolve) => (this.#wake = resolve));
      this.#wake = undefined;
    }
  }
}
