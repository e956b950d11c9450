import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { queuedRuns } from '../support/queued-runs.ts';
import { createClient, TOKEN } from './http-suite.ts';

// What happens as a matter of course (a queued background turn cancelled before its runner took
// it, a session deleted under its queued turn) is one line on the info channel (AppOptions.info,
// console.info by default); the error channel (AppOptions.log, console.error) keeps the failures,
// which Workers Logs counts as errors.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' };

/** A process whose background turns wait in `sent` (a queue) until `runAll` runs them. */
function process() {
  const store = new MemoryStore();
  const errors: unknown[][] = [];
  const infos: string[] = [];
  const { options, sent, runAll } = queuedRuns(
    {
      store: () => store,
      readEnvironment: (c) => c.env ?? environment,
      log: (...line) => void errors.push(line),
      info: (line) => void infos.push(line),
      logLine: () => undefined,
    },
    environment,
  );
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
