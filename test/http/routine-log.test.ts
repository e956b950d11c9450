import { describe, expect, it } from 'vitest';
import { createTurnRunner, type AppOptions } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { BackgroundTurn } from '../../lib/turn/index.ts';
import { appHarness } from '../support/app-harness.ts';
import { createClient, TOKEN } from './http-suite.ts';

// What happens as a matter of course (a queued background turn cancelled before its runner took
// it, a session deleted under its queued turn) is one line on the info channel (AppOptions.info,
// console.info by default); the error channel (AppOptions.log, console.error) keeps the failures,
// which Workers Logs counts as errors.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' };

/** A process whose background turns wait in `sent` (a queue) until `runAll` runs them. */
function process() {
  const store = new MemoryStore();
  const sent: BackgroundTurn[] = [];
  const tasks: Promise<unknown>[] = [];
  const errors: unknown[][] = [];
  const infos: string[] = [];
  const options: AppOptions = {
    store: () => store,
    readEnvironment: (c) => c.env ?? environment,
    log: (...line) => void errors.push(line),
    info: (line) => void infos.push(line),
    logLine: () => undefined,
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
  return { api: createClient(appHarness(store, environment, options)), sent, runAll, errors, infos };
}

describe('routine events are logged at info level', () => {
  it('a queued background turn cancelled before it ran: nothing on the error channel', async () => {
    const world = process();
    const id = await world.api.session();
    expect((await world.api.post(`/v1/sessions/${id}/turns`, { input: 'later', background: true })).status).toBe(202);
    expect(world.sent).toHaveLength(1);
    expect((await world.api.post(`/v1/sessions/${id}/turns/1/cancel`)).status).toBe(200);
    await world.runAll();
    expect(world.errors).toEqual([]);
    expect(world.infos).toEqual([`tailgate: background turn 1 of session ${id} is closed already`]);
  });

  it('a queued background turn whose session was deleted: nothing on the error channel', async () => {
    const world = process();
    const id = await world.api.session();
    expect((await world.api.post(`/v1/sessions/${id}/turns`, { input: 'later', background: true })).status).toBe(202);
    expect((await world.api.delete(`/v1/sessions/${id}`)).status).toBe(204);
    await world.runAll();
    expect(world.errors).toEqual([]);
    expect(world.infos).toEqual([`tailgate: background turn 1 of session ${id} stopped: the session was deleted`]);
  });
});
