import { expect } from 'vitest';
import { createTurnRunner, type AppOptions } from '../../functions/app.ts';
import type { BackgroundTurn } from '../../lib/turn/index.ts';

/**
 * The app's options for a process whose background turns wait in `sent` (a queue) until
 * `runAll` runs them, each to `done`, and whose work after a response `drain` awaits: `rest` are
 * the other options, `environment` the settings the runner reads.
 */
export function queuedRuns(rest: Omit<AppOptions, 'afterResponse' | 'queueTurn'>, environment: Record<string, string>) {
  const sent: BackgroundTurn[] = [];
  const tasks: Promise<unknown>[] = [];
  const options: AppOptions = {
    ...rest,
    afterResponse: (task) => void tasks.push(task),
    queueTurn: () => async (run) => void sent.push(run),
  };
  const runner = createTurnRunner(options);
  const drain = async () => {
    while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
  };
  const runAll = async () => {
    await drain();
    for (let run = sent.shift(); run; run = sent.shift()) {
      expect(await runner(run, environment, (task) => void tasks.push(task))).toBe('done');
      await drain();
    }
  };
  return { options, sent, drain, runAll };
}
