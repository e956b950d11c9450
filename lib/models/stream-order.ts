import type { FunctionCallItem, ReasoningItem } from '../items.ts';
import { appendTokens } from './logprobs.ts';
import type { ModelOutputItem, ModelStreamEvent, TokenLogprob } from './model.ts';

/** An output item of a streamed answer, from its first event to its end. */
type Entry =
  | { kind: 'message'; text: string; logprobs: TokenLogprob[]; closed: boolean; held: ModelStreamEvent[] }
  | { kind: 'call'; callId: string; raw: string; item?: ModelOutputItem; held: ModelStreamEvent[] }
  | { kind: 'reasoning'; item: ReasoningItem; held: ModelStreamEvent[] };

/**
 * Orders a streamed answer's events so that its items open and end one at a time, in the
 * order they started: the text between calls is a message of its own, a call streams its
 * argument pieces (`call_start`, then `arguments_delta`s) and ends with its `item_done`. The
 * events of an item that starts while an earlier one is still open (a second call whose pieces
 * interleave with the first's, text during a call) wait until that one ended. A consumer thus
 * has at most one open item, and the items' `item_done`s come in the order of the output.
 * A reasoning block that ended is a `reasoning_done` in its place, and goes on the next item to
 * end (its `reasoning`), so the items hold the blocks in the provider's order; reasoning with no
 * item after it goes on an assistant message of its own whose text is empty, which ends the output.
 * A generated answer's parts go through it too, in their order (lib/models/sdk-model.ts), so an
 * answer streamed or not gives the same output.
 * Each method returns the events to yield now.
 */
export class StreamOrder {
  readonly #entries: Entry[] = [];
  readonly #output: ModelOutputItem[] = [];
  readonly #logprobs: TokenLogprob[][] = [];
  #reasoning: ReasoningItem[] = [];

  #leftOut = false;

  /** Whether the last item the answer began is a call it never ended (left out of the output: `end`). */
  get endsInLeftOutCall(): boolean {
    return this.#leftOut;
  }

  /** The finished items, in order. */
  get output(): ModelOutputItem[] {
    return this.#output;
  }

  /** The log probabilities of each finished item's text tokens, by its index in `output` (a call's: none). */
  get logprobs(): TokenLogprob[][] {
    return this.#logprobs;
  }

  /** A piece of text, and the log probabilities of its tokens when the provider gave them. */
  text(delta: string, logprobs?: TokenLogprob[]): ModelStreamEvent[] {
    if (delta === '') return [];
    const last = this.#entries.at(-1);
    const entry =
      last?.kind === 'message' && !last.closed ? last : this.#open<Entry & { kind: 'message' }>(openMessage(''));
    entry.text += delta;
    if (logprobs) appendTokens(entry.logprobs, logprobs);
    return this.#route(entry, { type: 'text_delta', delta, ...(logprobs ? { logprobs } : {}) });
  }

  /**
   * Log probabilities a chunk gave without text: its tokens are the text's before them, so they go
   * on the message last begun (a `text_delta` of no text), undefined when the answer's last item
   * begun is not a message (the caller keeps them for the text to come).
   */
  tokens(logprobs: TokenLogprob[]): ModelStreamEvent[] | undefined {
    const last = this.#entries.at(-1);
    if (last?.kind !== 'message') return undefined;
    appendTokens(last.logprobs, logprobs);
    return this.#route(last, { type: 'text_delta', delta: '', logprobs });
  }

  callStart(callId: string, name: string): ModelStreamEvent[] {
    const entry = this.#open<Entry & { kind: 'call' }>({ kind: 'call', callId, raw: '', held: [] });
    return this.#route(entry, { type: 'call_start', call_id: callId, name });
  }

  argumentsDelta(callId: string, delta: string): ModelStreamEvent[] {
    const entry = this.#call(callId);
    if (!entry || delta === '') return [];
    entry.raw += delta;
    return this.#route(entry, { type: 'arguments_delta', call_id: callId, delta });
  }

  /**
   * A finished call. One streamed in pieces keeps the text they make up as its arguments when
   * that parses (the model's own text, which may differ from the SDK's JSON of it in spacing),
   * so their concatenation is its arguments.
   */
  call(item: FunctionCallItem): ModelStreamEvent[] {
    const started = this.#call(item.call_id);
    if (!started) {
      this.#open<Entry & { kind: 'call' }>({ kind: 'call', callId: item.call_id, raw: '', item, held: [] });
      return this.#drain();
    }
    if (started.raw !== '' && parses(started.raw)) {
      started.item = { ...item, arguments: started.raw };
      return this.#drain();
    }
    // Pieces that make up less than the call (none, for a call without arguments): the rest as one more.
    const { raw } = started;
    const rest = item.arguments.startsWith(raw)
      ? this.argumentsDelta(item.call_id, item.arguments.slice(raw.length))
      : [];
    started.item = item;
    return [...rest, ...this.#drain()];
  }

  /** A reasoning block that ended: its `reasoning_done` in its place; it goes on the next item to end. */
  reasoning(item: ReasoningItem): ModelStreamEvent[] {
    this.#open({ kind: 'reasoning', item, held: [] });
    return this.#drain();
  }

  /**
   * The end of the answer: its last message ends; a call that never finished is left out
   * (`endsInLeftOutCall` says whether it was the last item begun);
   * reasoning with no item after it ends the output as the `reasoning` of an empty assistant
   * message (which the provider is never sent alone: lib/models/convert-to-model-messages.ts).
   */
  end(): ModelStreamEvent[] {
    this.#closeMessage();
    const last = this.#entries.findLast((entry) => entry.kind !== 'reasoning');
    this.#leftOut = last?.kind === 'call' && !last.item;
    for (let index = this.#entries.length - 1; index >= 0; index--) {
      const entry = this.#entries[index]!;
      if (entry.kind === 'call' && !entry.item) this.#entries.splice(index, 1);
    }
    const events = this.#drain();
    if (this.#reasoning.length === 0) return events;
    this.#open({ ...openMessage(''), closed: true });
    return [...events, ...this.#drain()];
  }

  #call(callId: string) {
    return this.#entries.find(
      (entry): entry is Extract<Entry, { kind: 'call' }> =>
        entry.kind === 'call' && entry.callId === callId && !entry.item,
    );
  }

  #closeMessage(): void {
    const last = this.#entries.at(-1);
    if (last?.kind === 'message') last.closed = true;
  }

  #open<Opened extends Entry>(entry: Opened): Opened {
    this.#closeMessage();
    this.#entries.push(entry);
    return entry;
  }

  /** The event now when its item is the open one (after the end of a message it follows), else held. */
  #route(entry: Entry, event: ModelStreamEvent): ModelStreamEvent[] {
    const ended = this.#drain();
    if (this.#entries[0] === entry) return [...ended, event];
    entry.held.push(event);
    return ended;
  }

  /** The `item_done`s of the items that ended, and the held events of the next one, in order. */
  #drain(): ModelStreamEvent[] {
    const events: ModelStreamEvent[] = [];
    for (;;) {
      const head = this.#entries[0];
      if (!head) return events;
      events.push(...head.held.splice(0));
      if (head.kind === 'reasoning') {
        this.#entries.shift();
        this.#reasoning.push(head.item);
        events.push({ type: 'reasoning_done', item: head.item });
        continue;
      }
      let item = head.kind === 'call' ? head.item : head.closed ? message(head.text) : undefined;
      if (!item) return events;
      this.#entries.shift();
      if (this.#reasoning.length > 0) {
        item = { ...item, reasoning: this.#reasoning };
        this.#reasoning = [];
      }
      this.#output.push(item);
      this.#logprobs.push(head.kind === 'message' ? head.logprobs : []);
      events.push({ type: 'item_done', item });
    }
  }
}

function openMessage(text: string): Entry & { kind: 'message' } {
  return { kind: 'message', text, logprobs: [], closed: false, held: [] };
}

function message(text: string): ModelOutputItem {
  return { type: 'message', role: 'assistant', content: text };
}

function parses(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
