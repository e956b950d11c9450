import type { ResponseOutputItem, ResponseStreamEvent } from 'openai/resources/responses/responses';
import { contentText } from '../content.ts';
import type { ModelOutputItem } from '../models/model.ts';
import { functionCall, message, type TailgateResponse } from './responses.ts';

/** A stream event without its sequence number (the writer numbers them). */
type UnnumberedEvent = ResponseStreamEvent extends infer Event
  ? Event extends { sequence_number: number }
    ? Omit<Event, 'sequence_number'>
    : never
  : never;

/**
 * Turns a turn's events into the official Responses event sequence: response.created and
 * response.in_progress, then per output item output_item.added, content_part.added,
 * output_text.delta..., output_text.done, content_part.done, output_item.done (a message) or
 * output_item.added, function_call_arguments.delta, function_call_arguments.done,
 * output_item.done (a call), then response.completed or response.failed (after the done events,
 * status `incomplete`, of a message it cut short). Every event carries
 * `sequence_number`, from 0.
 */
export class ResponseEventWriter {
  #sequence = 0;
  #index = 0;
  #open: { id: string; text: string } | undefined;
  readonly #itemId: (index: number, item: Pick<ModelOutputItem, 'type'>) => string;
  readonly #send: (event: ResponseStreamEvent) => void;

  constructor(
    itemId: (index: number, item: Pick<ModelOutputItem, 'type'>) => string,
    send: (event: ResponseStreamEvent) => void,
  ) {
    this.#itemId = itemId;
    this.#send = send;
  }

  #emit(event: UnnumberedEvent): void {
    this.#send({ ...event, sequence_number: this.#sequence++ } as ResponseStreamEvent);
  }

  /** response.created (a background response's `queued`), then response.in_progress. */
  started(response: TailgateResponse): void {
    this.#emit({ type: 'response.created', response });
    this.#emit({ type: 'response.in_progress', response: { ...response, status: 'in_progress' } });
  }

  #openMessage(): { id: string; text: string } {
    if (this.#open) return this.#open;
    const id = this.#itemId(this.#index, { type: 'message' });
    this.#open = { id, text: '' };
    this.#emit({
      type: 'response.output_item.added',
      output_index: this.#index,
      item: { ...message('', id, 'in_progress'), content: [] },
    });
    this.#emit({
      type: 'response.content_part.added',
      output_index: this.#index,
      item_id: id,
      content_index: 0,
      part: { type: 'output_text', text: '', annotations: [], logprobs: [] },
    });
    return this.#open;
  }

  /**
   * A later run of the turn (a background turn delivered again): its items are the response's
   * from the first again, as response.completed has them; an earlier run's open message is dropped.
   */
  restart(): void {
    this.#index = 0;
    this.#open = undefined;
  }

  delta(delta: string): void {
    const open = this.#openMessage();
    open.text += delta;
    this.#emit({
      type: 'response.output_text.delta',
      output_index: this.#index,
      item_id: open.id,
      content_index: 0,
      delta,
      logprobs: [],
    });
  }

  /** output_text.done, content_part.done and output_item.done of the open message, as `text`. */
  #closeMessage(text: string, status: 'completed' | 'incomplete'): void {
    const open = this.#openMessage();
    const part = { type: 'output_text' as const, text, annotations: [], logprobs: [] };
    this.#emit({
      type: 'response.output_text.done',
      output_index: this.#index,
      item_id: open.id,
      content_index: 0,
      text,
      logprobs: [],
    });
    this.#emit({
      type: 'response.content_part.done',
      output_index: this.#index,
      item_id: open.id,
      content_index: 0,
      part,
    });
    this.#emit({
      type: 'response.output_item.done',
      output_index: this.#index,
      item: message(text, open.id, status),
    });
    this.#open = undefined;
  }

  itemDone(item: ModelOutputItem): void {
    if (item.type === 'message') {
      this.#closeMessage(contentText(item.content), 'completed');
    } else {
      const id = this.#itemId(this.#index, item);
      this.#emit({
        type: 'response.output_item.added',
        output_index: this.#index,
        item: functionCall({ ...item, arguments: '' }, id, 'in_progress'),
      });
      this.#emit({
        type: 'response.function_call_arguments.delta',
        output_index: this.#index,
        item_id: id,
        delta: item.arguments,
      });
      this.#emit({
        type: 'response.function_call_arguments.done',
        output_index: this.#index,
        item_id: id,
        arguments: item.arguments,
      });
      this.#emit({ type: 'response.output_item.done', output_index: this.#index, item: functionCall(item, id) });
    }
    this.#index += 1;
  }

  /** An output item that arrives whole (a compaction item): output_item.added, then output_item.done. */
  wholeItem(item: ResponseOutputItem): void {
    this.#emit({ type: 'response.output_item.added', output_index: this.#index, item });
    this.#emit({ type: 'response.output_item.done', output_index: this.#index, item });
    this.#index += 1;
  }

  /** response.completed, or response.incomplete for an answer that stopped short. */
  completed(response: TailgateResponse): void {
    if (response.status === 'incomplete') this.#emit({ type: 'response.incomplete', response });
    else this.#emit({ type: 'response.completed', response });
  }

  /**
   * response.failed. A message the failure cut short is closed first (its text so far, status
   * `incomplete`), so every item the stream added is done before the stream ends.
   */
  failed(response: TailgateResponse): void {
    if (this.#open) {
      this.#closeMessage(this.#open.text, 'incomplete');
      this.#index += 1;
    }
    this.#emit({ type: 'response.failed', response });
  }
}
