import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { CountingStore } from '../support/counting-store.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { echoModel } from '../../lib/models/echo.ts';
import type { Model } from '../../lib/models/model.ts';
import { SIGNING_KEY } from '../http/http-suite.ts';

// A token bound to a session counting a whole history it resends, neither previous_response_id nor
// conversation set (lib/openai/input-tokens.ts): the count finds the session as POST /v1/responses
// finds it (lib/openai/history-index.ts). The history of its own session is counted, as an unbound
// token counts it, and nothing is written but a dead response after that history, which the create
// takes out too; any other inline input is the create's 403.

const TOKEN = 'bound-count-token';
const environment = { API_TOKEN: TOKEN, TOKEN_SIGNING_KEY: SIGNING_KEY, DEFAULT_MODEL: 'echo' };

function world() {
  const store = new CountingStore(new MemoryStore());
  const tasks: Promise<unknown>[] = [];
  const app = createApp({
    store: () => store,
    readEnvironment: () => environment,
    log: () => undefined,
    info: () => undefined,
    logLine: () => undefined,
    afterResponse: (task) => void tasks.push(task),
  });
  /** What the app answered `token`, once the work it left after its answer is done. */
  const call = async (token: string, path: string, body: unknown) => {
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const response = await app.request(path, { method: 'POST', headers, body: JSON.stringify(body) }, environment);
    const answer = {
      status: response.status,
      challenge: response.headers.get('www-authenticate'),
      body: (await response.json()) as any,
    };
    while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
    return answer;
  };
  const respond = async (input: unknown[]) => {
    const answered = await call(TOKEN, '/v1/responses', { model: 'echo', input });
    expect(answered.status, JSON.stringify(answered.body)).toBe(200);
    return answered.body;
  };
  const bound = async (sessionId: string) => {
    const minted = await call(TOKEN, '/v1/tokens', { scopes: ['session:turn'], session_id: sessionId });
    expect(minted.status, JSON.stringify(minted.body)).toBe(201);
    return minted.body.token as string;
  };
  /** The count of `body` by `token`, and the storage operations it made. */
  const count = async (token: string, body: unknown) => {
    store.reset();
    const counted = await call(token, '/v1/responses/input_tokens', body);
    const { put, delete: deletes } = store.counts;
    return { counted, written: { put, delete: deletes }, operations: store.operations };
  };
  return { call, respond, bound, count };
}

const user = (text: string) => ({ role: 'user', content: text });

describe('responses.inputTokens.count of a whole history resent by a token bound to a session', () => {
  it('counts its own history as an unbound token does, writing nothing; its create goes on there', async () => {
    const { call, respond, bound, count } = world();
    const first = await respond([user('hello world')]);
    const own = first.conversation.id as string;
    const token = await bound(own);
    const body = { model: 'echo', input: [user('hello world'), ...first.output, user('and then?')] };
    const mine = await count(token, body);
    expect(mine.counted.status, JSON.stringify(mine.counted.body)).toBe(200);
    expect(mine.written).toEqual({ put: 0, delete: 0 });
    // An unbound token's count of it, as before: the same number, no storage operation at all.
    const admin = await count(TOKEN, body);
    expect(admin.counted).toEqual(mine.counted);
    expect(admin.operations).toBe(0);
    expect(mine.counted.body).toEqual({ object: 'response.input_tokens', input_tokens: expect.any(Number) });
    expect(mine.counted.body.input_tokens).toBeGreaterThan(
      (await count(TOKEN, { model: 'echo', input: 'and then?' })).counted.body.input_tokens,
    );
    // The create of that body by the bound token goes on in its session.
    const created = await call(token, '/v1/responses', body);
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    expect(created.body.conversation.id).toBe(own);
  });

  it("answers the create's 403 for an edited history, another session's, and inline input alone", async () => {
    const { call, respond, bound, count } = world();
    const first = await respond([user('hello world')]);
    const other = await respond([user('somewhere else')]);
    const token = await bound(first.conversation.id);
    const inputs = [
      // Edited: a new conversation, which the bound token may not start.
      [user('hello there'), ...first.output, user('and then?')],
      // Another session's history: the index finds it, the token may not use it.
      [user('somewhere else'), ...other.output, user('and then?')],
      [user('hello world')],
    ];
    for (const input of inputs) {
      const body = { model: 'echo', input };
      const refused = await count(token, body);
      expect(refused.counted.status, JSON.stringify(refused.counted.body)).toBe(403);
      expect(refused.counted.body.error.code).toBe('forbidden');
      expect(refused.written).toEqual({ put: 0, delete: 0 });
      expect(refused.counted).toEqual(await call(token, '/v1/responses', body));
      // An unbound token counts each of them.
      expect((await count(TOKEN, body)).counted.status).toBe(200);
    }
  });
  it("refuses a loop's history indexed under a field the count does not take (`user`): its scope differs", async () => {
    const { call, bound, count } = world();
    const first = await call(TOKEN, '/v1/responses', { model: 'echo', input: [user('hello world')], user: 'u-1' });
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    const token = await bound(first.body.conversation.id);
    const input = [user('hello world'), ...first.body.output, user('and then?')];
    const refused = await count(token, { model: 'echo', input });
    expect(refused.counted.status, JSON.stringify(refused.counted.body)).toBe(403);
    // The loop's own next step, sending `user` again, goes on in the token's session.
    const created = await call(token, '/v1/responses', { model: 'echo', input, user: 'u-1' });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    expect(created.body.conversation.id).toBe(first.body.conversation.id);
  });
});

describe('responses.inputTokens.count by a bound token of a history whose next step died', () => {
  it('takes that dead response out first, as the create would, then counts', async () => {
    const memory = new MemoryStore();
    const store = new CountingStore(memory);
    const leased = { ...environment, TURN_LEASE_MS: '3000' };
    let offset = 0;
    let dead = false;
    let called = () => {};
    const modelCalled = new Promise<void>((resolve) => (called = resolve));
    const killed = new AbortController();
    // Never answers: its process dies once it is called, its store refusing everything from then on.
    const hanging: Model = {
      ...echoModel,
      generate: () => {
        dead = true;
        called();
        return new Promise((_, reject) => killed.signal.addEventListener('abort', () => reject(new Error('killed'))));
      },
    };
    const tasks: Promise<unknown>[] = [];
    const appOf = (dying: boolean) =>
      createApp({
        store: () => (dying ? new FaultyStore(store).failWhen(() => dead) : store),
        readEnvironment: () => leased,
        clock: () => new Date(Date.now() + offset),
        ...(dying ? { wrapModel: () => hanging } : {}),
        log: () => undefined,
        info: () => undefined,
        logLine: () => undefined,
        afterResponse: (task) => void tasks.push(task),
      });
    const call = async (app: ReturnType<typeof createApp>, token: string, path: string, body: unknown) => {
      const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
      const response = await app.request(path, { method: 'POST', headers, body: JSON.stringify(body) }, leased);
      const answer = { status: response.status, body: (await response.json()) as any };
      while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
      return answer;
    };
    const live = appOf(false);
    const first = (await call(live, TOKEN, '/v1/responses', { model: 'echo', input: [user('hello world')] })).body;
    const own = first.conversation.id as string;
    const minted = await call(live, TOKEN, '/v1/tokens', { scopes: ['session:turn'], session_id: own });
    const token = minted.body.token as string;
    const body = { model: 'echo', input: [user('hello world'), ...first.output, user('and then?')] };
    // The step's create dies mid-turn: its turn stays open, answered at its end.
    const dying = call(appOf(true), TOKEN, '/v1/responses', body).catch(() => undefined);
    await modelCalled;
    killed.abort();
    await dying;
    offset = 60_000;
    store.reset();
    const counted = await call(live, token, '/v1/responses/input_tokens', body);
    expect(counted.status, JSON.stringify(counted.body)).toBe(200);
    // The count's one write: the dead response taken out, as by the create that follows.
    expect(store.counts.delete).toBeGreaterThan(0);
    const created = await call(live, token, '/v1/responses', body);
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    expect(created.body.conversation.id).toBe(own);
  });
});
