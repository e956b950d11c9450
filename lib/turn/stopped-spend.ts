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

  /**
   * A model call is made with a prompt of `promptTokens()` tokens (counted only if the turn is
   * stopped), its output counted with `counter`. What an earlier call of the attempt streamed
   * (one aborted because a notice it showed did not move) is no longer told apart.
   */
  calling(promptTokens: () => number, counter: TokenCounter): void {
    this.#prompt = promptTokens;
    this.#counter = counter;
    this.#streamed = 0;
    this.#reported = undefined;
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
   * (its answer then refused); else, when it timed out or streamed output before it failed (the
   * provider worked on it, and bills that), the estimate `spent` makes; else null (a provider
   * that refused the request outright bills nothing).
   */
  failed(price: ModelPrice | undefined, timedOut: boolean): StoppedSpend | null {
    if (!this.#reported && !timedOut && this.#streamed === 0) return null;
    return this.spent(price);
  }

  /** What the call spent at `price`: null when no call was made. */
  spent(price: ModelPrice | undefined): StoppedSpend | null {
    if (this.#reported) return { usage: turnUsage(this.#reported, price), estimated: false };
    if (!this.#prompt) return null;
    const usage = { input_tokens: this.#prompt(), output_tokens: this.#streamed };
    return { usage: turnUsage(usage, price), estimated: true };
  }
}
