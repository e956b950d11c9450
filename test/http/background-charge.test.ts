import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { HeldStore } from '../support/held-store.ts';
import { createClient, SIGNING_KEY, TOKEN } from './http-suite.ts';

// A budgeted token's background turn is charged before its completion is stored (lib/turn/pipeline.ts):
// a client that polls the turn sees it completed only once its charge landed, and the turn it
// sends then is checked against that spend.
const environment = { API_TOKEN: TOKEN, TOKEN_SIGNING_KEY: SIGNING_KEY, DEFAULT_MODEL: 'echo' };

describe("a budgeted token's background turn, polled", () => {
  it('is completed only once its charge landed: the next turn is refused', async () => {
    const store = new HeldStore(new MemoryStore());
    const api = createClient(appHarness(store, environment));
    const minted = await api.post('/v1/tokens', { scopes: ['session:turn', 'session:read'], budget: { max_turns: 1 } });
    const bearer = { authorization: `Bearer ${minted.body.token}` };
    const id = await api.session();
    const charge = store.hold(({ operation, keys }) => operation === 'put' && keys[0]!.includes('token-spend/'));
    const queued = await api.post(`/v1/sessions/${id}/turns`, { input: 'later', background: true }, bearer);
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    const status = async () => (await api.get(`/v1/sessions/${id}/turns/${queued.body.turn}`, bearer)).body.status;
    await charge.reached;
    expect(await status()).toBe('in_progress');
    charge.release();
    await expect.poll(status).toBe('completed');
    expect((await api.get('/v1/tokens/current', bearer)).body.usage.turns).toBe(1);
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'next' }, bearer)).status).toBe(402);
  });

  it('whose completion then failed to be stored is charged once: its failed close charges nothing more', async () => {
    const store = new FaultyStore(new MemoryStore());
    const api = createClient(appHarness(store, environment));
    const minted = await api.post('/v1/tokens', {
      scopes: ['session:turn', 'session:read'],
      budget: { max_total_tokens: 1_000_000 },
    });
    const bearer = { authorization: `Bearer ${minted.body.token}` };
    const id = await api.session();
    store.failWhen(({ operation, key }) => operation === 'put' && key.endsWith('.done'), { times: 1 });
    const queued = await api.post(`/v1/sessions/${id}/turns`, { input: 'hello there', background: true }, bearer);
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    // Its events end once its runner closed it (its failed completion), after every charge it makes.
    const events = await api.get(`/v1/sessions/${id}/turns/${queued.body.turn}/events`, bearer);
    expect(events.body).toContain('event: error');
    store.heal();
    const receipt = (await api.get(`/v1/sessions/${id}/turns/${queued.body.turn}`, bearer)).body;
    expect(receipt.status).toBe('failed');
    // Charged as the completed turn it was about to be, once.
    const usage = (await api.get('/v1/tokens/current', bearer)).body.usage;
    expect(usage).toMatchObject({ turns: 1, ...receipt.usage });
  });
  it('cancelled once its model answered, before its completion, is charged once as that turn', async () => {
    const store = new HeldStore(new MemoryStore());
    const api = createClient(appHarness(store, environment));
    const minted = await api.post('/v1/tokens', { scopes: ['session:turn', 'session:read'], budget: { max_turns: 5 } });
    const bearer = { authorization: `Bearer ${minted.body.token}` };
    const id = await api.session();
    const charge = store.hold(({ operation, keys }) => operation === 'put' && keys[0]!.includes('token-spend/'));
    const queued = await api.post(`/v1/sessions/${id}/turns`, { input: 'later', background: true }, bearer);
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    // The model answered: the charge is on its way, the completion not yet stored. The cancel lands first.
    await charge.reached;
    expect((await api.post(`/v1/sessions/${id}/turns/${queued.body.turn}/cancel`, {})).status).toBe(200);
    charge.release();
    // Its events end once its runner learned of the close, after every charge it makes.
    const events = await api.get(`/v1/sessions/${id}/turns/${queued.body.turn}/events`, bearer);
    expect(events.body).toContain('turn_cancelled');
    const read = async () => (await api.get(`/v1/sessions/${id}/turns/${queued.body.turn}`, bearer)).body;
    // The stopped turn stores what its call spent after its answer: the receipt shows it once stored.
    await expect.poll(async () => (await read()).usage).not.toBeNull();
    const receipt = await read();
    expect(receipt.status).toBe('cancelled');
    // Its refused completion charges nothing more: the call's usage counts once, with the turn.
    const usage = (await api.get('/v1/tokens/current', bearer)).body.usage;
    expect(usage).toMatchObject({ turns: 1, ...receipt.usage });
  });
});
