import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { FileStore } from '../../lib/store/file.ts';
import { listAll } from '../../lib/store/object-store.ts';
import {
  startWebhookReceiver,
  WEBHOOK_SECRET,
  type Delivery,
  type WebhookReceiver,
} from '../support/webhook-receiver.ts';
import { startServer as startProcess } from '../support/server-process.ts';
import { serverCommand, startDenoServer, startNodeServer } from './runtime-process.ts';

const TOKEN = 'webhook-token';

/**
 * Polls until `done` holds, after `look` (a read it is judged on) at each poll: a generous bound
 * only against a hang; no time is asserted.
 */
async function until(done: () => boolean, what: () => string, look?: () => Promise<unknown>): Promise<void> {
  for (let polls = 0; polls < 600; polls++) {
    await look?.();
    if (done()) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`gave up waiting: ${what()}`);
}

/** A server's settings: the file store in `dataDir`, webhooks to `receiver`. */
function serverEnvironment(dataDir: string, receiver: WebhookReceiver): Record<string, string> {
  return {
    API_TOKEN: TOKEN,
    DATA_DIR: dataDir,
    DEFAULT_MODEL: 'echo',
    WEBHOOK_URL: receiver.url,
    WEBHOOK_SECRET,
    WEBHOOK_ALLOW_PRIVATE: 'true',
  };
}

// The Node and Deno entries' delivery loop (functions/webhooks.ts) on the file store.
const runtimes: [string, typeof startNodeServer][] = [
  ['Node', startNodeServer],
  ['Deno', startDenoServer],
];
for (const [runtime, startServer] of runtimes) {
  it(`${runtime}: delivers every event at least once, signed, after a SIGKILL before delivering`, async () => {
    const receiver = await startWebhookReceiver();
    const dataDir = await mkdtemp(join(tmpdir(), 'tailgate-webhooks-'));
    const environment = serverEnvironment(dataDir, receiver);
    const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    let server = await startServer(environment);
    try {
      // The receiver is down: every attempt before the kill fails, so the events stay in the outbox.
      receiver.answer(500);
      const id = 'killed';
      expect(
        (await fetch(`${server.origin}/v1/sessions`, { method: 'POST', headers, body: JSON.stringify({ id }) })).status,
      ).toBe(201);
      const turn = await fetch(`${server.origin}/v1/sessions/${id}/turns`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ input: 'one' }),
      });
      expect(turn.status).toBe(200);
      const background = await fetch(`${server.origin}/v1/sessions/${id}/turns`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ input: 'two', background: true }),
      });
      expect(background.status).toBe(202);
      // turn/1, idle/1, turn/2, idle/2: each attempted once and refused.
      const attempted = () => new Set(receiver.deliveries.map((delivery) => delivery.id));
      await until(
        () => attempted().size >= 4,
        () => JSON.stringify(receiver.deliveries),
      );
      await server.kill();
      const before = receiver.deliveries.length;
      expect((await listAll(new FileStore(dataDir), 'webhooks/outbox/')).length).toBe(4);

      receiver.answer(200);
      server = await startServer(environment);
      // The restarted server drains the outbox on start.
      await until(
        () => receiver.delivered().size >= 4,
        () => JSON.stringify(receiver.deliveries),
      );
      const delivered = [...receiver.delivered().values()];
      expect(delivered.map((delivery) => delivery.id).sort()).toEqual([...attempted()].sort());
      expect(delivered.every((delivery: Delivery) => delivery.verified)).toBe(true);
      expect(delivered.map((delivery) => `${delivery.event!.type} ${delivery.event!.data.turn}`).sort()).toEqual([
        'session.idle 1',
        'session.idle 2',
        'turn.completed 1',
        'turn.completed 2',
      ]);
      expect(receiver.deliveries.length).toBeGreaterThan(before);
      const left = async () => (await listAll(new FileStore(dataDir), 'webhooks/outbox/')).length;
      for (let polls = 0; polls < 100 && (await left()) > 0; polls++)
        await new Promise((resolve) => setTimeout(resolve, 100));
      expect(await left()).toBe(0);
    } finally {
      await server.stop();
      await receiver.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  }, 120_000);
}

it("Node: delivers a turn's event after a SIGKILL between its completion and its event write", async () => {
  const receiver = await startWebhookReceiver();
  const dataDir = await mkdtemp(join(tmpdir(), 'tailgate-webhooks-'));
  const marker = join(dataDir, 'held');
  const environment = { ...serverEnvironment(dataDir, receiver), TURN_LEASE_MS: '3000' };
  const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
  const [node, args] = serverCommand('Node', 0);
  // The preload holds the event's put (test/support/hold-webhook-events.ts): the process is
  // killed while it waits, after the turn's `.done` landed.
  const held = ['--import', './test/support/hold-webhook-events.ts', ...args];
  const cwd = join(import.meta.dirname, '../..');
  let server = await startProcess(node, held, { cwd, env: { ...environment, HOLD_WEBHOOK_MARKER: marker } });
  try {
    const id = 'held';
    expect(
      (await fetch(`${server.origin}/v1/sessions`, { method: 'POST', headers, body: JSON.stringify({ id }) })).status,
    ).toBe(201);
    const turn = fetch(`${server.origin}/v1/sessions/${id}/turns`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ input: 'one' }),
    }).catch(() => null);
    await until(
      () => existsSync(marker),
      () => server.output(),
    );
    await server.kill();
    // Never answered; its completion is stored, its event is not.
    expect(await turn).toBeNull();
    const keys = (await listAll(new FileStore(dataDir), '')).map((object) => object.key);
    expect(keys.filter((key) => key.endsWith('.done'))).toHaveLength(1);
    expect(receiver.deliveries).toEqual([]);

    server = await startNodeServer(environment);
    await until(
      () => [...receiver.delivered().values()].some((delivery) => delivery.event?.type === 'turn.completed'),
      () => JSON.stringify(receiver.deliveries),
    );
    const delivered = [...receiver.delivered().values()];
    expect(delivered.every((delivery: Delivery) => delivery.verified)).toBe(true);
    expect(delivered.map((delivery) => `${delivery.event!.type} ${delivery.event!.data.turn}`)).toEqual([
      'turn.completed 1',
    ]);
  } finally {
    await server.stop();
    await receiver.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}, 120_000);

// Without a webhook URL the outbox holds no intent of the turn, whose drainer would close it: a
// background turn whose process was killed while it ran is closed by the sweep of queues alone.
for (const [runtime, startServer] of runtimes) {
  it(`${runtime}: closes a background turn killed while it ran, with no client coming, by the sweep`, async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'tailgate-sweep-kill-'));
    const environment = {
      API_TOKEN: TOKEN,
      DATA_DIR: dataDir,
      DEFAULT_MODEL: 'echo',
      TURN_LEASE_MS: '3000',
      QUEUE_SWEEP_MS: '200',
    };
    const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    const store = new FileStore(dataDir);
    const keys = async (prefix: string) => (await listAll(store, prefix)).map((object) => object.key);
    let server = await startServer(environment);
    try {
      const id = 'killed-running';
      expect(
        (await fetch(`${server.origin}/v1/sessions`, { method: 'POST', headers, body: JSON.stringify({ id }) })).status,
      ).toBe(201);
      const background = await fetch(`${server.origin}/v1/sessions/${id}/turns`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ input: 'wait 60000 slow', background: true }),
      });
      expect(background.status).toBe(202);
      // Its runner took the turn's lease (the turn runs, its model call waiting): then the kill.
      let leased = false;
      await until(
        () => leased,
        () => server.output(),
        async () => (leased = (await keys(`sessions/${id}/turn/`)).some((key) => key.endsWith('.lease'))),
      );
      await server.kill();
      expect((await keys(`sessions/${id}/turn/`)).filter((key) => key.endsWith('.done'))).toEqual([]);
      expect(await keys('queues/')).toEqual([`queues/${id}`]);

      // No client touches the session: the restarted server's sweep closes the turn once its lease ran out.
      server = await startServer(environment);
      let swept = false;
      await until(
        () => swept,
        () => server.output(),
        async () => (swept = (await keys('queues/')).length === 0),
      );
      expect((await keys(`sessions/${id}/turn/`)).filter((key) => key.endsWith('.done'))).toHaveLength(1);
      const receipt = await fetch(`${server.origin}/v1/sessions/${id}/turns/1`, { headers });
      expect(await receipt.json()).toMatchObject({ status: 'failed', error: { code: 'lease_expired' } });
    } finally {
      await server.stop();
      await rm(dataDir, { recursive: true, force: true });
    }
  }, 120_000);
}
