import type { ModelPrice } from '../ledger/prices.ts';
import { turnUsage, type TurnUsage } from '../ledger/usage.ts';
import type { ModelStreamEvent, ModelUsage } from '../models/model.ts';
import type { TokenCounter } from '../tokens/token-counter.ts';

/**
 * What a turn's model call spent, for a turn stopped before its own completion landed (closed
 * by someone else: a cancel, an `interrupt`, a delete of its session, a lapsed lease; or run by
 * another runner that took its lease over). The provider bills such a call all the same (the
 * input, and the output generated until the abort), but the completion that closed the turn is
 * the closer's, which knows nothing of it: the stopped turn charges it itself
 * (lib/turn/close-turn.ts).
 */
export interface StoppedSpend {
  usage: TurnUsage;
  /** No usage was reported by the provider: the prompt's tokens as counted, and the output streamed. */
  estimated: boolean;
}

/** Meters the model calls of one turn attempt as they run. */
export class CallMeter {
  #prompt: (() => number) | undefined;
  #streamed = 0;
  #reported: ModelUsage | undefined;
  #counter: TokenCounter | undefined;
  /** What the calls of the attempt aborted before this one spent, estimated. */
  #aborted: ModelUsage | undefined;

  /**
   * A model call is made with a prompt of `promptTokens()` tokens (counted only if the turn is
   * stopped), its output counted with `counter`. The call before it, if any, was aborted (a notice
   * it showed did not move): the provider bills it all the same, so what it spent is kept,
   * estimated as a stopped call's, and counts in whatever the attempt is charged.
   */
  calling(promptTokens: () => number, counter: TokenCounter): void {
    this.#aborted = this.#withCall();
    this.#prompt = promptTokens;
    this.#counter = counter;
    this.#streamed = 0;
    this.#reported = undefined;
  }

  /**
   * The meter of the turn's next attempt, after this one's claim was lost: the call it aborted
   * (started before the claim landed) counts in it as an aborted call, estimated.
   */
  next(): CallMeter {
    const next = new CallMeter();
    next.#aborted = this.#withCall();
    return next;
  }

  /** What the aborted calls spent with the call made now, if any, as aborted too. */
  #withCall(): ModelUsage | undefined {
    if (!this.#prompt) return this.#aborted;
    return added(this.#aborted, { input_tokens: this.#prompt(), output_tokens: this.#streamed });
  }

  /** An output event of the call, streamed to a client or not yet. */
  saw(event: ModelStreamEvent): void {
    if (!this.#counter) return;
    if (event.type === 'text_delta' || event.type === 'arguments_delta')
      this.#streamed += this.#counter.count(event.delta);
  }

  /** The call answered: the provider's usage, exact. */
  answered(usage: ModelUsage): void {
    this.#reported = usage;
  }

  /** What the call spent at `price` once it answered (the provider's usage): null when it did not. */
  reported(price: ModelPrice | undefined): TurnUsage | null {
    return this.#reported ? turnUsage(this.#reported, price) : null;
  }

  /**
   * What a call that failed on its own spent at `price`: the provider's usage when it answered
   * (its answer then refused); else, when the provider may have run the model (`mayHaveRun`:
   * lib/models/provider-reach.ts) or the call streamed output before it failed (the provider
   * worked on it, and bills that), the estimate `spent` makes; else null (a request the provider
   * refused with an error status, or that never reached it, bills nothing).
   */
  failed(price: ModelPrice | undefined, mayHaveRun: boolean): StoppedSpend | null {
    if (!this.#reported && !mayHaveRun && this.#streamed === 0)
      return this.#aborted ? { usage: turnUsage(this.#aborted, price), estimated: true } : null;
    return this.spent(price);
  }

  /**
   * What the call spent at `price`, with what the calls aborted before it spent: null when no call
   * was made. Estimated when the provider reported none for any of them.
   */
  spent(price: ModelPrice | undefined): StoppedSpend | null {
    const aborted = this.#aborted;
    const estimated = !this.#reported || aborted !== undefined;
    if (this.#reported) return { usage: turnUsage(added(aborted, this.#reported), price), estimated };
    if (!this.#prompt) return null;
    const usage = { input_tokens: this.#prompt(), output_tokens: this.#streamed };
    return { usage: turnUsage(added(aborted, usage), price), estimated };
  }
}

/** `usage` with `earlier`'s input and output tokens added. */
function added(earlier: ModelUsage | undefined, usage: ModelUsage): ModelUsage {
  if (!earlier) return usage;
  return {
    ...usage,
    input_tokens: usage.input_tokens + earlier.input_tokens,
    output_tokens: usage.output_tokens + earlier.output_tokens,
  };
}
