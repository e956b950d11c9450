import type { TailgateError } from '../errors.ts';
import { ModelTimeoutError } from './errors.ts';

/**
 * Whether a model call's provider may have run the model, and so bills it: some HTTP request of
 * the call was answered with a 2xx (the model ran, whatever broke after), or was still in flight
 * when the call failed or timed out (the provider may have it). A request refused with an error
 * status (401, 429, 500: the provider answered without running the model), or one that never got
 * through (a connection refused, a name that does not resolve), says no.
 */
export class CallReach {
  #ran = false;
  #inFlight = 0;

  /** `base` (the runtime's fetch when none) with the call's requests noted. */
  fetch(base: typeof globalThis.fetch | undefined): typeof globalThis.fetch {
    return async (input, init) => {
      this.#inFlight++;
      try {
        const response = await (base ?? globalThis.fetch)(input, init);
        if (response.ok) this.#ran = true;
        return response;
      } catch (error) {
        // Aborted in flight (the deadline, the caller): the provider may have the request.
        if (init?.signal?.aborted) this.#ran = true;
        throw error;
      } finally {
        this.#inFlight--;
      }
    };
  }

  get mayHaveRun(): boolean {
    return this.#ran || this.#inFlight > 0;
  }
}

const marked = new WeakMap<object, boolean>();

/** `error`, the failure of a call, marked with whether its provider may have run the model. */
export function markReach(error: TailgateError, mayHaveRun: boolean): TailgateError {
  marked.set(error, mayHaveRun);
  return error;
}

/**
 * Whether the provider may have run the model for a call that failed with `error`: as its model
 * marked it (lib/models/sdk-model.ts over HTTP); unmarked (a model that cannot tell, a binding),
 * when the call timed out.
 */
export function providerMayHaveRun(error: unknown): boolean {
  const mark = typeof error === 'object' && error !== null ? marked.get(error) : undefined;
  return mark ?? error instanceof ModelTimeoutError;
}

/**
 * Whether a call that failed with `error` is known never to have reached the model: its model
 * marked it so (a refusal, a connection never made). An unmarked failure (a model that cannot
 * tell) says no.
 */
export function providerUnreached(error: unknown): boolean {
  return typeof error === 'object' && error !== null && marked.get(error) === false;
}
