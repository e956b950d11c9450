import { describe, expect, it } from 'vitest';
import type { Body, ListOptions, PutOptions } from '../../lib/store/object-store.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { type FakeReply, fakeProviderForFile } from '../support/fake-providers/fake-provider-server.ts';
import { createClient, TOKEN } from './http-suite.ts';
import { spendWorld } from './spend-world.ts';

// A manual compaction (POST .../compact) whose session is deleted while its summary call is made
// (its request in flight, or refused and waiting to retry) stops, as a turn does, and is answered
// 404 not_found, not the model_timeout its deadline would give: at once when the delete ended in
// its process, else once its claim's renewal finds it. Its token is charged the summary's
// estimate only when the provider may have run it. Against a fake provider speaking Chat Completions.

const fake = fakeProviderForFile();

const inFlight: FakeReply = { hang: true };
const waitingToRetry: FakeReply = {
  status: 429,
  headers: { 'retry-after-ms': '30000' },
  json: { error: { message: 'Slow down' } },
};

/** A session of three messages and a manual compaction of it whose summary call was made. */
async function compacting(reply: FakeReply, leaseMs: number) {
  fake.next = reply;
  fake.provider.requests.length = 0;
  // A deadline the test outlasts (its 504 is what the delete replaces).
  const settings = { MODEL_MAX_RETRIES: '1', MODEL_TIMEOUT_MS: '15000', TURN_LEASE_MS: String(leaseMs) };
  const { api, harness, auth, drain, answered } = await spendWorld(fake.provider.baseURL, settings);
  const id = await api.session();
  const items = ['plan the trip', 'to Paris', 'in May'].map((content) => ({ type: 'message', role: 'user', content }));
  expect((await api.post(`/v1/sessions/${id}/items`, { items })).status).toBe(201);
  const pending = harness.fetch(`/v1/sessions/${id}/compact`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ keep_tokens: 0 }),
  });
  if (reply === inFlight) await expect.poll(() => fake.provider.requests.length).toBeGreaterThan(0);
  else await answered(1);
  const answer = async () => {
    const response = await pending;
    const text = await response.text();
    await drain();
    return { status: response.status, code: (JSON.parse(text) as { error: { code: string } }).error.code };
  };
  // Another process on the same store: its delete is found by the claim's renewal.
  const elsewhere = createClient(appHarness(harness.store, { API_TOKEN: TOKEN }));
  return { api, elsewhere, auth, id, answer, harness };
}

describe.each([
  ['in flight', inFlight],
  ['waiting to retry a 429', waitingToRetry],
])('a manual compaction whose summary call is %s', (state, reply) => {
  // In this process under a lease no renewal of which comes before the deadline: the delete itself stops it.
  it.each([
    ['this process', 600_000],
    ['another process', 3000],
  ])('its session deleted in %s: 404 not_found', async (where, leaseMs) => {
    const { api, elsewhere, auth, id, answer, harness } = await compacting(reply, leaseMs);
    const deleter = where === 'this process' ? api : elsewhere;
    expect((await deleter.delete(`/v1/sessions/${id}`)).status).toBe(204);
    expect(await answer()).toEqual({ status: 404, code: 'not_found' });
    expect((await api.get(`/v1/sessions/${id}`)).status).toBe(404);
    // Its token is charged the summary's estimate, as no turn, only when the provider may have run it.
    const spent = (await api.get('/v1/tokens/current', auth)).body.usage;
    expect(spent.turns).toBe(0);
    if (state === 'in flight') expect(spent.input_tokens).toBeGreaterThan(0);
    else expect(spent.total_tokens).toBe(0);
    expect(fake.provider.requests).toHaveLength(1);
    // Nothing of the session is left behind by the compaction's end.
    expect(harness.logged.filter((line) => !line.includes('tailgate: request'))).toEqual([]);
  });
});

/**
 * A MemoryStore whose delete of a key ending in `after` pauses the next listing under `within`
 * until `gate` settles (`reached` tells it paused): a delete of a session stopped in its sweep.
 */
class PausingStore extends MemoryStore {
  pause: { after: string; within: string; gate: Promise<unknown>; reached: () => void; armed?: true } | null = null;
  override async delete(keys: string | string[]) {
    await super.delete(keys);
    if (this.pause && (Array.isArray(keys) ? keys : [keys]).some((key) => key.endsWith(this.pause!.after)))
      this.pause.armed = true;
  }
  /** Tells the first put of a lease (a claim's renewal). */
  renewed: () => void = () => undefined;
  override async put(key: string, body: Body, options?: PutOptions) {
    const put = await super.put(key, body, options);
    if (key.endsWith('.lease')) this.renewed();
    return put;
  }
  override async list(prefix: string, options?: ListOptions) {
    const pause = this.pause;
    if (pause?.armed && prefix.includes(pause.within)) {
      this.pause = null;
      pause.reached();
      await pause.gate;
    }
    return super.list(prefix, options);
  }
}

describe('a manual compaction of a session created again while a delete of its id swept', () => {
  it('is not stopped by the end of that delete: it stores its summary', async () => {
    const store = new PausingStore();
    const settings = { MODEL_MAX_RETRIES: '1', MODEL_TIMEOUT_MS: '15000', TURN_LEASE_MS: '3000' };
    const { api, harness, auth, drain } = await spendWorld(fake.provider.baseURL, settings, store);
    const id = 'created-again';
    const items = ['plan the trip', 'to Paris', 'in May'].map((content) => ({
      type: 'message',
      role: 'user',
      content,
    }));
    expect((await api.post('/v1/sessions', { id })).status).toBe(201);
    // The delete of its first incarnation stops right after deleting its config, before its sweep.
    let resume: () => void = () => undefined;
    const swept = new Promise<void>((resolve) => {
      resume = resolve;
    });
    const paused = new Promise<void>((reached) => {
      store.pause = { after: `sessions/${id}/session.json`, within: `/${id}/`, gate: swept, reached };
    });
    const deleting = api.delete(`/v1/sessions/${id}`);
    await paused;
    // Created again, and compacted: its summary call waits until the delete ended and the
    // compaction's claim was renewed once (a stop from that delete would have come first).
    expect((await api.post('/v1/sessions', { id })).status).toBe(201);
    expect((await api.post(`/v1/sessions/${id}/items`, { items })).status).toBe(201);
    const renewed = new Promise<void>((resolve) => {
      store.renewed = resolve;
    });
    let answer: () => void = () => undefined;
    const answering = new Promise<void>((resolve) => {
      answer = resolve;
    });
    fake.next = {
      json: {
        id: 'chatcmpl-1',
        object: 'chat.completion',
        created: 1,
        model: 'fake',
        choices: [
          { index: 0, message: { role: 'assistant', content: 'A trip to Paris in May.' }, finish_reason: 'stop' },
        ],
        usage: { prompt_tokens: 10, completion_tokens: 6, total_tokens: 16 },
      },
      gate: answering,
    };
    fake.provider.requests.length = 0;
    const compacting = harness.fetch(`/v1/sessions/${id}/compact`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ keep_tokens: 0 }),
    });
    await expect.poll(() => fake.provider.requests.length).toBeGreaterThan(0);
    resume();
    expect((await deleting).status).toBe(204);
    // Its claim's renewal (a third of the lease later), or its summary call dropped: a stop from
    // the delete would have come first (at once in this process).
    await Promise.race([renewed, fake.provider.requests[0]!.closed]);
    answer();
    const response = await compacting;
    const body = (await response.json()) as Record<string, unknown>;
    expect(response.status, JSON.stringify(body)).toBe(200);
    await drain();
    expect((await api.get(`/v1/sessions/${id}`)).status).toBe(200);
  });
});
