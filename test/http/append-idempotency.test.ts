import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { sha256Hex } from '../../lib/hash.ts';
import type { Item } from '../../lib/items.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { SessionLog } from '../support/session-log.ts';
import { createClient, TOKEN } from './http-suite.ts';

// The Idempotency-Key of POST /v1/sessions/{id}/items (docs/API.md, "Headers"): a retry answers
// the first append's seqs, its items stored once; the key with other items is a 422.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' };
const store = new FaultyStore(new MemoryStore());
const api = createClient(appHarness(store, environment));

const message = (text: string) => ({ type: 'message', role: 'user', content: text });

async function itemCount(id: string): Promise<number> {
  return (await api.get(`/v1/sessions/${id}`)).body.counts.items;
}

describe('Idempotency-Key on POST /v1/sessions/{id}/items', () => {
  it('a retry answers the first append, nothing stored again; other items under the key are a 422', async () => {
    const id = await api.session();
    const key = { 'idempotency-key': 'append-replay-1' };
    const body = { items: [message('one'), message('two')] };
    const first = await api.post(`/v1/sessions/${id}/items`, body, key);
    expect(first.status, JSON.stringify(first.body)).toBe(201);
    expect(first.body).toEqual({ first_seq: 1, last_seq: 2 });
    expect((await api.post(`/v1/sessions/${id}/items`, body, key)).body).toEqual(first.body);
    // Once other records follow it, the key is found in `idem/`.
    expect((await api.post(`/v1/sessions/${id}/items`, { items: [message('three')] })).status).toBe(201);
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'hi' })).status).toBe(200);
    const again = await api.post(`/v1/sessions/${id}/items`, body, key);
    expect(again.status, JSON.stringify(again.body)).toBe(201);
    expect(again.body).toEqual(first.body);
    const other = await api.post(`/v1/sessions/${id}/items`, { items: [message('other')] }, key);
    expect(other.status, JSON.stringify(other.body)).toBe(422);
    expect(other.body).toMatchObject({ error: { code: 'idempotency_key_reused' } });
    // A turn under the append's key is another request, and an append under a turn's key too.
    const turn = await api.post(`/v1/sessions/${id}/turns`, { input: 'hi' }, key);
    expect(turn.status, JSON.stringify(turn.body)).toBe(422);
    const turnKey = { 'idempotency-key': 'append-replay-turn' };
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'keyed' }, turnKey)).status).toBe(200);
    const onTurnKey = await api.post(`/v1/sessions/${id}/items`, body, turnKey);
    expect(onTurnKey.status, JSON.stringify(onTurnKey.body)).toBe(422);
    expect(onTurnKey.body).toMatchObject({ error: { code: 'idempotency_key_reused', details: { turn: 2 } } });
    expect(await itemCount(id)).toBe(7);
  });

  it('an append whose index failed after its record landed is answered 503; its retry stores nothing', async () => {
    const id = await api.session();
    const key = { 'idempotency-key': 'append-index-failed' };
    const body = { items: [message('once')] };
    store.failWhen(({ operation, key: stored }) => operation === 'put' && stored.includes('/idem/'), { times: 1 });
    const failed = await api.post(`/v1/sessions/${id}/items`, body, key);
    expect(failed.status, JSON.stringify(failed.body)).toBe(503);
    store.heal();
    // The next record indexes the key before it is written: the retry finds it there.
    expect((await api.post(`/v1/sessions/${id}/items`, { items: [message('after')] })).body).toEqual({
      first_seq: 2,
      last_seq: 2,
    });
    const retried = await api.post(`/v1/sessions/${id}/items`, body, key);
    expect(retried.status, JSON.stringify(retried.body)).toBe(201);
    expect(retried.body).toEqual({ first_seq: 1, last_seq: 1 });
    expect(await itemCount(id)).toBe(2);
  });

  it('retries of one keyed append sent at once store its items once', async () => {
    const id = await api.session();
    const key = { 'idempotency-key': 'append-race-1' };
    const body = { items: [message('raced')] };
    const results = await Promise.all([1, 2, 3].map(() => api.post(`/v1/sessions/${id}/items`, body, key)));
    for (const result of results) expect(result.body).toEqual({ first_seq: 1, last_seq: 1 });
    expect(await itemCount(id)).toBe(1);
  });

  it('the key of an input queued with another request is a 422, as for a turn (its pickup drops it)', async () => {
    const id = await api.session();
    const key = 'append-queued-key';
    const queued: Item[] = [{ type: 'message', role: 'user', content: 'queued' }];
    await new SessionLog(store).enqueue(id, {
      key_sha256: sha256Hex(key),
      request_sha256: sha256Hex('a turn'),
      input: queued,
      request: {},
    });
    const append = await api.post(`/v1/sessions/${id}/items`, { items: [message('a')] }, { 'idempotency-key': key });
    expect(append.status, JSON.stringify(append.body)).toBe(422);
    expect(append.body).toMatchObject({ error: { code: 'idempotency_key_reused' } });
    expect(await itemCount(id)).toBe(0);
  });
});
