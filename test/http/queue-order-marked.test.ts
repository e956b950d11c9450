import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { createTurnRunner, type AppOptions } from '../../functions/app.ts';
import { sessionPrefix } from '../../lib/session/keys.ts';
import { FileStore } from '../../lib/store/file.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import type { BackgroundTurn } from '../../lib/turn/index.ts';
import { appHarness } from '../support/app-harness.ts';
import { HeldStore } from '../support/held-store.ts';
import { conditionalGatewayForFile } from '../support/s3-gateway-hooks.ts';
import { createTestS3Store } from '../support/s3-store.ts';
import { recordingEcho } from '../support/turn-world.ts';
import { createClient, TOKEN } from './http-suite.ts';

// A pickup marks the oldest queued input (`taking_at`, a rewrite: its upload time moves) right
// before its turn's record. Another pickup listing the queue between that mark and that record
// still takes the oldest input: were it to take the next one, its record could land first and
// the inputs would run out of the order they were queued. On the memory store, whose clock the
// test sets, the mark lands 4 s after the newer input; on the file store and S3 the store's own
// clock stamps it (where it stamps the two alike, their `enqueued_at` orders them).

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: '3000' };
const model = recordingEcho();
const gateway = conditionalGatewayForFile();
const directory = await mkdtemp(join(tmpdir(), 'tailgate-queue-order-'));
afterAll(() => rm(directory, { recursive: true, force: true, maxRetries: 5 }));
let now = Date.parse('2030-01-01T00:00:00Z');
const clock = () => new Date(now);
const stores: [string, () => ObjectStore][] = [
  ['memory', () => new MemoryStore({ clock })],
  ['file store', () => new FileStore(join(directory, crypto.randomUUID()))],
  ['S3', () => createTestS3Store(gateway().endpoint, inject('s3Bucket'))],
];

async function drain(tasks: Promise<unknown>[]): Promise<void> {
  while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
}

/** A process on `store` whose work after its responses is held in `tasks`; `runner`: it runs its background turns. */
function process(store: ObjectStore, runner: boolean, tasks: Promise<unknown>[]) {
  const options: AppOptions = {
    store: () => store,
    readEnvironment: (c) => c.env ?? environment,
    clock,
    wrapModel: () => model,
    afterResponse: (task) => void tasks.push(task),
  };
  const consume = createTurnRunner(options);
  options.queueTurn = () => async (run: BackgroundTurn) => {
    if (runner) tasks.push(consume(run, environment, (task) => void tasks.push(task)));
  };
  return createClient(appHarness(store, environment, options));
}

describe.each(stores)('%s', (_, storeOf) => {
  it('a pickup racing another whose mark landed before its record takes the same, oldest input', async () => {
    const store = new HeldStore(storeOf());
    // Turn 1's process dies before it runs it; two inputs are queued behind it, a millisecond apart.
    const dying: Promise<unknown>[] = [];
    const dead = process(store, false, dying);
    const id = await dead.session({ on_busy: 'enqueue' });
    expect((await dead.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
    const queued: string[] = [];
    for (const input of ['older', 'newer']) {
      now += 1;
      const answer = await dead.post(`/v1/sessions/${id}/turns`, { input });
      expect(answer.status).toBe(202);
      queued.push(answer.body.queued_turn);
    }
    await drain(dying);
    now += 4000;
    // The first pickup marks the older input, then stops before its turn's record.
    let marked = false;
    const stalled = store.hold((call) => {
      if (call.operation !== 'put') return false;
      if (call.keys[0]!.endsWith(`/${queued[0]}`) && call.options?.ifMatch !== undefined) {
        marked = true;
        return false;
      }
      return marked;
    });
    const firstTasks: Promise<unknown>[] = [];
    const first = process(store, true, firstTasks);
    expect((await first.get(`/v1/sessions/${id}/queue`)).status).toBe(200);
    await stalled.reached;
    // A second pickup meanwhile: the queue as listed, and the turn it takes.
    const secondTasks: Promise<unknown>[] = [];
    const second = process(store, true, secondTasks);
    const listed = await second.get(`/v1/sessions/${id}/queue`);
    expect(listed.body.queued.map((row: any) => row.queued_turn)).toEqual(queued);
    await drain(secondTasks);
    stalled.release();
    await drain(firstTasks);
    await drain(secondTasks);
    const items = (await second.get(`/v1/sessions/${id}/items?limit=100`)).body.items.reverse();
    const inputs = items.filter((item: any) => item.role === 'user').map((item: any) => item.content);
    expect(inputs).toEqual(['first', 'older', 'newer']);
  });

  it('a mark refused because a delete removed the session meanwhile leaves nothing of it in the store', async () => {
    const store = new HeldStore(storeOf());
    const dying: Promise<unknown>[] = [];
    const dead = process(store, false, dying);
    const id = await dead.session({ on_busy: 'enqueue' });
    expect((await dead.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
    for (const input of ['older', 'newer']) {
      now += 1;
      expect((await dead.post(`/v1/sessions/${id}/turns`, { input })).status).toBe(202);
    }
    await drain(dying);
    now += 4000;
    // The pickup read the input it marks; the session is deleted before its name of it lands.
    const naming = store.hold((call) => call.operation === 'put' && call.keys[0]!.includes('/queue_taking/'));
    const tasks: Promise<unknown>[] = [];
    const pickup = process(store, true, tasks);
    expect((await pickup.get(`/v1/sessions/${id}/queue`)).status).toBe(200);
    await naming.reached;
    expect((await dead.delete(`/v1/sessions/${id}`)).status).toBe(204);
    naming.release();
    await drain(tasks);
    const left = await store.inner.list(sessionPrefix('', id), { limit: 1000 });
    expect(left.objects.map((object) => object.key).filter((key) => key.includes('/queue_taking/'))).toEqual([]);
  });
});
