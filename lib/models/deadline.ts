/** A model call's deadline and the caller's abort as one signal (lib/models/sdk-model.ts, the summary's call). */

/**
 * Resolves like `promise`, or rejects as soon as `signal` aborts. An abandoned `promise` is
 * settled here either way: its later rejection (the provider call aborted) is nobody's, and an
 * unhandled one would end a Deno or Node server.
 */
export function untilAborted<T>(promise: PromiseLike<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    promise.then(undefined, () => undefined);
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

export interface Deadline {
  signal: AbortSignal;
  readonly timedOut: boolean;
  dispose(): void;
}

/** One abort signal for a call: fires at the deadline or when the caller's signal aborts. */
export function startDeadline(callerSignal: AbortSignal | undefined, timeoutMs: number): Deadline {
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort(new Error(`timed out after ${timeoutMs} ms`));
  }, timeoutMs);
  const onCallerAbort = () => controller.abort(callerSignal?.reason);
  if (callerSignal?.aborted) onCallerAbort();
  else callerSignal?.addEventListener('abort', onCallerAbort, { once: true });
  return {
    signal: controller.signal,
    get timedOut() {
      return timedOut;
    },
    dispose() {
      clearTimeout(timer);
      callerSignal?.removeEventListener('abort', onCallerAbort);
      if (!controller.signal.aborted) controller.abort(new Error('model call finished'));
    },
  };
}
