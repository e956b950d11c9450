import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createServices } from '../../functions/services.ts';
import { deliverQueued, drainWebhooks } from '../../functions/webhooks.ts';
import { parseServiceConfig } from '../../lib/config.ts';
import { echoModel } from '../../lib/models/echo.ts';
import type { Model } from '../../lib/models/model.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { listAll, decodeUtf8, type ObjectStore } from '../../lib/store/object-store.ts';
import { RunningTurns, runTurn, takeUnderPolicy, type TurnObservation } from '../../lib/turn/index.ts';
import { deliverWebhook, MAX_ATTEMPTS } from '../../lib/webhooks/deliver.ts';
import { intentEntry } from '../../lib/webhooks/events.ts';
import { resolveIntent } from '../../lib/webhooks/intent.ts';
import { outboxSink } from '../../lib/webhooks/outbox.ts';
import { webhookUrlProblem } from '../../lib/webhooks/url.ts';
import { DepthStore } from '../support/depth-store.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { GatedStore } from '../support/gated-store.ts';
import { releasedAfterEach } from '../support/slow-echo.ts';
import { hookedEcho } from '../support/turn-world.ts';
import { startWebhookReceiver, WEBHOOK_SECRET, type WebhookReceiver } from '../support/webhook-receiver.ts';

let receiver: WebhookReceiver;
/** How the log line of an event's first failed attempt ends. */
const RETRIED = 'retried up to 14 more times';
const heldEcho = releasedAfterEach();
beforeAll(async () => {
  receiver = await startWebhookReceiver();
});
afterAll(() => receiver.close());
beforeEach(() => {
  receiver.deliveries.length = 0;
  receiver.answer(200);
});

/** The services of a deployment sending webhooks to the receiver, on `store`, with a movable clock. */
function world(store: ObjectStore = new MemoryStore(), model: Model = echoModel, running?: RunningTurns) {
  // The real clock, moved on by the tests (a receiver refuses signatures more than 5 minutes off).
  const now = { ms: 0 };
  const clock = () => new Date(Date.now() + now.ms);
  const config = parseServiceConfig({
    WEBHOOK_URL: receiver.url,
    WEBHOOK_SECRET,
    WEBHOOK_ALLOW_PRIVATE: 'true',
  });
  const tasks: Promise<unknown>[] = [];
  const logged: string[] = [];
  // How its turns ended, as the turn log is told (functions/turn-log.ts).
  const observed: TurnObservation[] = [];
  const services = createServices({
    store,
    config,
    env: {},
    model: () => model,
    background: (task) => void tasks.push(task.catch(() => undefined)),
    log: (message) => void logged.push(message),
    info: (message) => void logged.push(message),
    clock,
    webhookSink: outboxSink(store, ''),
    running,
    observeTurn: (outcome) => void observed.push(outcome),
  });
  const settle = async () => {
    while (tasks.length > 0) await Promise.all(tasks.splice(0));
  };
  // The deployment's drainer: a turn it closes is followed by a pickup with these services.
  const drain = () => drainWebhooks(services);
  const outbox = async () =>
    Promise.all(
      (await listAll(store, 'webhooks/outbox/')).map(async ({ key }) =>
        JSON.parse(decodeUtf8((await store.get(key))!.body)),
      ),
    );
  return { store, services, settle, drain, outbox, now, logged, observed };
}

describe('webhook URLs', () => {
  it('refuses http, private and loopback addresses unless WEBHOOK_ALLOW_PRIVATE is set', () => {
    const refused = [
      'http://example.com/hook',
      'https://127.0.0.1/hook',
      'https://10.1.2.3/',
      'https://172.20.0.1/',
      'https://192.168.1.1/',
      'https://169.254.169.254/latest/meta-data',
      'https://0.0.0.0/',
      'https://[::1]/',
      'https://[fd12::1]/',
      'https://[fe80::1]/',
      'https://[::ffff:127.0.0.1]/',
      'https://[::127.0.0.1]/',
      'https://[64:ff9b::10.0.0.1]/',
      'https://[64:ff9b::a9fe:a9fe]/',
      'https://[64:ff9b:1::8.8.8.8]/',
      'https://[::ffff:0:127.0.0.1]/',
      'https://[::ffff:0:a9fe:a9fe]/',
      'https://[fec0::1]/',
      'https://2130706433/',
      'https://localhost/',
      'https://api.localhost/',
      'https://localhost../',
      'https://user:pass@example.com/',
      'not a url',
    ];
    for (const url of refused) expect(webhookUrlProblem(url, false), url).not.toBeNull();
    for (const url of [
      'https://example.com/hook',
      'https://8.8.8.8/',
      'https://[2001:db8::1]/',
      'https://[64:ff9b::8.8.8.8]/',
    ])
      expect(webhookUrlProblem(url, false), url).toBeNull();
    for (const url of ['http://127.0.0.1:8080/hook', 'https://10.1.2.3/', 'http://localhost/'])
      expect(webhookUrlProblem(url, true), url).toBeNull();
    expect(webhookUrlProblem('ftp://example.com/', true)).not.toBeNull();
  });

  it('refuses an address a 6to4 address holds, the special-purpose ranges and a name of one label', () => {
    const refused = [
      // 6to4 (2002::/16) carries an IPv4 address in its next 32 bits, a relay's way to it.
      'https://[2002:7f00:1::]/',
      'https://[2002:a9fe:a9fe::1]/',
      'https://[2002:c0a8:101::]/',
      // Protocol assignments (192.0.0.0/24) and the benchmarking range (198.18.0.0/15), routed inside networks.
      'https://192.0.0.170/',
      'https://198.18.0.1/',
      'https://198.19.255.254/',
      // No public receiver has a name of one label: a resolver finds it under its own search domains.
      'https://metadata/computeMetadata/v1/',
      'https://redis./',
      'https://router.home.arpa/',
    ];
    for (const url of refused) expect(webhookUrlProblem(url, false), url).toMatch(/private or loopback/);
    for (const url of [
      'https://[2002:808:808::]/',
      'https://198.20.0.1/',
      'https://192.0.1.1/',
      'https://hooks.example/',
    ])
      expect(webhookUrlProblem(url, false), url).toBeNull();
    expect(webhookUrlProblem('https://metadata/', true)).toBeNull();
  });

  it('refuses a Teredo address whose server or client IPv4 address is private, as 6to4 and NAT64 are', () => {
    // Teredo (2001:0::/32, RFC 4380): the server's IPv4 address in bits 32-63, the client's in
    // the last 32 bits, each bit inverted.
    const refused = [
      'https://[2001:0:a00:1::f7f7:f7f7]/', // server 10.0.0.1, client 8.8.8.8
      'https://[2001:0:808:808::80ff:fffe]/', // server 8.8.8.8, client 127.0.0.1
      'https://[2001:0:808:808:0:0:5601:5601]/', // client 169.254.169.254
      'https://[2001:0:c0a8:101:8000:63bf:f7f7:fbfb]/', // server 192.168.1.1
      'https://[2001::]/', // server 0.0.0.0, client 255.255.255.255
    ];
    for (const url of refused) expect(webhookUrlProblem(url, false), url).toMatch(/private or loopback/);
    for (const url of [
      'https://[2001:0:808:808::f7f7:fbfb]/', // server 8.8.8.8, client 8.8.4.4
      'https://[2001:0:4136:e378:8000:63bf:f7f7:f7f7]/', // server 65.54.227.120, client 8.8.8.8
      'https://[2001:db8::1]/',
      'https://[2001:1::a00:1]/',
    ])
      expect(webhookUrlProblem(url, false), url).toBeNull();
  });

  it('names WEBHOOK_URL and WEBHOOK_SECRET when they are invalid, at once', () => {
    expect(() => parseServiceConfig({ WEBHOOK_URL: 'https://10.0.0.1/', WEBHOOK_SECRET: 'short' })).toThrow(
      /WEBHOOK_SECRET.*WEBHOOK_URL|WEBHOOK_URL.*WEBHOOK_SECRET/,
    );
    expect(() => parseServiceConfig({ WEBHOOK_URL: 'https://example.com/' })).toThrow(/WEBHOOK_SECRET/);
    expect(parseServiceConfig({ WEBHOOK_SECRET }).webhooks).toEqual({
      url: undefined,
      secret: WEBHOOK_SECRET,
      allowPrivate: false,
    });
    expect(parseServiceConfig({}).webhooks).toBeNull();
  });
});

describe('webhook outbox', () => {
  it('stores turn.completed before the turn is answered, then session.idle, and delivers both signed', async () => {
    const w = world();
    await w.services.sessions.create({ id: 's1' });
    const response = await runTurn(w.services, 's1', { input: 'hello' });
    // Durable before the answer: the idle event follows in the background.
    expect((await w.outbox()).map((entry) => JSON.parse(entry.body).type)).toEqual(['turn.completed']);
    await w.settle();
    expect(await w.drain()).toBeNull();
    const delivered = [...receiver.delivered().values()];
    expect(delivered.map((delivery) => delivery.verified)).toEqual([true, true]);
    const events = delivered.map((delivery) => delivery.event!);
    expect(events.map((event) => event.type).sort()).toEqual(['session.idle', 'turn.completed']);
    const completed = events.find((event) => event.type === 'turn.completed')!;
    expect(completed.data).toMatchObject({ session_id: 's1', turn: 1, status: 'completed', usage: response.usage });
    // Never the prompt's or the answer's content.
    expect(JSON.stringify(events)).not.toContain('hello');
    expect(await w.outbox()).toEqual([]);
  });

  it('signs as the standardwebhooks library verifies: the UTF-8 body, the secret with or without whsec_', async () => {
    const entry = (id: string) => ({
      format: 'tailgate.webhook.v1' as const,
      id,
      url: receiver.url,
      body: JSON.stringify({ type: 'session.idle', timestamp: '2026-01-01T00:00:00Z', data: { note: 'héllo ✓ 🎉' } }),
      created_at: '2026-01-01T00:00:00Z',
      attempts: 0,
      next_attempt_at: '2026-01-01T00:00:00Z',
    });
    const options = { allowPrivate: true, now: new Date() };
    expect(await deliverWebhook(entry('msg_prefixed'), { ...options, secret: WEBHOOK_SECRET })).toBeNull();
    const bare = WEBHOOK_SECRET.slice('whsec_'.length);
    expect(await deliverWebhook(entry('msg_bare'), { ...options, secret: bare })).toBeNull();
    const other = 'whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=';
    expect(await deliverWebhook(entry('msg_other'), { ...options, secret: other })).toBeNull();
    expect(receiver.deliveries.map(({ id, verified }) => [id, verified])).toEqual([
      ['msg_prefixed', true],
      ['msg_bare', true],
      ['msg_other', false],
    ]);
    expect(receiver.deliveries[0]!.event!.data).toEqual({ note: 'héllo ✓ 🎉' });
  });

  // fetch (WEBHOOK_ALLOW_PRIVATE, Workers) fails with "fetch failed" alone: the reason is its cause.
  it("says why an attempt could not connect (the fetch error's cause), never the URL's path or query", async () => {
    const closed = createServer();
    await new Promise<void>((listening) => closed.listen(0, '127.0.0.1', listening));
    const { port } = closed.address() as AddressInfo;
    await new Promise((done) => closed.close(done));
    const failure = await deliverWebhook(
      {
        format: 'tailgate.webhook.v1',
        id: 'msg_refused',
        url: `http://127.0.0.1:${port}/hook?token=receiver-secret`,
        body: '{}',
        created_at: '2026-01-01T00:00:00Z',
        attempts: 0,
        next_attempt_at: '2026-01-01T00:00:00Z',
      },
      { allowPrivate: true, now: new Date(), secret: WEBHOOK_SECRET },
    );
    expect(failure).toContain('ECONNREFUSED');
    expect(failure).not.toContain('receiver-secret');
  });

  it('retries with backoff after a 500, with the same webhook-id, until a 200', async () => {
    const w = world();
    // A receiver's path and query are often its secret: the log line names the URL's origin alone.
    const secretUrl = `${receiver.url}/hooks/s3cr3t-path?token=s3cr3t-query`;
    await w.services.sessions.create({ id: 's2', webhook_url: secretUrl });
    await runTurn(w.services, 's2', { input: 'x', strategies: [] });
    await w.settle();
    receiver.answer(500);
    const wait = await w.drain();
    expect(wait).toBeGreaterThan(0);
    const [entry] = (await w.outbox()).filter((e) => JSON.parse(e.body).type === 'turn.completed');
    expect(entry).toMatchObject({ attempts: 1, last_error: 'answered 500' });
    // The first failure is logged (a wrong URL shows at once), the attempts after it only at the last.
    const origin = new URL(receiver.url).origin;
    const firstFailure = `tailgate webhooks: ${entry.id} to ${origin} failed: answered 500; ${RETRIED}`;
    expect(w.logged.filter((line) => line.includes(entry.id))).toEqual([firstFailure]);
    expect(w.logged.join('\n')).not.toContain('s3cr3t');
    // Not due yet: nothing is posted.
    const posted = receiver.deliveries.length;
    await w.drain();
    expect(receiver.deliveries.length).toBe(posted);
    receiver.answer(200);
    w.now.ms += wait!;
    await w.settle();
    await w.drain();
    w.now.ms += 60_000;
    await w.drain();
    const attempts = receiver.deliveries.filter((delivery) => delivery.id === entry.id);
    expect(attempts.map((delivery) => [delivery.status, delivery.verified])).toEqual([
      [500, true],
      [200, true],
    ]);
    expect(await w.outbox()).toEqual([]);
    expect(w.logged.filter((line) => line.includes(entry.id))).toEqual([firstFailure]);
  });

  it("logs a queued event's first failed attempt and its last, not those between (Workers' consumer)", async () => {
    receiver.answer(500);
    const entry = {
      format: 'tailgate.webhook.v1' as const,
      id: 'msg_queued',
      url: receiver.url,
      body: JSON.stringify({ type: 'session.idle', timestamp: '2026-01-01T00:00:00Z', data: {} }),
      created_at: '2026-01-01T00:00:00Z',
      attempts: 0,
      next_attempt_at: '2026-01-01T00:00:00Z',
    };
    const env = { WEBHOOK_SECRET, WEBHOOK_ALLOW_PRIVATE: 'true' };
    const delays: (number | undefined)[] = [];
    const error = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    let logged: unknown[][];
    try {
      for (const attempts of [1, 2, MAX_ATTEMPTS]) {
        const message = {
          attempts,
          ack: () => undefined,
          retry: (o?: { delaySeconds?: number }) => delays.push(o?.delaySeconds),
        };
        await deliverQueued(message, entry, env);
      }
    } finally {
      logged = [...error.mock.calls];
      error.mockRestore();
    }
    expect(delays).toEqual([2, 4, 3600]);
    expect(logged).toEqual([
      [`tailgate webhooks: msg_queued to ${new URL(receiver.url).origin} failed: answered 500; ${RETRIED}`],
      [`tailgate webhooks: msg_queued to ${new URL(receiver.url).origin} given up after 15 attempts: answered 500`],
    ]);
  });

  it('gives an event up after the last attempt, keeping it under webhooks/dead/ and logging it', async () => {
    const w = world();
    await w.services.sessions.create({ id: 's3' });
    await runTurn(w.services, 's3', { input: 'x' });
    await w.settle();
    receiver.answer(503);
    for (let round = 0; round < MAX_ATTEMPTS; round++) {
      await w.drain();
      w.now.ms += 3_600_000;
    }
    expect(await w.outbox()).toEqual([]);
    expect((await listAll(w.store, 'webhooks/dead/')).length).toBe(2);
    expect(w.logged.join('\n')).toMatch(/given up after 15 attempts: answered 503/);
    // Each event's first failed attempt and its last: two lines each.
    expect(w.logged.filter((line) => line.startsWith('tailgate webhooks: '))).toHaveLength(4);
    expect(receiver.deliveries.length).toBe(2 * MAX_ATTEMPTS);
  });

  it("carries a compacting turn's compaction_usage beside its usage, as its response does", async () => {
    const w = world();
    await compactingSession(w.services, 'sc');
    const response = await runTurn(w.services, 'sc', COMPACTING);
    expect(response.compaction_usage).toBeDefined();
    await w.settle();
    await w.drain();
    const completed = [...receiver.delivered().values()]
      .map((delivery) => delivery.event!)
      .filter((event) => event.type === 'turn.completed' && event.data.turn === response.turn);
    expect(completed).toHaveLength(1);
    expect(completed[0]!.data).toMatchObject({ usage: response.usage, compaction_usage: response.compaction_usage });
  });

  it('sends turn.cancelled for a cancel and turn.failed for a failed turn', async () => {
    const w = world();
    await w.services.sessions.create({ id: 's4' });
    const claimed = await w.services.sessions.beginTurn('s4', { input: [] });
    if (claimed.kind !== 'claimed') throw new Error('not claimed');
    await w.services.sessions.cancelTurn('s4', 1);
    const failing = {
      ...w.services,
      model: () => ({ ...echoModel, generate: () => Promise.reject(new Error('down')) }),
    };
    await expect(runTurn(failing, 's4', { input: 'y' })).rejects.toThrow();
    await w.settle();
    await w.drain();
    const types = [...receiver.delivered().values()].map((delivery) => [
      delivery.event!.type,
      delivery.event!.data.turn,
    ]);
    expect(types).toEqual(
      expect.arrayContaining([
        ['turn.cancelled', 1],
        ['turn.failed', 2],
        ['session.idle', 2],
      ]),
    );
  });

  it("gives a turn's event its receipt's status: a cancelled one's is cancelled, sent or from its intent", async () => {
    const w = world();
    await w.services.sessions.create({ id: 'st' });
    const claimed = await w.services.sessions.beginTurn('st', { input: [] });
    if (claimed.kind !== 'claimed') throw new Error('not claimed');
    await w.services.sessions.cancelTurn('st', 1);
    await w.settle();
    await w.drain();
    const receipt = await w.services.sessions.getTurn('st', 1);
    const sent = [...receiver.delivered().values()].find((delivery) => delivery.event!.type === 'turn.cancelled');
    expect(sent!.event!.data).toMatchObject({ turn: 1, status: receipt.status });
    const scope = await w.services.sessions.scope('st');
    const now = new Date();
    const step = await resolveIntent(
      w.services.sessions,
      intentEntry(scope, 1, receiver.url, now.toISOString(), now),
      now,
    );
    const body = JSON.parse((step as { entry: { body: string } }).entry.body);
    expect(body).toMatchObject({ type: 'turn.cancelled', data: { turn: 1, status: receipt.status } });
    expect(receipt.status).toBe('cancelled');
  });

  it('sends session.idle after a turn an abort notice closed, and takes up an input queued behind it', async () => {
    // The abort's move waits until an input is queued behind the running turn.
    const store = new GatedStore('inbox_removed/abort');
    const w = world(store);
    await w.services.sessions.create({ id: 'ab' });
    await w.services.inbox.post('ab', { name: 'abort', content: 'stop' });
    const aborted = runTurn(w.services, 'ab', { input: 'x' }).catch((error: unknown) => error);
    await store.reached;
    const queued = await takeUnderPolicy(w.services, 'ab', { input: 'queued' }, { onBusy: 'enqueue' }, () =>
      runTurn(w.services, 'ab', { input: 'queued' }),
    );
    expect(queued.kind).toBe('queued');
    store.release();
    expect(await aborted).toMatchObject({ code: 'aborted' });
    await w.settle();
    expect(await w.services.sessions.queued(await w.services.sessions.scope('ab'))).toEqual([]);
    const types = (await w.outbox()).map((entry) => [JSON.parse(entry.body).type, JSON.parse(entry.body).data.turn]);
    expect(types).toEqual(
      expect.arrayContaining([
        ['turn.failed', 1],
        ['turn.completed', 2],
        ['session.idle', 2],
      ]),
    );
  });

  it('keeps the event of a turn whose outbox write failed once, or landed with its answer lost', async () => {
    for (const after of [false, true]) {
      const faulty = new FaultyStore(new MemoryStore()).failWhen(
        ({ operation, key }) => operation === 'put' && key.startsWith('webhooks/outbox/'),
        { times: 1, after },
      );
      const w = world(faulty);
      await w.services.sessions.create({ id: 's5' });
      // The completion reads its own write back and tells the outbox again.
      const response = await runTurn(w.services, 's5', { input: 'x' });
      expect(faulty.injected).toBe(1);
      const [entry] = await w.outbox();
      expect(JSON.parse(entry.body)).toMatchObject({ type: 'turn.completed', data: { turn: response.turn } });
    }
  });

  it('answers no turn whose event could not be stored: the client is told it failed', async () => {
    const faulty = new FaultyStore(new MemoryStore()).failWhen(
      ({ operation, key }) => operation === 'put' && key.startsWith('webhooks/outbox/'),
    );
    const w = world(faulty);
    await w.services.sessions.create({ id: 's6' });
    await expect(runTurn(w.services, 's6', { input: 'x' })).rejects.toMatchObject({ code: 'storage_error' });
    expect(await w.outbox()).toEqual([]);
    // Its Idempotency-Key-less retry is a new turn, whose event is stored once the store heals
    // (beside the session.idle of the pickup after turn 1, which its own completion closed).
    faulty.heal();
    const next = await runTurn(w.services, 's6', { input: 'again' });
    const events = (await w.outbox()).map((entry) => JSON.parse(entry.body));
    const turnEvents = events.filter((event) => event.type.startsWith('turn.'));
    expect(turnEvents.map((event) => event.data.turn)).toEqual([next.turn]);
  });

  it('adds no round trip before the model call (the intent goes with the claim), one after it: the entry', async () => {
    // Latency in turns of the event loop, not milliseconds: which call ended before which
    // started is the same on any machine, under any load.
    const store = new DepthStore(new MemoryStore(), { turns: 2 });
    // The calls started before the model answered: a count, not a time, so none is on both sides.
    const seen = { before: 0, startedBeforeAnswer: 0 };
    const model = hookedEcho(
      'echo',
      async () => {
        seen.before = store.depth((call) => call.endedAt !== undefined);
        await store.idle();
      },
      () => {
        seen.startedBeforeAnswer = store.calls.length;
      },
    );
    const w = world(store, model);
    await w.services.sessions.create({ id: 's7', webhook_url: receiver.url });
    for (const input of ['one', 'two', 'three']) await runTurn(w.services, 's7', { input });
    await w.settle();
    await w.services.sessions.pack('s7', { refresh: true });
    store.mark();
    await runTurn(w.services, 's7', { input: 'measured' });
    expect(seen.before).toBeLessThanOrEqual(2);
    // Nothing is delivered here (no drainer runs): every call below is the turn's own.
    expect(receiver.deliveries).toEqual([]);
    const early = store.calls.slice(0, seen.startedBeforeAnswer).filter((call) => call.op === 'put');
    const claim = early.find((call) => call.key.startsWith('sessions/s7/') && /\d$/.test(call.key))!;
    const intent = early.find((call) => call.key.startsWith('webhooks/outbox/'))!;
    expect(intent.depth).toBe(claim.depth);
    const late = store.calls.slice(seen.startedBeforeAnswer);
    const done = late.find((call) => call.key.endsWith('.done'))!;
    const entry = late.find((call) => call.key.startsWith('webhooks/outbox/'))!;
    expect(entry.depth).toBe(done.depth + 1);
  });

  it('delivers an entry again when its delete after delivery failed, under the same webhook-id', async () => {
    const faulty = new FaultyStore(new MemoryStore()).failWhen(
      ({ operation, key }) => operation === 'delete' && key.startsWith('webhooks/outbox/'),
      { times: 1 },
    );
    const w = world(faulty);
    await w.services.sessions.create({ id: 's8' });
    await runTurn(w.services, 's8', { input: 'x', strategies: [] });
    await expect(w.drain()).rejects.toMatchObject({ code: 'storage_error' });
    await w.settle();
    await w.drain();
    const [first] = receiver.deliveries;
    expect(receiver.deliveries.filter((delivery) => delivery.id === first!.id).length).toBe(2);
    expect(await w.outbox()).toEqual([]);
  });
});

describe('webhook intents', () => {
  /** Runs one turn on a store where storage call `crashAt` (and every one after it) fails. */
  async function crashedTurn(crashAt: number, after: boolean) {
    const inner = new MemoryStore();
    let calls = 0;
    const faulty = new FaultyStore(inner)
      .failWhen(() => ++calls === crashAt, { after })
      .failWhen(() => calls > crashAt);
    const crashed = world(faulty);
    // The crashed process ran two minutes ago: its turn's lease (30 s) has run out since.
    crashed.now.ms = -120_000;
    await world(inner).services.sessions.create({ id: 'c' });
    calls = 0;
    await runTurn(crashed.services, 'c', { input: 'x', strategies: [] }).catch(() => undefined);
    await crashed.settle();
    const done = (await listAll(inner, 'sessions/')).find(({ key }) => key.endsWith('.done'));
    return { inner, calls, done: done ? JSON.parse(decodeUtf8((await inner.get(done.key))!.body)) : null };
  }

  it('delivers each turn outcome whose completion landed, whatever storage call its process died at', async () => {
    const { calls: total } = await crashedTurn(Number.POSITIVE_INFINITY, false);
    expect(total).toBeGreaterThan(5);
    for (let crashAt = 1; crashAt <= total; crashAt++) {
      for (const after of [false, true]) {
        receiver.deliveries.length = 0;
        const { inner, done } = await crashedTurn(crashAt, after);
        // A restarted drainer, on the healed store, with the real clock.
        const restarted = world(inner);
        for (let drains = 0; drains < 3 && (await restarted.drain()) !== null; drains++);
        const events = [...receiver.delivered().values()].filter((delivery) => delivery.event?.type !== 'session.idle');
        const label = `crash at call ${crashAt}${after ? ' after it landed' : ''}`;
        if (done === null) {
          // No completion: the drainer closed the turn its claim left open, as a newcomer does.
          for (const event of events)
            expect(event.event, label).toMatchObject({
              type: 'turn.failed',
              data: { error: { code: 'lease_expired' } },
            });
          expect(events.length, label).toBeLessThanOrEqual(1);
          continue;
        }
        expect(events.length, label).toBe(1);
        expect(events[0]!.verified, label).toBe(true);
        expect(events[0]!.event, label).toMatchObject({
          type: done.status === 'completed' ? 'turn.completed' : 'turn.failed',
          data: { session_id: 'c', turn: 1, status: done.status },
        });
      }
    }
  });

  it('waits for an open turn while its renewed lease runs, then closes it as a newcomer would', async () => {
    const w = world();
    await w.services.sessions.create({ id: 'o' });
    const claimed = await w.services.sessions.beginTurn('o', { input: [] });
    if (claimed.kind !== 'claimed') throw new Error('not claimed');
    w.now.ms = 20_000;
    const renewed = await w.services.sessions.renewLease(claimed.turn);
    // The intent is due (the claim's lease ended) but the renewed lease runs: it waits for it.
    w.now.ms = 35_000;
    expect(await w.drain()).toBeGreaterThan(0);
    expect(receiver.deliveries).toEqual([]);
    expect((await w.outbox()).map((entry) => entry.next_attempt_at)).toEqual([renewed]);
    w.now.ms = 60_000;
    expect(await w.drain()).toBeNull();
    expect([...receiver.delivered().values()].map((delivery) => delivery.event)).toEqual([
      expect.objectContaining({
        type: 'turn.failed',
        data: expect.objectContaining({
          turn: 1,
          status: 'failed',
          error: expect.objectContaining({ code: 'lease_expired' }),
        }),
      }),
    ]);
    // Its runner gone, the drainer that closed it tells how it ended (its log line, its metrics).
    expect(w.observed).toMatchObject([{ session_id: 'o', turn: 1, status: 'failed', error_code: 'lease_expired' }]);
    // Closed by the drainer, whose pickup found nothing queued: the session is idle.
    await w.settle();
    expect((await w.outbox()).map((entry) => [JSON.parse(entry.body).type, JSON.parse(entry.body).data.turn])).toEqual([
      ['session.idle', 1],
    ]);
    // The session takes its next turn.
    expect((await runTurn(w.services, 'o', { input: 'next', strategies: [] })).turn).toBe(2);
  });

  it('lists a session whose dead turn the drainer closed with that close', async () => {
    const w = world();
    await w.services.sessions.create({ id: 'dl' });
    const input = [{ type: 'message' as const, role: 'user' as const, content: 'go' }];
    // Its process dies after the claim; nothing else comes to the session but the drainer.
    expect((await w.services.sessions.beginTurn('dl', { input })).kind).toBe('claimed');
    w.now.ms = 60_000;
    await w.drain();
    await w.settle();
    const closed = await w.services.sessions.getTurn('dl', 1);
    expect(closed).toMatchObject({ status: 'failed', error: { code: 'lease_expired' } });
    const session = await w.services.sessions.get('dl');
    expect(session.counts).toEqual({ items: 1, turns: 1, tool_calls: 0 });
    const { sessions } = await w.services.sessions.listSessions({ limit: 10 });
    expect(sessions).toMatchObject([{ id: 'dl', counts: session.counts, last_activity_at: closed.completed_at }]);
  });

  it('takes up an input queued behind a dead turn once the drainer closes that turn', async () => {
    const w = world();
    await w.services.sessions.create({ id: 'dq', on_busy: 'enqueue' });
    // Turn 1's process dies after its claim: its intent waits in the outbox for its lease.
    expect((await w.services.sessions.beginTurn('dq', { input: [] })).kind).toBe('claimed');
    const queued = await takeUnderPolicy(w.services, 'dq', { input: 'queued' }, {}, () =>
      runTurn(w.services, 'dq', { input: 'queued', strategies: [] }),
    );
    expect(queued.kind).toBe('queued');
    await w.settle();
    expect(await w.services.sessions.queued(await w.services.sessions.scope('dq'))).toHaveLength(1);
    // Nothing else comes to the session: the drainer closes turn 1 once its lease ran out.
    w.now.ms = 60_000;
    await w.drain();
    await w.settle();
    expect(await w.services.sessions.getTurn('dq', 1)).toMatchObject({ error: { code: 'lease_expired' } });
    expect(await w.services.sessions.getTurn('dq', 2)).toMatchObject({ status: 'completed' });
    expect(await w.services.sessions.queued(await w.services.sessions.scope('dq'))).toEqual([]);
    for (let drains = 0; drains < 3 && (await w.drain()) !== null; drains++);
    const events = [...receiver.delivered().values()].map((delivery) => [delivery.event?.type, delivery.event?.data]);
    expect(events).toEqual(
      expect.arrayContaining([
        ['turn.failed', expect.objectContaining({ turn: 1 })],
        ['turn.completed', expect.objectContaining({ turn: 2 })],
        ['session.idle', expect.objectContaining({ turn: 2 })],
      ]),
    );
  });

  it('a turn of this process whose lapsed lease the drainer closes stops at once: its model call aborted', async () => {
    const slow = heldEcho();
    const running = new RunningTurns();
    const w = world(new MemoryStore(), slow.model, running);
    await w.services.sessions.create({ id: 'lp' });
    const answered = runTurn(w.services, 'lp', { input: 'slow one' }).catch((error: unknown) => error);
    await expect.poll(() => slow.signals.length).toBe(1);
    // Its lease ran out (no renewal came: the process stalled, say): the drainer closes it.
    w.now.ms = 60_000;
    await w.drain();
    expect(await w.services.sessions.getTurn('lp', 1)).toMatchObject({ error: { code: 'lease_expired' } });
    await expect.poll(() => slow.signals[0]!.aborted, { interval: 5 }).toBe(true);
    expect(await answered).toMatchObject({ code: 'lease_expired' });
    expect(running.size).toBe(0);
  });

  it('an intent resolved after a compacting turn completed carries its compaction_usage', async () => {
    const w = world();
    await compactingSession(w.services, 'ic');
    const response = await runTurn(w.services, 'ic', COMPACTING);
    expect(response.compaction_usage).toBeDefined();
    const scope = await w.services.sessions.scope('ic');
    const now = new Date();
    const step = await resolveIntent(
      w.services.sessions,
      intentEntry(scope, response.turn, receiver.url, now.toISOString(), now),
      now,
    );
    expect(step && 'entry' in step).toBe(true);
    const body = JSON.parse((step as { entry: { body: string } }).entry.body);
    expect(body.data).toMatchObject({ usage: response.usage, compaction_usage: response.compaction_usage });
  });

  it('drops the intent of a turn whose session was deleted', async () => {
    const w = world();
    await w.services.sessions.create({ id: 'gone' });
    expect((await w.services.sessions.beginTurn('gone', { input: [] })).kind).toBe('claimed');
    await w.services.sessions.delete('gone');
    w.now.ms = 60_000;
    expect(await w.drain()).toBeNull();
    expect(receiver.deliveries).toEqual([]);
    expect(await w.outbox()).toEqual([]);
  });
});

/** A session with two turns of history. */
async function compactingSession(services: ReturnType<typeof world>['services'], id: string): Promise<void> {
  await services.sessions.create({ id });
  for (const input of ['first words', 'second words']) await runTurn(services, id, { input, strategies: [] });
}

/** A turn that compacts what came before it (the smallest trigger). */
const COMPACTING = {
  input: 'compact now',
  strategies: ['compact'],
  strategy_config: { context_limit: 100_000, compact_trigger_ratio: 0.0001, compact_keep_ratio: 0.0001 },
};
