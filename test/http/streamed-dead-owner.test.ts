import { describe, expect, it } from 'vitest';
import { parseResponseId } from '../../lib/openai/ids.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { appHarness } from '../support/app-harness.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import { nativeResponseId } from '../support/native-response-id.ts';
import { SessionLog } from '../support/session-log.ts';
import { heldOptions, releasedAfterEach } from '../support/slow-echo.ts';
import { sseReader } from '../support/sse-reader.ts';
import { createClient, parseSse, TOKEN } from './http-suite.ts';

// A streamed turn whose owner dies before its first journal batch (a batch goes a second after
// the first event): a native `stream: true` turn whose process lost its store (nothing it writes
// lands any more), and a streamed facade response whose journal writes fail (its process lives
// on). Another process, an hour later by its clock (the owner's lease ran out), closes the turn
// first: a GET of the turn, the session's next writer, a reader of its events, or a retrieve
// through the facade. Its record says it was streamed, so its events end with the stored error
// however it was closed, and the facade's resumed stream with response.failed; a plain JSON turn
// still has none (404), its events' reader closing it too.
// On the memory store and the file store.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: '3000' };
const stores = await memoryAndFileStores('streamed-dead-owner');
const heldEcho = releasedAfterEach();
const hourLater = () => new Date(Date.now() + 3_600_000);

/** A process on `store` whose model holds a `slow` input until the test ends. */
function process(store: ObjectStore, clock?: () => Date) {
  const { options } = heldOptions(heldEcho().model);
  const harness = appHarness(store, environment, { ...options, ...(clock ? { clock } : {}) });
  const post = (path: string, body: unknown) =>
    harness.fetch(path, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  return { api: createClient(harness), post };
}

/** A streamed turn (native, or a facade response) that died before its first batch: its session and response id. */
async function deadOwner(store: ObjectStore, kind: 'native' | 'facade') {
  const faulty = new FaultyStore(store);
  const owner = process(faulty);
  if (kind === 'native') {
    const session = await owner.api.session();
    const reader = sseReader(await owner.post(`/v1/sessions/${session}/turns`, { input: 'slow one', stream: true }));
    // Its claim landed (turn.started came before this first delta); its first batch is a second away.
    await reader.until('event: output_text.delta');
    // Its process lost the store: nothing it writes lands, neither a batch nor a renewal nor its close.
    faulty.failWhen(({ operation }) => operation === 'put' || operation === 'delete');
    return { session, response: await nativeResponseId(store, session) };
  }
  const reader = sseReader(await owner.post('/v1/responses', { model: 'echo', input: 'slow one', stream: true }));
  const text = await reader.until('event: response.output_text.delta');
  // Its journal writes fail from here on; its process lives, renewing its lease by its own clock.
  faulty.failWhen(({ operation, key }) => operation === 'put' && key.includes('/events/'));
  const created = parseSse(text).find((event) => event.event === 'response.created')!;
  const response = created.data.response.id as string;
  return { session: parseResponseId(response)!.sessionId, response };
}

type Closer = (api: ReturnType<typeof createClient>, owner: { session: string; response: string }) => Promise<unknown>;
const closers: [string, Closer][] = [
  [
    'a GET of the turn',
    async (api, { session }) =>
      expect((await api.get(`/v1/sessions/${session}/turns/1`)).body).toMatchObject({
        status: 'failed',
        error: { code: 'lease_expired' },
      }),
  ],
  [
    'the next writer',
    async (api, { session }) =>
      expect(await api.post(`/v1/sessions/${session}/turns`, { input: 'next' })).toMatchObject({
        status: 200,
        body: { turn: 2 },
      }),
  ],
  [
    // It closes it itself, so it ends it at once: no owner's batch is to come.
    'a reader of its events',
    async (api, { session }) =>
      expect(parseSse((await api.get(`/v1/sessions/${session}/turns/1/events`)).body as string)).toMatchObject([
        { event: 'error', data: { error: { code: 'lease_expired' } } },
      ]),
  ],
  [
    'a retrieve through the facade',
    async (api, { response }) =>
      expect((await api.get(`/v1/responses/${response}`)).body).toMatchObject({
        status: 'failed',
        error: { code: 'lease_expired' },
      }),
  ],
];

describe.each(stores)('a streamed turn whose owner died before its first batch: %s', (_, storeOf) => {
  it.each(closers)('ends with the stored error, closed by %s', async (_, close) => {
    const store = storeOf();
    const owners = await Promise.all([deadOwner(store, 'native'), deadOwner(store, 'facade')]);
    const { api } = process(store, hourLater);
    for (const owner of owners) await close(api, owner);
    await Promise.all(
      owners.map(async (owner) => {
        // The facade's resumed stream first (it reads the response, then the journal), then the events.
        const resumed = await api.get(`/v1/responses/${owner.response}?stream=true`);
        expect(resumed.status).toBe(200);
        const stream = parseSse(resumed.body as string);
        expect(stream.map((event) => event.event)).toEqual([
          'response.created',
          'response.in_progress',
          'response.failed',
        ]);
        const ending = stream.at(-1)!;
        expect(ending.data.response).toMatchObject({ status: 'failed', error: { code: 'lease_expired' } });
        const events = await api.get(`/v1/sessions/${owner.session}/turns/1/events`);
        expect(events.status).toBe(200);
        const journaled = parseSse(events.body as string);
        expect(journaled.map((event) => event.event)).toEqual(['error']);
        expect(journaled[0]!.data.error).toMatchObject({ code: 'lease_expired' });
      }),
    );
  });

  it('ends with the stored error once its record was packed before any reader came', async () => {
    const store = storeOf();
    const owner = await deadOwner(store, 'native');
    const { api } = process(store, hourLater);
    // The next writer closes it; after one more turn its record and completion are packed.
    await closers[1]![1](api, owner);
    expect((await api.post(`/v1/sessions/${owner.session}/turns`, { input: 'third' })).status).toBe(200);
    const packed = await new SessionLog(store, { packMinRecords: 1, keepRecords: 1 }).pack(owner.session);
    expect(packed).toMatchObject({ packed: true });
    const events = await api.get(`/v1/sessions/${owner.session}/turns/1/events`);
    expect(events.status).toBe(200);
    expect(parseSse(events.body as string)).toMatchObject([
      { event: 'error', data: { error: { code: 'lease_expired' } } },
    ]);
  });

  it('a background turn cancelled before any batch, then packed, ends with its error too', async () => {
    const store = storeOf();
    const faulty = new FaultyStore(store);
    const owner = process(faulty);
    const session = await owner.api.session();
    // Its runner's journal writes fail: it runs, and writes no batch.
    faulty.failWhen(({ operation, key }) => operation === 'put' && key.includes('/events/'));
    expect(
      (await owner.api.post(`/v1/sessions/${session}/turns`, { input: 'slow one', background: true })).status,
    ).toBe(202);
    await expect
      .poll(async () => (await owner.api.get(`/v1/sessions/${session}/turns/1`)).body.status)
      .toBe('in_progress');
    expect((await owner.api.post(`/v1/sessions/${session}/turns/1/cancel`)).status).toBe(200);
    const { api } = process(store);
    for (const input of ['second', 'third'])
      expect((await api.post(`/v1/sessions/${session}/turns`, { input })).status).toBe(200);
    const packed = await new SessionLog(store, { packMinRecords: 1, keepRecords: 1 }).pack(session);
    expect(packed).toMatchObject({ packed: true });
    const events = await api.get(`/v1/sessions/${session}/turns/1/events`);
    expect(events.status).toBe(200);
    expect(parseSse(events.body as string)).toMatchObject([
      { event: 'error', data: { error: { code: 'turn_cancelled' } } },
    ]);
  });

  it('a plain JSON turn closed the same way still has no journal', async () => {
    const store = storeOf();
    const owner = process(new FaultyStore(store));
    const session = await owner.api.session();
    const pending = owner.post(`/v1/sessions/${session}/turns`, { input: 'slow plain' });
    pending.catch(() => undefined);
    const { api } = process(store, hourLater);
    await expect.poll(async () => (await api.get(`/v1/sessions/${session}/turns/1`)).body.status).toBe('failed');
    expect((await api.get(`/v1/sessions/${session}/turns/1/events`)).status).toBe(404);
    const response = await nativeResponseId(store, session);
    expect((await api.get(`/v1/responses/${response}?stream=true`)).status).toBe(400);
  });

  // Its events' reader is the first to see that its lease ran out: it closes the turn, and has
  // no journal to end (its record does not say it was streamed), so the answer is 404 as it is
  // once anyone else closed it, and nothing is journaled for it.
  it('a plain JSON turn its events reader closes has no journal', async () => {
    const store = storeOf();
    const owner = process(new FaultyStore(store));
    const session = await owner.api.session();
    owner.post(`/v1/sessions/${session}/turns`, { input: 'slow plain' }).catch(() => undefined);
    await expect
      .poll(async () => (await owner.api.get(`/v1/sessions/${session}/turns/1`)).body.status)
      .toBe('in_progress');
    const { api } = process(store, hourLater);
    expect((await api.get(`/v1/sessions/${session}/turns/1/events`)).status).toBe(404);
    expect((await api.get(`/v1/sessions/${session}/turns/1`)).body).toMatchObject({
      status: 'failed',
      error: { code: 'lease_expired' },
    });
    expect((await api.get(`/v1/sessions/${session}/turns/1/events`)).status).toBe(404);
  });

  it('a streamed turn that completed without a batch has no journal: its receipt tells how it ended', async () => {
    const store = storeOf();
    const faulty = new FaultyStore(store);
    faulty.failWhen(({ operation, key }) => operation === 'put' && key.includes('/events/'));
    const owner = process(faulty);
    const session = await owner.api.session();
    await sseReader(await owner.post(`/v1/sessions/${session}/turns`, { input: 'hello', stream: true })).rest();
    expect((await owner.api.get(`/v1/sessions/${session}/turns/1`)).body.status).toBe('completed');
    // Not an empty stream a lease later, which an EventSource would reconnect to for ever.
    const { api } = process(store, hourLater);
    expect((await api.get(`/v1/sessions/${session}/turns/1/events`)).status).toBe(404);
  });
});
