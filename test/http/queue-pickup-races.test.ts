import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createTurnRunner, type AppOptions } from '../../functions/app.ts';
import { FileStore } from '../../lib/store/file.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import type { BackgroundTurn } from '../../lib/turn/index.ts';
import { appHarness } from '../support/app-harness.ts';
import { recordingEcho } from '../support/turn-world.ts';
import { createClient, TOKEN } from './http-suite.ts';

// The inputs queued behind a turn whose process died, once its lease ran out, with several
// readers at once that each close the dead turn or take the queue up (GET .../turns/{turn},
// GET .../queue, GET .../turns/{turn}/events, a background response's GET): each input runs
// once, in order, whether the runner is this process's (Node, Deno) or a queue's that delivers
// each message twice (Workers), on the memory store and the file store.

const directory = await mkdtemp(join(tmpdir(), 'tailgate-queue-races-'));
afterAll(() => rm(directory, { recursive: true, force: true, maxRetries: 5 }));

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: '3000' };
const stores: [string, () => ObjectStore][] = [
  ['memory', () => new MemoryStore()],
  ['file store', () => new FileStore(directory)],
];
type Runner = 'in process' | 'a queue delivering twice';

/** The echo model, its prompts kept: one a model call. */
const model = recordingEcho();

/** A process on `store` whose work after its responses is held in `tasks`, its background turns run by `runner`. */
function process(store: ObjectStore, clock: () => Date, runner: Runner | 'none', tasks: Promise<unknown>[]) {
  const options: AppOptions = {
    store: () => store,
    readEnvironment: (c) => c.env ?? environment,
    clock,
    wrapModel: () => model,
    afterResponse: (task) => void tasks.push(task),
  };
  if (runner === 'none') options.queueTurn = () => async () => undefined;
  else if (runner === 'a queue delivering twice') {
    const consume = createTurnRunner(options);
    options.queueTurn = () => async (run: BackgroundTurn) => {
      for (let delivery = 0; delivery < 2; delivery++)
        tasks.push(consume(run, environment, (task) => void tasks.push(task)));
    };
  }
  return createClient(appHarness(store, environment, options));
}

async function drain(tasks: Promise<unknown>[]): Promise<void> {
  while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
}

describe.each(stores)('inputs queued behind a dead turn, several readers at once: %s', (_, storeOf) => {
  it.each<Runner>(['in process', 'a queue delivering twice'])('each runs once, in order (%s)', async (runner) => {
    const store = storeOf();
    let now = Date.parse('2030-01-01T00:00:00Z');
    const clock = () => new Date(now);
    // Turn 1's process dies before it runs it; three inputs are queued behind it.
    const dying: Promise<unknown>[] = [];
    const dead = process(store, clock, 'none', dying);
    const id = await dead.session({ on_busy: 'enqueue' });
    expect((await dead.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
    for (const input of ['q1', 'q2', 'q3']) {
      expect((await dead.post(`/v1/sessions/${id}/turns`, { input })).status).toBe(202);
      // Inputs stored in one millisecond would be ordered by their \`enqueued_at\`: never equal here.
      now += 1;
    }
    // Its last work (the enqueues' pickups, refused while turn 1's lease runs) ends before it dies.
    await drain(dying);
    now += 4000;
    model.prompts.length = 0;
    const tasks: Promise<unknown>[] = [];
    const readers = [0, 1, 2].map(() => process(store, clock, runner, tasks));
    const reads = readers.flatMap((api) => [
      api.get(`/v1/sessions/${id}/queue`),
      api.get(`/v1/sessions/${id}/turns/1`),
      api.get(`/v1/sessions/${id}/turns/1/events`),
      api.get(`/v1/sessions/${id}/queue`),
    ]);
    for (const read of await Promise.all(reads)) expect(read.status, JSON.stringify(read.body)).toBe(200);
    // Each runner's close takes up the next input: wait until the queue is empty and every turn ended
    // (a pickup meeting another's claim backs off on real timers: on a loaded machine that takes
    // a while, so the rounds are many; the test's timeout bounds them).
    const api = readers[0]!;
    for (let round = 0; round < 1000; round++) {
      await drain(tasks);
      const { total } = (await api.get(`/v1/sessions/${id}/queue`)).body;
      const turns = (await api.get(`/v1/sessions/${id}/turns`)).body.turns;
      if (total === 0 && turns.every((turn: any) => !['queued', 'in_progress'].includes(turn.status))) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await drain(tasks);
    const turns = (await api.get(`/v1/sessions/${id}/turns`)).body.turns.reverse();
    expect(turns.map((turn: any) => [turn.turn, turn.status])).toEqual([
      [1, 'failed'],
      [2, 'completed'],
      [3, 'completed'],
      [4, 'completed'],
    ]);
    const items = (await api.get(`/v1/sessions/${id}/items?limit=100`)).body.items.reverse();
    const inputs = items.filter((item: any) => item.role === 'user').map((item: any) => item.content);
    expect(inputs).toEqual(['first', 'q1', 'q2', 'q3']);
    expect(items.filter((item: any) => item.role === 'assistant')).toHaveLength(3);
    // One model call per input: a second delivery of a turn's message calls none.
    expect(model.prompts).toHaveLength(3);
  });
});
