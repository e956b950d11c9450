import { describe, expect, it } from 'vitest';
import { createTurnRunner, type AppOptions } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { BackgroundTurn } from '../../lib/turn/index.ts';
import { appHarness } from '../support/app-harness.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { HeldStore } from '../support/held-store.ts';
import { createClient, SIGNING_KEY, TOKEN } from './http-suite.ts';

// A budgeted token's background turn is charged before its completion is stored (lib/turn/pipeline.ts):
// a client that polls the turn sees it completed only once its charge landed, and the turn it
// sends then is checked against that spend.
const environment = { API_TOKEN: TOKEN, TOKEN_SIGNING_KEY: SIGNING_KEY, DEFAULT_MODEL: 'echo' };

/** A token minted with `budget` (its bearer header) and a session to take its turns in. */
async function budgeted(api: ReturnType<typeof createClient>, budget: Record<string, number>) {
  const minted = await api.post('/v1/tokens', { scopes: ['session:turn', 'session:read'], budget });
  return { bearer: { authorization: `Bearer ${minted.body.token}` }, id: await api.session() };
}

describe("a budgeted token's background turn, polled", () => {
  it('is completed only once its charge landed: the next turn is refused', async () => {
    const store = new HeldStore(new MemoryStore());
    const api = createClient(appHarness(store, environment));
    const { bearer, id } = await budgeted(api, { max_turns: 1 });
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

  it('whose completion then failed to be stored, failed, is charged its usage as no turn', async () => {
    const store = new FaultyStore(new MemoryStore());
    const api = createClient(appHarness(store, environment));
    const { bearer, id } = await budgeted(api, { max_total_tokens: 1_000_000 });
    store.failWhen(({ operation, key }) => operation === 'put' && key.endsWith('.done'), { times: 1 });
    const queued = await api.post(`/v1/sessions/${id}/turns`, { input: 'hello there', background: true }, bearer);
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    // Its events end once its runner closed it (its failed completion), after every charge it makes.
    const events = await api.get(`/v1/sessions/${id}/turns/${queued.body.turn}/events`, bearer);
    expect(events.body).toContain('event: error');
    store.heal();
    const receipt = (await api.get(`/v1/sessions/${id}/turns/${queued.body.turn}`, bearer)).body;
    expect(receipt.status).toBe('failed');
    // Charged as the completed turn it was about to be, then that turn taken back: its usage counts once.
    const usage = (await api.get('/v1/tokens/current', bearer)).body.usage;
    expect(usage).toMatchObject({ ...receipt.usage, turns: 0 });
  });

  it('delivered again after its completion and its failed close could not be stored counts as one turn', async () => {
    const store = new FaultyStore(new MemoryStore());
    const sent: BackgroundTurn[] = [];
    const options: Partial<AppOptions> = { queueTurn: () => async (run) => void sent.push(run) };
    const api = createClient(appHarness(store, { ...environment, TURN_LEASE_MS: '3000' }, options));
    const { bearer, id } = await budgeted(api, { max_turns: 5 });
    const queued = await api.post(`/v1/sessions/${id}/turns`, { input: 'hello', background: true }, bearer);
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    // The completion's put fails, and so does the close as failed: the turn stays open.
    store.failWhen(({ operation, key }) => operation === 'put' && key.endsWith('.done'), { times: 2 });
    const run = createTurnRunner({ store: () => store, readEnvironment: (c) => c.env ?? {}, ...options });
    const background: Promise<unknown>[] = [];
    const consume = async () => {
      const env = { ...environment, TURN_LEASE_MS: '3000' };
      const outcome = await run(sent[0]!, env, (task) => void background.push(task));
      while (background.length > 0) await Promise.all(background.splice(0));
      return outcome;
    };
    expect(await consume()).toEqual({ retryAfterSeconds: 1 });
    const first = (await api.get('/v1/tokens/current', bearer)).body.usage;
    expect(first.turns).toBe(0);
    expect(first.input_tokens).toBeGreaterThan(0);
    expect(await consume()).toBe('done');
    const receipt = (await api.get(`/v1/sessions/${id}/turns/${queued.body.turn}`, bearer)).body;
    expect(receipt.status).toBe('completed');
    // Both runs called the model, billed both; the turn counts once.
    const usage = (await api.get('/v1/tokens/current', bearer)).body.usage;
    expect(usage).toMatchObject({
      turns: 1,
      input_tokens: first.input_tokens + receipt.usage.input_tokens,
      output_tokens: first.output_tokens + receipt.usage.output_tokens,
    });
  });

  it('whose completion landed unheard, its read back failing, still counts as the completed turn', async () => {
    const store = new FaultyStore(new MemoryStore());
    const api = createClient(appHarness(store, environment));
    const { bearer, id } = await budgeted(api, { max_turns: 5 });
    // The completion's put lands but its answer is lost; the get that reads it back fails once.
    let lost = false;
    const lose = (operation: string, key: string) => {
      lost = operation === 'put' && key.endsWith('.done');
      return lost;
    };
    store.failWhen(({ operation, key }) => lose(operation, key), { after: true, times: 1 });
    store.failWhen(({ operation, key }) => lost && operation === 'get' && key.endsWith('.done'), { times: 1 });
    const queued = await api.post(`/v1/sessions/${id}/turns`, { input: 'hello', background: true }, bearer);
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    await api.get(`/v1/sessions/${id}/turns/${queued.body.turn}/events`, bearer);
    store.heal();
    const receipt = (await api.get(`/v1/sessions/${id}/turns/${queued.body.turn}`, bearer)).body;
    expect(receipt.status).toBe('completed');
    const usage = (await api.get('/v1/tokens/current', bearer)).body.usage;
    expect(usage).toMatchObject({ ...receipt.usage, turns: 1 });
  });

  it.each([
    ['its charge landed: charged its usage as no turn', false],
    ['its charge failed (logged): charged as stopped, what its call spent', true],
  ])('cancelled once its model answered, before its completion, %s', async (_, failCharge) => {
    const faulty = new FaultyStore(new MemoryStore());
    const store = new HeldStore(faulty);
    const api = createClient(appHarness(store, environment));
    const { bearer, id } = await budgeted(api, { max_turns: 5 });
    const charge = store.hold(({ operation, keys }) => operation === 'put' && keys[0]!.includes('token-spend/'));
    const queued = await api.post(`/v1/sessions/${id}/turns`, { input: 'later', background: true }, bearer);
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    // The model answered: the charge is on its way, the completion not yet stored. The cancel lands first.
    await charge.reached;
    if (failCharge)
      faulty.failWhen(({ operation, key }) => operation === 'put' && key.includes('token-spend/'), { times: 1 });
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
    // Either way the call's usage counts once, as no turn's: a landed charge's turn is taken back by
    // its refused completion; a failed one is charged by the stopped turn.
    const usage = (await api.get('/v1/tokens/current', bearer)).body.usage;
    expect(usage).toMatchObject({ ...receipt.usage, turns: 0 });
  });
});
