import type { ModelPrice } from '../ledger/prices.ts';
import { turnUsage, usageReported, type TurnUsage } from '../ledger/usage.ts';
import type { ModelOutputItem, ModelStreamEvent, ModelUsage } from '../models/model.ts';
import { contentText } from '../content.ts';
import type { TokenCounter } from '../tokens/token-counter.ts';
import { providerUnreached } from '../models/provider-reach.ts';

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

/** One model call of a turn attempt, as metered. */
interface MeteredCall {
  promptTokens: () => number;
  counter: TokenCounter;
  /** The output tokens it streamed. */
  streamed: number;
  /** It failed, and its model told that its provider never got it (lib/models/provider-reach.ts). */
  unreached: boolean;
  /** It answered (also when it was aborted after that: its answer dropped): the provider's usage. */
  reported?: ModelUsage;
  /** Its provider reported its input before the output (Anthropic's message_start): that input's usage. */
  input?: ModelUsage;
  /** It answered without usage: the provider ran it, estimated as a stopped call is. */
  unreported?: true;
}

/** Meters the model calls of one turn attempt as they run. */
export class CallMeter {
  #call: MeteredCall | undefined;
  #reported: ModelUsage | undefined;
  #settled: Promise<void> = Promise.resolve();
  /** The calls of the attempt (and of attempts before it) aborted before this one. */
  #earlier: MeteredCall[] = [];

  /**
   * A model call is made with a prompt of `promptTokens()` tokens (counted only if the turn is
   * stopped), its output counted with `counter`. The call before it, if any, was aborted (a notice
   * it showed did not move): the provider bills it all the same, unless it never got it, so what
   * it spent is kept, estimated as a stopped call's, and counts in whatever the attempt is charged.
   */
  calling(promptTokens: () => number, counter: TokenCounter): void {
    if (this.#call) this.#earlier.push(this.#call);
    this.#call = { promptTokens, counter, streamed: 0, unreached: false };
    this.#reported = undefined;
  }

  /**
   * The meter of the turn's next attempt, after this one's claim was lost: the call it aborted
   * (started before the claim landed) counts in it as an aborted call, estimated.
   */
  next(): CallMeter {
    const next = new CallMeter();
    next.#earlier = this.#call ? [...this.#earlier, this.#call] : [...this.#earlier];
    return next;
  }

  /**
   * Takes the failure of the call made now, once it comes (also after a later call started, for
   * an aborted one): a call its model says its provider never got (a refusal, a connection never
   * made: lib/models/provider-reach.ts) and that streamed nothing counts nothing.
   */
  failing(): (error: unknown) => void {
    const call = this.#call;
    return (error) => {
      if (call && providerUnreached(error)) call.unreached = true;
    };
  }

  /**
   * Takes the call made now (`call`), started: its failure as `failing` takes it, its answer as
   * `answered` does (also one the turn then drops: its claim's put failed meanwhile, or was lost to
   * another writer, or a notice it showed did not move, and the provider billed what it reported),
   * kept with the call (an aborted one counts it, not its estimate); and its settling, which
   * `settled` waits for.
   */
  track(call: Promise<{ usage: ModelUsage; output?: readonly ModelOutputItem[] } | null>): void {
    const tracked = this.#call;
    this.#settled = call.then((result) => {
      if (!result || !tracked) return;
      // No usage reported: its output counts as streamed output, for an answer then dropped too.
      if (!usageReported(result.usage)) return countOutput(tracked, result.output ?? []);
      tracked.reported ??= result.usage;
      if (tracked === this.#call) this.#reported ??= result.usage;
    }, this.failing());
  }

  /** Resolves once the call made now settled (answered or failed, its failure taken): `spent` then knows it. */
  settled(): Promise<void> {
    return this.#settled;
  }

  /**
   * What the aborted calls spent: the provider's usage of one that answered before its abort, else
   * estimated (none counts the calls their provider never got); `estimated` when any was.
   */
  #aborted(): { usage: ModelUsage; estimated: boolean } | undefined {
    let aborted: { usage: ModelUsage; estimated: boolean } | undefined;
    for (const call of this.#earlier) {
      if (skipped(call)) continue;
      const usage = added(aborted?.usage, estimate(call));
      aborted = { usage, estimated: (aborted?.estimated ?? false) || !call.reported };
    }
    return aborted;
  }

  /** An output event of the call, streamed to a client or not yet, or the input usage its provider reported. */
  saw(event: ModelStreamEvent): void {
    const call = this.#call;
    if (!call) return;
    if (event.type === 'text_delta' || event.type === 'arguments_delta')
      call.streamed += call.counter.count(event.delta);
    else if (event.type === 'input_reported') call.input = event.usage;
  }

  /**
   * The call answered: the provider's usage, exact. A backend that left its usage out (no input
   * count: `usageReported`) still ran the model: estimated as a stopped call is, its output counted in `output`.
   */
  answered(usage: ModelUsage, output: readonly ModelOutputItem[] = []): void {
    const call = this.#call;
    if (usageReported(usage) || !call) this.#reported = usage;
    else countOutput(call, output);
  }

  /** What the call spent at `price` once it answered (the provider's usage): null when it did not. */
  reported(price: ModelPrice | undefined): TurnUsage | null {
    return this.#reported ? turnUsage(this.#reported, price) : null;
  }

  /**
   * What a call that failed on its own spent at `price`: the provider's usage when it answered
   * (its answer then refused); else, when the provider may have run the model (`mayHaveRun`:
   * lib/models/provider-reach.ts) or the call streamed output before it failed, or answered without
   * usage (the provider worked on it, and bills that), the estimate `spent` makes; else only what
   * the calls aborted before it spent (a request the provider refused with an error status, or that
   * never reached it, bills nothing).
   */
  failed(price: ModelPrice | undefined, mayHaveRun: boolean): StoppedSpend | null {
    const call = this.#call;
    const worked = mayHaveRun || (call?.streamed ?? 0) > 0 || call?.input !== undefined || call?.unreported;
    if (!this.#reported && !worked) return this.#abortedOnly(price);
    return this.spent(price);
  }

  /**
   * What the call spent at `price`, with what the calls aborted before it spent: null when no call
   * was made, nor aborted before (an attempt stopped before its own call still counts the call its
   * lost claim aborted). Estimated when the provider reported none for any of them. A call stopped
   * from outside (a turn closed by someone else) that its provider never got counts nothing.
   */
  spent(price: ModelPrice | undefined): StoppedSpend | null {
    const aborted = this.#aborted();
    const estimated = !this.#reported || aborted?.estimated === true;
    if (this.#reported) return { usage: turnUsage(added(aborted?.usage, this.#reported), price), estimated };
    const call = this.#call;
    if (!call || skipped(call)) return this.#abortedOnly(price);
    return { usage: turnUsage(added(aborted?.usage, estimate(call)), price), estimated };
  }

  #abortedOnly(price: ModelPrice | undefined): StoppedSpend | null {
    const aborted = this.#aborted();
    return aborted ? { usage: turnUsage(aborted.usage, price), estimated: aborted.estimated } : null;
  }
}

/** An answer without usage: its output, unless it streamed (and counted) already, as streamed output is (`saw`). */
function countOutput(call: MeteredCall, output: readonly ModelOutputItem[]): void {
  call.unreported = true;
  if (call.streamed > 0) return;
  for (const item of output)
    call.streamed += call.counter.count(item.type === 'function_call' ? item.arguments : contentText(item.content));
}

/** A call that counts nothing: its provider never got it; it streamed, answered, reported nothing. */
function skipped(call: MeteredCall): boolean {
  return call.unreached && call.streamed === 0 && !call.reported && !call.input;
}

/**
 * What a stopped call spent: its provider's usage when it answered, else the input its provider
 * reported (cache reads and writes as such) or else its prompt's tokens, and the output streamed.
 */
function estimate(call: MeteredCall): ModelUsage {
  return call.reported ?? { ...(call.input ?? { input_tokens: call.promptTokens() }), output_tokens: call.streamed };
}

/** `usage` with `earlier`'s tokens added (its cache and reasoning tokens too, when either reports them). */
function added(earlier: ModelUsage | undefined, usage: ModelUsage): ModelUsage {
  if (!earlier) return usage;
  const sum: ModelUsage = {
    input_tokens: usage.input_tokens + earlier.input_tokens,
    output_tokens: usage.output_tokens + earlier.output_tokens,
  };
  for (const field of ['cached_input_tokens', 'cache_write_tokens', 'reasoning_tokens'] as const) {
    if (usage[field] !== undefined || earlier[field] !== undefined)
      sum[field] = (usage[field] ?? 0) + (earlier[field] ?? 0);
  }
  return sum;
}
