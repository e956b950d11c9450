import type { ResponseOutputItem, ResponseStreamEvent } from 'openai/resources/responses/responses';
import { contentText } from '../content.ts';
import type { ReasoningItem } from '../items.ts';
import { appendTokens } from '../models/logprobs.ts';
import type { ModelOutputItem, TokenLogprob } from '../models/model.ts';
import { eventLogprobs, outputTextLogprobs } from './logprobs.ts';
import type { ModelOutputEvent } from '../turn/model-call.ts';
import type { TurnEvent } from '../turn/types.ts';
import type { ItemKind } from './ids.ts';
import { reasoningOutput } from './output-items.ts';
import { functionCall, message, type TailgateResponse } from './responses.ts';

/** The message whose text is streaming: its item id, text and its tokens' log probabilities so far. */
type OpenText = { id: string; text: string; logprobs: TokenLogprob[] };

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
 * output_item.added, function_call_arguments.delta (one per piece the model streamed, or one
 * with the whole arguments), function_call_arguments.done, output_item.done (a call): the done
 * events of each once what follows it begins, so the item a response that stopped short stopped
 * in is done `incomplete`, as the response has it; or
 * output_item.added, then per summary part reasoning_summary_part.added,
 * reasoning_summary_text.delta (the whole text), reasoning_summary_text.done,
 * reasoning_summary_part.done, then output_item.done (a block of the model's reasoning), then
 * response.completed or response.failed (after the done events, status `incomplete`, of a
 * message or call it cut short). Every event carries `sequence_number`, from 0.
 */
export class ResponseEventWriter {
  #sequence = 0;
  /** The output index of the next item. */
  #index = 0;
  /** The place of the next model item among the turn's (what its id is made from): reasoning takes none. */
  #item = 0;
  /** The reasoning items before the next model item. */
  #reasoning = 0;
  #open: OpenText | undefined;
  /**
   * The message or call the model ended, whose done events wait for what comes next: the last
   * item of a response that stopped short may be the one it stopped in, done `incomplete`.
   */
  #ended: OpenText | { id: string; call: ModelOutputItem & { type: 'function_call' } } | undefined;
  /** The call whose arguments are streaming: its call_id, item id, name and arguments so far. */
  #call: { callId: string; id: string; name: string; arguments: string } | undefined;
  readonly #itemId: (index: number, item: { type: ItemKind }) => string;
  readonly #send: (event: ResponseStreamEvent) => void;
  /** Whether a reasoning item carries its `encrypted_content` (lib/openai/output-items.ts, reasoningOutput). */
  readonly #encrypted: boolean;

  constructor(
    itemId: (index: number, item: { type: ItemKind }) => string,
    send: (event: ResponseStreamEvent) => void,
    encrypted = false,
  ) {
    this.#itemId = itemId;
    this.#send = send;
    this.#encrypted = encrypted;
  }

  #emit(event: UnnumberedEvent): void {
    this.#send({ ...event, sequence_number: this.#sequence++ } as ResponseStreamEvent);
  }

  /** response.created (a background response's `queued`), then response.in_progress. */
  started(response: TailgateResponse): void {
    this.#emit({ type: 'response.created', response });
    this.#emit({ type: 'response.in_progress', response: { ...response, status: 'in_progress' } });
  }

  #openMessage(): OpenText {
    if (this.#open) return this.#open;
    this.#closeEnded();
    this.#closeCall();
    const id = this.#itemId(this.#item, { type: 'message' });
    this.#open = { id, text: '', logprobs: [] };
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

  /** The sequence number of the next event. */
  get sequence(): number {
    return this.#sequence;
  }

  /**
   * A later run of the turn (a background turn delivered again): the earlier run's message or
   * call that was not done yet is done first, status `incomplete` (the run was cut), so a reader
   * that followed that run has every item it added done; then the later run's items are the
   * response's from the first again, as response.completed has them.
   */
  restart(): void {
    this.#closeCut('incomplete');
    this.#index = 0;
    this.#item = 0;
    this.#reasoning = 0;
    this.#open = undefined;
    this.#ended = undefined;
    this.#call = undefined;
  }

  /** output_item.added of a function call whose arguments stream (`argumentsDelta`, then its `itemDone`). */
  callStarted(callId: string, name: string): void {
    this.#closeEnded();
    this.#closeCall();
    const id = this.#itemId(this.#item, { type: 'function_call' });
    this.#call = { callId, id, name, arguments: '' };
    this.#emit({
      type: 'response.output_item.added',
      output_index: this.#index,
      item: functionCall({ call_id: callId, name, arguments: '' }, id, 'in_progress'),
    });
  }

  /** function_call_arguments.delta of the streaming call `callId`. */
  argumentsDelta(callId: string, delta: string): void {
    const call = this.#call;
    if (call?.callId !== callId) return;
    call.arguments += delta;
    this.#emit({ type: 'response.function_call_arguments.delta', output_index: this.#index, item_id: call.id, delta });
  }

  /** A piece of the open message's text, and the provider's log probabilities of its tokens. */
  delta(delta: string, logprobs?: readonly TokenLogprob[]): void {
    const open = this.#openMessage();
    open.text += delta;
    if (logprobs) appendTokens(open.logprobs, logprobs);
    this.#emit({
      type: 'response.output_text.delta',
      output_index: this.#index,
      item_id: open.id,
      content_index: 0,
      delta,
      logprobs: eventLogprobs(logprobs),
    });
  }

  /** output_text.done, content_part.done and output_item.done of message `open`, as `text`. */
  #closeMessage(open: OpenText, text: string, status: 'completed' | 'incomplete'): void {
    const logprobs = outputTextLogprobs(open.logprobs);
    const part = { type: 'output_text' as const, text, annotations: [], logprobs };
    this.#emit({
      type: 'response.output_text.done',
      output_index: this.#index,
      item_id: open.id,
      content_index: 0,
      text,
      logprobs: eventLogprobs(open.logprobs),
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
      item: message(text, open.id, status, open.logprobs),
    });
  }

  /** The done events of the item the model ended (`status`: as the response has it), then the next index. */
  #closeEnded(status: 'completed' | 'incomplete' = 'completed'): void {
    const ended = this.#ended;
    if (!ended) return;
    this.#ended = undefined;
    if ('text' in ended) this.#closeMessage(ended, ended.text, status);
    else {
      const { id, call } = ended;
      this.#emit({
        type: 'response.function_call_arguments.done',
        output_index: this.#index,
        item_id: id,
        arguments: call.arguments,
      });
      this.#emit({
        type: 'response.output_item.done',
        output_index: this.#index,
        item: functionCall(call, id, status),
      });
    }
    this.#next();
  }

  /**
   * A turn's output event (output_text.delta, function_call.started,
   * function_call_arguments.delta, reasoning.done, output_item.done) as its events; false for any other.
   */
  turnOutput(event: TurnEvent): boolean {
    if (event.event === 'output_text.delta') this.delta(event.data.delta, event.data.logprobs);
    else if (event.event === 'function_call.started') this.callStarted(event.data.call_id, event.data.name);
    else if (event.event === 'function_call_arguments.delta') this.argumentsDelta(event.data.call_id, event.data.delta);
    else if (event.event === 'output_item.done') this.itemDone(event.data.item);
    else if (event.event === 'reasoning.done') this.reasoningDone(event.data.item);
    else return false;
    return true;
  }

  /** A model's streamed output event (the routes without a session turn). */
  modelEvent(event: ModelOutputEvent): void {
    if (event.type === 'text_delta') this.delta(event.delta, event.logprobs);
    else if (event.type === 'call_start') this.callStarted(event.call_id, event.name);
    else if (event.type === 'arguments_delta') this.argumentsDelta(event.call_id, event.delta);
    else if (event.type === 'reasoning_done') this.reasoningDone(event.item);
    else if (event.type === 'item_done') this.itemDone(event.item);
  }

  /** A block of the model's reasoning, whole: a reasoning item before the model item it comes with. */
  reasoningDone(item: ReasoningItem): void {
    this.#closeEnded();
    this.#closeCall();
    const id = `${this.#itemId(this.#item, { type: 'reasoning' })}_${++this.#reasoning}`;
    const output_index = this.#index;
    this.#emit({
      type: 'response.output_item.added',
      output_index,
      item: { type: 'reasoning', id, summary: [], status: 'in_progress' },
    });
    item.summary.forEach(({ text }, summary_index) => {
      const at = { item_id: id, output_index, summary_index };
      this.#emit({ type: 'response.reasoning_summary_part.added', ...at, part: { type: 'summary_text', text: '' } });
      this.#emit({ type: 'response.reasoning_summary_text.delta', ...at, delta: text });
      this.#emit({ type: 'response.reasoning_summary_text.done', ...at, text });
      this.#emit({ type: 'response.reasoning_summary_part.done', ...at, part: { type: 'summary_text', text } });
    });
    this.#emit({ type: 'response.output_item.done', output_index, item: reasoningOutput(item, id, this.#encrypted) });
    this.#index += 1;
  }

  itemDone(item: ModelOutputItem): void {
    this.#closeEnded();
    if (item.type === 'message') {
      // Its done events wait for what comes next (#ended): the output index moves on then.
      const open = this.#openMessage();
      this.#ended = { ...open, text: contentText(item.content) };
      this.#open = undefined;
      return;
    }
    // A call whose arguments did not stream comes whole: its added event and one delta first.
    if (this.#call?.callId !== item.call_id) {
      this.callStarted(item.call_id, item.name);
      this.argumentsDelta(item.call_id, item.arguments);
    }
    // Its done events wait for what comes next too (#ended).
    this.#ended = { id: this.#call!.id, call: item };
    this.#call = undefined;
  }

  /** The next output index and model item. */
  #next(): void {
    this.#index += 1;
    this.#item += 1;
    this.#reasoning = 0;
  }

  /** An output item that arrives whole (a compaction item): output_item.added, then output_item.done. */
  #wholeItem(item: ResponseOutputItem): void {
    this.#emit({ type: 'response.output_item.added', output_index: this.#index, item });
    this.#emit({ type: 'response.output_item.done', output_index: this.#index, item });
    this.#next();
  }

  /** output_item.done (status `incomplete`, its arguments so far) of a call that began and never ended. */
  #closeCall(): void {
    if (!this.#call) return;
    const { callId, id, name } = this.#call;
    const item = functionCall({ call_id: callId, name, arguments: this.#call.arguments }, id, 'incomplete');
    this.#emit({ type: 'response.output_item.done', output_index: this.#index, item });
    this.#call = undefined;
    this.#next();
  }

  /**
   * response.completed, or response.incomplete for an answer that stopped short, after the done
   * events of the last message or call (status as `response` has it: the item the answer stopped
   * in is `incomplete`), of a call that began and never ended (left out of the output, closed
   * `incomplete` as `failed` closes it), and the compaction items that end the output, each whole.
   */
  completed(response: TailgateResponse): void {
    const ended = this.#ended && response.output.find((item) => item.id === this.#ended!.id);
    this.#closeEnded(ended && 'status' in ended && ended.status === 'incomplete' ? 'incomplete' : 'completed');
    this.#closeCall();
    for (const item of response.output) if (item.type === 'compaction') this.#wholeItem(item);
    if (response.status === 'incomplete') this.#emit({ type: 'response.incomplete', response });
    else this.#emit({ type: 'response.completed', response });
  }

  /**
   * response.failed. A message the failure cut short is closed first (its text so far, status
   * `incomplete`), as is a call whose arguments were streaming (output_item.done, its arguments
   * so far, status `incomplete`), so every item the stream added is done before the stream ends.
   */
  failed(response: TailgateResponse): void {
    this.#closeCut('completed');
    this.#emit({ type: 'response.failed', response });
  }

  /**
   * The done events of every item not done yet: the one the model ended (status `ended`), a
   * message cut short (its text so far) and a call whose arguments were streaming (its arguments
   * so far), both `incomplete`.
   */
  #closeCut(ended: 'completed' | 'incomplete'): void {
    this.#closeEnded(ended);
    if (this.#open) {
      this.#closeMessage(this.#open, this.#open.text, 'incomplete');
      this.#open = undefined;
      this.#next();
    }
    this.#closeCall();
  }
}
