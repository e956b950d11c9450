import { afterEach } from 'vitest';
import { echoModel } from '../../lib/models/echo.ts';
import type { Model, ModelRequest, ModelStreamEvent } from '../../lib/models/model.ts';

/**
 * The echo model, but a prompt whose last message says `slow`, and a compaction's summary (its
 * prompt opens with the summary instructions, a system message), is answered only once the test
 * releases it, or not at all when its call is aborted (the signals of those calls are kept;
 * `reached` gives the first once its call is held). Streamed, it sends a first piece of text at once.
 */
export function slowEcho() {
  const signals: AbortSignal[] = [];
  let release = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  let heldFirst!: (signal: AbortSignal) => void;
  const reached = new Promise<AbortSignal>((resolve) => (heldFirst = resolve));
  const slow = (request: ModelRequest) =>
    JSON.stringify(request.prompt.at(-1)).includes('slow') ||
    (request.prompt[0] as { role?: string } | undefined)?.role === 'system';
  const hold = async (request: ModelRequest) => {
    // A call with no signal is never aborted.
    const signal = request.signal ?? new AbortController().signal;
    signals.push(signal);
    heldFirst(signal);
    const aborted = new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    await Promise.race([released, aborted]);
    signal.throwIfAborted();
  };
  const model: Model = {
    ...echoModel,
    async generate(request) {
      if (slow(request)) await hold(request);
      return echoModel.generate(request);
    },
    async *stream(request): AsyncIterable<ModelStreamEvent> {
      if (slow(request)) {
        yield { type: 'text_delta', delta: 'thinking ' };
        await hold(request);
      }
      yield* echoModel.stream(request);
    },
  };
  return { model, signals, reached, release: () => release() };
}

/**
 * Makes slowEcho models whose held calls are all released after each test (registers the
 * `afterEach`), so that no test leaves a call hanging.
 */
export function releasedAfterEach(): () => ReturnType<typeof slowEcho> {
  const made: (() => void)[] = [];
  afterEach(() => {
    for (const release of made.splice(0)) release();
  });
  return () => {
    const slow = slowEcho();
    made.push(slow.release);
    return slow;
  };
}

/**
 * App options (test/support/app-harness.ts) of a process that runs `model`, keeps its log lines
 * in `logs` (its routine ones, the info channel, in `infos`) and holds the work it leaves after
 * its responses until `drain` awaits it. One object may serve several apps: each is a process
 * of its own all the same.
 */
export function heldOptions(model: Model) {
  const tasks: Promise<unknown>[] = [];
  const logs: string[] = [];
  const infos: string[] = [];
  const options = {
    wrapModel: () => model,
    afterResponse: (task: Promise<unknown>) => void tasks.push(task),
    log: (message: string) => void logs.push(message),
    info: (message: string) => void infos.push(message),
  };
  const drain = async () => {
    while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
  };
  return { options, logs, infos, drain };
}
