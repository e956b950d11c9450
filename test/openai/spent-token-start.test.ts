import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { CountingStore } from '../support/counting-store.ts';
import { SIGNING_KEY } from '../http/http-suite.ts';

// A token whose budget is spent is refused (402 budget_exhausted) a request that would start a
// conversation before anything is stored: no session is written and taken out again, keyed or
// not, streamed, in the background or not; a turn on an empty session stores nothing either.
const TOKEN = 'spent-start-token';
const environment = { API_TOKEN: TOKEN, TOKEN_SIGNING_KEY: SIGNING_KEY, DEFAULT_MODEL: 'echo' };

function setup() {
  const store = new CountingStore(new MemoryStore());
  const running = new Set<Promise<unknown>>();
  const app = createApp({
    store: () => store,
    readEnvironment: () => environment,
    log: () => {},
    afterResponse: (task) => {
      running.add(task);
      void task.finally(() => running.delete(task));
    },
  });
  const settled = async () => {
    while (running.size > 0) await Promise.allSettled([...running]);
  };
  const call = async (token: string, path: string, body: unknown, headers: Record<string, string> = {}) => {
    const response = await app.request(`/v1${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
    const text = await response.text();
    await settled();
    return { status: response.status, body: text.startsWith('{') ? JSON.parse(text) : text };
  };
  const keys = async () =>
    (await store.list('', { limit: 1000 })).objects.map((object) => `${object.key} ${object.etag}`);
  /** A token whose budget of one turn its first response spent. */
  const spentToken = async () => {
    const minted = await call(TOKEN, '/tokens', { scopes: ['session:turn'], budget: { max_turns: 1 } });
    const token = minted.body.token as string;
    expect((await call(token, '/responses', { model: 'echo', input: 'spend it' })).status).toBe(200);
    return token;
  };
  /** What `request` left in storage: its answer, the writes it made and the store's objects before and after. */
  const measure = async (request: () => ReturnType<typeof call>) => {
    const before = await keys();
    store.reset();
    const answer = await request();
    const { put, delete: deletes } = store.counts;
    return { answer, writes: { put, delete: deletes }, before, after: await keys() };
  };
  return { call, spentToken, measure };
}

const refusal = (spent: number) => ({
  error: expect.objectContaining({
    code: 'budget_exhausted',
    type: 'insufficient_quota',
    details: { budget: 'token', limit: 'max_turns', spent, value: spent },
  }),
});

describe('a token whose budget is spent', () => {
  it.each([
    ['a response', {}, {}],
    ['a streamed response', { stream: true }, {}],
    ['a background response', { background: true }, {}],
    ['a keyed response', {}, { 'idempotency-key': 'spent-start' }],
  ])('is refused %s that starts a conversation before anything is stored', async (_, extra, headers) => {
    const { call, spentToken, measure } = setup();
    const token = await spentToken();
    const { answer, writes, before, after } = await measure(() =>
      call(token, '/responses', { model: 'echo', input: 'hi', ...extra }, headers),
    );
    expect(answer.status).toBe(402);
    expect(answer.body).toEqual(refusal(1));
    expect(writes).toEqual({ put: 0, delete: 0 });
    expect(after).toEqual(before);
  });

  it('is refused a turn on an empty session before anything is stored', async () => {
    const { call, spentToken, measure } = setup();
    const token = await spentToken();
    expect((await call(TOKEN, '/sessions', { id: 'empty' })).status).toBe(201);
    const { answer, writes, before, after } = await measure(() =>
      call(token, '/sessions/empty/turns', { input: 'hi' }),
    );
    expect(answer.status).toBe(402);
    expect(answer.body).toMatchObject({
      error: { code: 'budget_exhausted', details: { budget: 'token', limit: 'max_turns', spent: 1, value: 1 } },
    });
    expect(writes).toEqual({ put: 0, delete: 0 });
    expect(after).toEqual(before);
  });

  it.each([
    ['', {}],
    ['keyed ', { 'idempotency-key': 'spent-branch' }],
  ])('is refused a %sbranch by its claim, before any fork is made', async (_, headers) => {
    const { call, measure } = setup();
    const minted = await call(TOKEN, '/tokens', { scopes: ['session:turn'], budget: { max_turns: 2 } });
    const token = minted.body.token as string;
    const first = await call(token, '/responses', { input: 'a' });
    expect((await call(token, '/responses', { input: 'b', previous_response_id: first.body.id })).status).toBe(200);
    const { answer, writes, before, after } = await measure(() =>
      call(token, '/responses', { input: 'c', previous_response_id: first.body.id }, headers),
    );
    expect(answer.status).toBe(402);
    expect(answer.body).toEqual(refusal(2));
    expect(writes).toEqual({ put: 0, delete: 0 });
    expect(after).toEqual(before);
  });

  it('still has a keyed response its budget was spent by replayed', async () => {
    const { call, measure } = setup();
    const minted = await call(TOKEN, '/tokens', { scopes: ['session:turn'], budget: { max_turns: 1 } });
    const token = minted.body.token as string;
    const headers = { 'idempotency-key': 'spent-by-it' };
    const first = await call(token, '/responses', { model: 'echo', input: 'hi' }, headers);
    expect(first.status).toBe(200);
    const { answer, writes } = await measure(() => call(token, '/responses', { model: 'echo', input: 'hi' }, headers));
    expect(answer.status).toBe(200);
    expect(answer.body.id).toBe(first.body.id);
    expect(writes.delete).toBe(0);
  });

  it('bound to a session, is answered the 403 of a token that may start no conversation first', async () => {
    const { call, measure } = setup();
    expect((await call(TOKEN, '/sessions', { id: 'bound' })).status).toBe(201);
    const minted = await call(TOKEN, '/tokens', {
      scopes: ['session:turn'],
      session_id: 'bound',
      budget: { max_turns: 1 },
    });
    const token = minted.body.token as string;
    expect((await call(token, '/sessions/bound/turns', { input: 'spend it' })).status).toBe(200);
    const { answer, writes } = await measure(() => call(token, '/responses', { model: 'echo', input: 'hi' }));
    expect(answer.status).toBe(403);
    expect(answer.body.error.message).toContain('cannot start or use another one');
    expect(writes).toEqual({ put: 0, delete: 0 });
  });

  it('is answered 404 for an unknown model first, as its turn would be', async () => {
    const { call, spentToken, measure } = setup();
    const token = await spentToken();
    const { answer, writes } = await measure(() => call(token, '/responses', { model: 'nope:none', input: 'hi' }));
    expect(answer.status).toBe(404);
    expect(writes).toEqual({ put: 0, delete: 0 });
  });
});
