import { describe, expect, it } from 'vitest';
import { StorageError } from '../../lib/errors.ts';
import { echoModel } from '../../lib/models/echo.ts';
import type { Model } from '../../lib/models/model.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { approximateTokenCounter } from '../../lib/tokens/token-counter.ts';
import { appHarness } from '../support/app-harness.ts';
import { FaultyStore, type StoreCall } from '../support/faulty-store.ts';
import { heldOptions } from '../support/slow-echo.ts';
import { dataUrl, pngBytes } from '../support/media-fixtures.ts';
import { createClient, SIGNING_KEY, TOKEN } from './http-suite.ts';

// A turn calls its model while its claim's record is put (lib/turn/pipeline.ts), and the images
// of its input before it. When such a put fails, nothing of the turn is stored and it is answered
// 503, but the call it started was billed by the provider all the same: it is charged to the
// turn's token (as no turn): the usage its provider reported when it answered before the put
// failed, else estimated as a call aborted so is (its prompt's tokens, none of its output: not
// streamed). Else a runaway agent whose turns keep failing so would never meet its token's budget.

const environment = { API_TOKEN: TOKEN, TOKEN_SIGNING_KEY: SIGNING_KEY, DEFAULT_MODEL: 'echo' };
const recordPut = ({ operation, key, options }: StoreCall) =>
  operation === 'put' && !!options?.onlyIfAbsent && /\/turn\/[^/]+\/\d{12}$/.test(key);
const blobPut = ({ operation, key }: StoreCall) => operation === 'put' && key.includes('/blob/');

/** `store`, whose record puts wait until `called` (the model was called) before they go on. */
function putsAfter(store: ObjectStore, called: Promise<void>): ObjectStore {
  return {
    get: (key, options) => store.get(key, options),
    head: (key) => store.head(key),
    list: (prefix, options) => store.list(prefix, options),
    delete: (keys) => store.delete(keys),
    put: async (key, body, options) => {
      const call: StoreCall = { operation: 'put', key, index: 0, ...(options ? { options } : {}) };
      if (recordPut(call) || blobPut(call)) await called;
      return store.put(key, body, options);
    },
  };
}

/**
 * A process whose model tells when it is called, then answers only once its call is aborted (with
 * the abort; `answered`: answers, then tells), on a store whose record and blob puts wait for that.
 */
function world(answered = false) {
  let tell: () => void = () => undefined;
  const called = new Promise<void>((resolve) => {
    tell = resolve;
  });
  const model: Model = {
    ...echoModel,
    async generate(request) {
      if (answered) {
        const result = await echoModel.generate(request);
        tell();
        return result;
      }
      const { signal } = request;
      const aborted = new Promise((_, reject) => {
        signal?.addEventListener('abort', () => reject(new Error('the call was aborted')), { once: true });
      });
      tell();
      return (await aborted) as never;
    },
  };
  const faulty = new FaultyStore(new MemoryStore());
  const { options, drain } = heldOptions(model);
  const lines: string[] = [];
  const logLine = (line: string) => void lines.push(line);
  const api = createClient(appHarness(putsAfter(faulty, called), environment, { ...options, logLine }));
  return { faulty, drain, api, lines };
}

/** A token minted on `api` to run and read turns within a budget of `tokens`, as headers, and a new session. */
async function minted(api: ReturnType<typeof world>['api'], tokens: number) {
  const minted = await api.post('/v1/tokens', {
    scopes: ['session:turn', 'session:read'],
    budget: { max_total_tokens: tokens },
  });
  expect(minted.status, JSON.stringify(minted.body)).toBe(201);
  return { auth: { authorization: `Bearer ${minted.body.token as string}` }, id: await api.session() };
}

describe('a turn whose claim could not be stored after its model call started', () => {
  it('its record put failed: charges the call to its token, and its budget counts it', async () => {
    const { faulty, drain, api } = world();
    const prompt = approximateTokenCounter.count('hello there') + 4;
    const { auth, id } = await minted(api, prompt);
    faulty.failWhen(recordPut, { times: 1, error: () => new StorageError('the record put failed') });
    const failed = await api.post(`/v1/sessions/${id}/turns`, { input: 'hello there' }, auth);
    expect(failed.status, JSON.stringify(failed.body)).toBe(503);
    await drain();
    expect((await api.get(`/v1/sessions/${id}/turns`)).body.turns).toEqual([]);
    expect((await api.get('/v1/tokens/current', auth)).body.usage).toMatchObject({
      turns: 0,
      input_tokens: prompt,
      output_tokens: 0,
    });
    // Its budget is spent: the next turn is refused.
    const refused = await api.post(`/v1/sessions/${id}/turns`, { input: 'hello there' }, auth);
    expect(refused.status, JSON.stringify(refused.body)).toBe(402);
  });

  it('its record put failed once the model answered: charges the usage its provider reported', async () => {
    const { faulty, drain, api } = world(true);
    const { auth, id } = await minted(api, 1_000_000);
    faulty.failWhen(recordPut, { times: 1, error: () => new StorageError('the record put failed') });
    const failed = await api.post(`/v1/sessions/${id}/turns`, { input: 'hello there' }, auth);
    expect(failed.status, JSON.stringify(failed.body)).toBe(503);
    await drain();
    // What the echo model reports for `hello there`: its output too, which the provider billed.
    expect((await api.get('/v1/tokens/current', auth)).body.usage).toMatchObject({
      turns: 0,
      input_tokens: 3,
      output_tokens: 5,
    });
  });

  it("a screenshot's blob put failed: charges the call to its token", async () => {
    const { faulty, drain, api } = world();
    const { auth, id } = await minted(api, 1_000_000);
    const image = { type: 'input_image', image_url: dataUrl('image/png', pngBytes(320, 200, 20_000, 7)) };
    faulty.failWhen(blobPut, { error: () => new StorageError('the blob put failed') });
    const input = [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'look' }, image] }];
    const failed = await api.post(`/v1/sessions/${id}/turns`, { input }, auth);
    expect(failed.status, JSON.stringify(failed.body)).toBe(503);
    await drain();
    expect((await api.get(`/v1/sessions/${id}/turns`)).body.turns).toEqual([]);
    const usage = (await api.get('/v1/tokens/current', auth)).body.usage;
    expect(usage).toMatchObject({ turns: 0, output_tokens: 0 });
    expect(usage.input_tokens).toBeGreaterThan(approximateTokenCounter.count('look'));
  });

  it("its turn's log line counts the call", async () => {
    const { faulty, api, lines } = world();
    const id = await api.session();
    faulty.failWhen(recordPut, { times: 1, error: () => new StorageError('the record put failed') });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'hello there' })).status).toBe(503);
    const turn = lines.map((line) => JSON.parse(line)).find((line) => line.event === 'turn');
    expect(turn).toMatchObject({ status: 'failed', error_code: 'storage_error', model: 'echo' });
    expect(turn.tokens).toMatchObject({ input: approximateTokenCounter.count('hello there') + 4, output: 0 });
  });

  it("its records keep failing to land: the session's budget counts each call, and refuses once spent", async () => {
    const { faulty, drain, api } = world();
    const prompt = approximateTokenCounter.count('hello there') + 4;
    const id = await api.session();
    const budget = { max_total_tokens: 2 * prompt };
    expect((await api.patch(`/v1/sessions/${id}`, { budget })).status).toBe(200);
    faulty.failWhen(recordPut, { error: () => new StorageError('the record put failed') });
    for (let call = 0; call < 2; call++) {
      const failed = await api.post(`/v1/sessions/${id}/turns`, { input: 'hello there' });
      expect(failed.status, JSON.stringify(failed.body)).toBe(503);
      await drain();
    }
    // A read of the session shows what the next claim's budget check counts.
    expect((await api.get(`/v1/sessions/${id}`)).body.usage).toMatchObject({ turns: 0, total_tokens: 2 * prompt });
    // Spent: refused before anything is stored or a model called, again and again.
    for (let call = 0; call < 2; call++) {
      const refused = await api.post(`/v1/sessions/${id}/turns`, { input: 'hello there' });
      expect(refused.status, JSON.stringify(refused.body)).toBe(402);
      expect(refused.body.error.details).toMatchObject({ budget: 'session', spent: 2 * prompt });
    }
  });

  it("a charge counts once in the session's totals, whatever writes follow it", async () => {
    const { faulty, drain, api } = world(true);
    const id = await api.session();
    faulty.failWhen(recordPut, { times: 1, error: () => new StorageError('the record put failed') });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'hello there' })).status).toBe(503);
    await drain();
    // The charge's delete fails once: the next write names it again, and still counts it once.
    faulty.failWhen(({ operation, key }) => operation === 'delete' && key.includes('/-charge-'), { times: 1 });
    for (let turn = 0; turn < 3; turn++) {
      const ran = await api.post(`/v1/sessions/${id}/turns`, { input: 'hello there' });
      expect(ran.status, JSON.stringify(ran.body)).toBe(200);
      await drain();
    }
    // The three turns' usage (their receipts') and the call whose record never landed (3 in, 5 out).
    const turns: { usage: { input_tokens: number; output_tokens: number } }[] = (
      await api.get(`/v1/sessions/${id}/turns`)
    ).body.turns;
    const sum = (field: 'input_tokens' | 'output_tokens') =>
      turns.reduce((total, turn) => total + turn.usage[field], 0);
    expect((await api.get(`/v1/sessions/${id}`)).body.usage).toMatchObject({
      turns: 3,
      input_tokens: sum('input_tokens') + 3,
      output_tokens: sum('output_tokens') + 5,
    });
    const keys = (await faulty.list('')).objects.map((object) => object.key);
    expect(keys.filter((key) => key.includes('/-charge-'))).toEqual([]);
  });

  it('a delete of the newest turn keeps the charges stored before it in the totals', async () => {
    const { faulty, drain, api } = world(true);
    const id = await api.session();
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'hello there' })).status).toBe(200);
    faulty.failWhen(recordPut, { times: 1, error: () => new StorageError('the record put failed') });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'hello there' })).status).toBe(503);
    await drain();
    const before = (await api.get(`/v1/sessions/${id}`)).body.usage;
    expect((await api.delete(`/v1/sessions/${id}/turns/1`)).status).toBe(200);
    // The deleted turn's usage stays, as spent; so does the call whose record never landed, once.
    expect((await api.get(`/v1/sessions/${id}`)).body.usage).toMatchObject({
      input_tokens: before.input_tokens,
      output_tokens: before.output_tokens,
    });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'hello there' })).status).toBe(200);
    const turns = (await api.get(`/v1/sessions/${id}/turns`)).body.turns;
    expect((await api.get(`/v1/sessions/${id}`)).body.usage).toMatchObject({
      input_tokens: before.input_tokens + turns[0].usage.input_tokens,
      output_tokens: before.output_tokens + turns[0].usage.output_tokens,
    });
  });
});
