import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import type { AppOptions } from '../../functions/app-options.ts';
import { WindowLimiter } from '../../functions/rate-limit.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { freshId, SIGNING_KEY, TOKEN, type HttpHarness } from './http-suite.ts';
import { defineRateLimitSuite } from './rate-limit-suite.ts';
import { slowEcho } from '../support/slow-echo.ts';

// The rate limits through the app on Node: the in-process limiter the settings drive. The
// Rate Limiting binding runs the same suite inside workerd (test/workers/http-tokens.test.ts).
let now = Date.parse('2026-01-01T00:00:00Z');
const store = new MemoryStore();
const app = createApp({
  store: () => store,
  readEnvironment: (c) => c.env ?? {},
  log: () => undefined,
  clock: () => new Date(now),
});
const environment = {
  API_TOKEN: TOKEN,
  TOKEN_SIGNING_KEY: SIGNING_KEY,
  ALLOW_ANONYMOUS: 'false',
  DEFAULT_MODEL: 'echo',
};
const harness: HttpHarness = {
  fetch: async (path, init) => app.request(path, init, environment),
  fetchWithEnv: async (overrides, path, init) => app.request(path, init, { ...environment, ...overrides }),
  store,
  keyPrefix: '',
  logged: [],
};

defineRateLimitSuite(
  'Node (in-process)',
  harness,
  {
    session: { RATE_LIMIT_TURNS_PER_MINUTE_PER_SESSION: '3' },
    token: { RATE_LIMIT_TURNS_PER_MINUTE_PER_TOKEN: '3' },
  },
  'sliding',
);

describe('the in-process limiter', () => {
  const limits = { RATE_LIMIT_TURNS_PER_MINUTE_PER_SESSION: '2' };
  const turn = (id: string) =>
    harness.fetchWithEnv(limits, `/v1/sessions/${id}/turns`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ input: 'hi' }),
    });

  it('lets a session take turns again once its oldest turn leaves the minute, as Retry-After said', async () => {
    const id = freshId('window');
    await harness.fetch('/v1/sessions', {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ id }),
    });
    expect((await turn(id)).status).toBe(200);
    now += 20_000;
    expect((await turn(id)).status).toBe(200);
    const refused = await turn(id);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('40');
    now += 39_000;
    expect((await turn(id)).status).toBe(429);
    now += 1_000;
    expect((await turn(id)).status).toBe(200);
  });

  it('counts no request whose body is refused (413, 400) before it counts', async () => {
    const id = freshId('refused');
    const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    await harness.fetch('/v1/sessions', { method: 'POST', headers, body: JSON.stringify({ id }) });
    const one = { RATE_LIMIT_TURNS_PER_MINUTE_PER_SESSION: '1', MAX_BODY_BYTES: '1000' };
    const send = (body: string, type = 'application/json') =>
      harness.fetchWithEnv(one, `/v1/sessions/${id}/turns`, {
        method: 'POST',
        headers: { ...headers, 'content-type': type },
        body,
      });
    const refused = [
      await send(JSON.stringify({ input: 'x'.repeat(2000) })),
      await send('input=hi', 'text/plain'),
      await send('{"input": '),
    ];
    expect(refused.map((response) => response.status)).toEqual([413, 400, 400]);
    expect((await send(JSON.stringify({ input: 'hi' }))).status).toBe(200);
    expect((await send(JSON.stringify({ input: 'hi' }))).status).toBe(429);
  });

  it('answers a turn path whose session id is not valid percent-encoding 400, limited or not', async () => {
    for (const overrides of [{}, limits])
      for (const id of ['%', '%E0%A4%A']) {
        const response = await harness.fetchWithEnv(overrides, `/v1/sessions/${id}/turns`, {
          method: 'POST',
          headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
          body: JSON.stringify({ input: 'hi' }),
        });
        expect(response.status).toBe(400);
      }
  });

  it('a setting that is not a positive whole number is 503 not_configured naming it', async () => {
    const response = await harness.fetchWithEnv({ RATE_LIMIT_TURNS_PER_MINUTE_PER_TOKEN: '0' }, '/v1/sessions', {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(response.status).toBe(503);
    expect(((await response.json()) as any).error.details.variable).toBe('RATE_LIMIT_TURNS_PER_MINUTE_PER_TOKEN');
  });

  it('forgets keys whose turns all left the window once it holds many', () => {
    let time = 0;
    const limiter = new WindowLimiter(() => new Date(time));
    for (let key = 0; key <= 10_001; key++) limiter.take(`k${key}`, 1);
    time = 61_000;
    limiter.take('fresh', 1);
    expect(limiter.size()).toBe(1);
  });

  it("gives back the turn a request counted, not the key's newest", () => {
    let time = 0;
    const limiter = new WindowLimiter(() => new Date(time));
    // A request counted at 0 s, one at 30 s; the first names a session that does not exist.
    const first = limiter.takeTimed('session:s', 2);
    time = 30_000;
    expect(limiter.take('session:s', 2)).toBeNull();
    expect(first.wait).toBeNull();
    limiter.giveBack('session:s', first.at);
    time = 45_000;
    expect(limiter.take('session:s', 2)).toBeNull();
    // Held: the turns of 30 s and 45 s; the one of 30 s leaves the window at 90 s.
    time = 46_000;
    expect(limiter.take('session:s', 2)).toBe(44);
    // A turn the window let go (a request that ran past it) takes nothing back.
    time = 100_000;
    const late = limiter.takeTimed('session:t', 1);
    time = 161_000;
    expect(limiter.take('session:t', 1)).toBeNull();
    limiter.giveBack('session:t', late.at);
    expect(limiter.take('session:t', 1)).toBe(60);
  });

  it('looks over its keys a bounded number of times a take, however many stay in the window', () => {
    // A token naming a new session id on every turn adds a key each time (the route refuses it after).
    const limiter = new WindowLimiter(() => new Date(0));
    const keys = 40_000;
    for (let key = 0; key < keys; key++) limiter.take(`session:s${key}`, 1);
    expect(limiter.size()).toBe(keys);
    expect(limiter.scanned()).toBeLessThanOrEqual(4 * keys);
  });
});

/** An app whose in-process limiter (returned, to look into) takes one turn a minute per session. */
function limitedToOneTurn(options: Pick<AppOptions, 'wrapModel'> = {}) {
  const limiter = new WindowLimiter(() => new Date(now));
  const limited = createApp({
    store: () => store,
    readEnvironment: (c) => c.env ?? {},
    log: () => undefined,
    clock: () => new Date(now),
    turnLimiter: limiter,
    ...options,
  });
  const env = { ...environment, RATE_LIMIT_TURNS_PER_MINUTE_PER_SESSION: '1' };
  const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
  return { limiter, limited, env, headers };
}

describe('a turn naming a session that does not exist', () => {
  it('leaves no key in the in-process limiter: its 404 gives the session its turn back', async () => {
    // An unbound token naming a new made-up session id on every request would otherwise add a key each time.
    const { limiter, limited, env, headers } = limitedToOneTurn();
    const send = async (path: string, body: unknown, extra: Record<string, string> = {}) =>
      (
        await limited.request(
          path,
          { method: 'POST', headers: { ...headers, ...extra }, body: JSON.stringify(body) },
          env,
        )
      ).status;
    const missing = () => freshId('missing');
    const statuses = [
      await send(`/v1/sessions/${missing()}/turns`, { input: 'hi' }),
      await send(`/v1/sessions/${missing()}/compact`, {}),
      await send('/v1/responses', { model: 'echo', input: 'hi', conversation: missing() }),
      await send('/v1/responses', { model: 'echo', input: 'hi', previous_response_id: `resp_${missing()}_1_1_2` }),
      await send(
        '/v1/chat/completions',
        { model: 'echo', messages: [{ role: 'user', content: 'hi' }] },
        {
          'x-tailgate-session': missing(),
        },
      ),
    ];
    // A missing previous response is 400 previous_response_not_found, as OpenAI answers it.
    expect(statuses).toEqual([404, 404, 404, 400, 404]);
    expect(limiter.size()).toBe(0);
    // A session that exists keeps its turn counted.
    const id = freshId('exists');
    expect(
      (await limited.request('/v1/sessions', { method: 'POST', headers, body: JSON.stringify({ id }) }, env)).status,
    ).toBe(201);
    expect(await send(`/v1/sessions/${id}/turns`, { input: 'hi' })).toBe(200);
    expect(limiter.size()).toBe(1);
    expect(await send(`/v1/sessions/${id}/turns`, { input: 'hi' })).toBe(429);
  });
});

describe('a turn whose session is deleted while it runs', () => {
  it('keeps its turn counted: its 404 comes after the model was called', async () => {
    const slow = slowEcho();
    const { limiter, limited, env, headers } = limitedToOneTurn({ wrapModel: () => slow.model });
    const id = freshId('deleted');
    const create = () =>
      limited.request('/v1/sessions', { method: 'POST', headers, body: JSON.stringify({ id }) }, env);
    expect((await create()).status).toBe(201);
    const turn = (input: string) =>
      limited.request(`/v1/sessions/${id}/turns`, { method: 'POST', headers, body: JSON.stringify({ input }) }, env);
    const running = turn('slow');
    await slow.reached;
    const deleted = await limited.request(`/v1/sessions/${id}`, { method: 'DELETE', headers }, env);
    expect(deleted.status).toBeLessThan(300);
    slow.release();
    expect((await running).status).toBe(404);
    // The model took the turn: the session id's count stays, as its limit's one turn a minute.
    expect(limiter.size()).toBe(1);
    expect((await create()).status).toBe(201);
    expect((await turn('hi')).status).toBe(429);
  });
});

describe('a manual compaction whose session is deleted while its summary call runs', () => {
  it('keeps its turn counted: its 404 (session not found) comes after the model was called', async () => {
    const slow = slowEcho();
    const { limiter, limited, env, headers } = limitedToOneTurn({ wrapModel: () => slow.model });
    const id = freshId('compacted');
    const send = (path: string, body: unknown, method = 'POST') =>
      limited.request(path, { method, headers, ...(body ? { body: JSON.stringify(body) } : {}) }, env);
    expect((await send('/v1/sessions', { id })).status).toBe(201);
    const items = ['plan the trip', 'to Paris', 'in May'].map((content) => ({
      type: 'message',
      role: 'user',
      content,
    }));
    expect((await send(`/v1/sessions/${id}/items`, { items })).status).toBe(201);
    // The summary's call is held (slowEcho holds a prompt that opens with a system message).
    const compacting = send(`/v1/sessions/${id}/compact`, { keep_tokens: 0 });
    await slow.reached;
    expect((await send(`/v1/sessions/${id}`, undefined, 'DELETE')).status).toBe(204);
    slow.release();
    const answer = await compacting;
    expect(answer.status).toBe(404);
    expect(limiter.size()).toBe(1);
    expect((await send('/v1/sessions', { id })).status).toBe(201);
    expect((await send(`/v1/sessions/${id}/turns`, { input: 'hi' })).status).toBe(429);
  });
});

describe("a request a session's limit refuses", () => {
  it("takes no turn of its token's limit: the token's other sessions go on", async () => {
    const both = { RATE_LIMIT_TURNS_PER_MINUTE_PER_SESSION: '1', RATE_LIMIT_TURNS_PER_MINUTE_PER_TOKEN: '3' };
    const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    const limited = createApp({
      store: () => store,
      readEnvironment: (c) => c.env ?? {},
      log: () => undefined,
      clock: () => new Date(now),
    });
    const send = (path: string, body: unknown) =>
      limited.request(path, { method: 'POST', headers, body: JSON.stringify(body) }, { ...environment, ...both });
    const [busy, other, third] = [freshId('busy'), freshId('other'), freshId('third')];
    for (const id of [busy, other, third]) expect((await send('/v1/sessions', { id })).status).toBe(201);
    // One turn of the busy session, then refusals of its limit, which leave the token's two other turns.
    expect((await send(`/v1/sessions/${busy}/turns`, { input: 'hi' })).status).toBe(200);
    const refusals: unknown[] = [];
    for (let refused = 0; refused < 3; refused++) {
      const response = await send(`/v1/sessions/${busy}/turns`, { input: 'hi' });
      refusals.push([response.status, ((await response.json()) as any).error.details.per]);
    }
    expect(refusals).toEqual(Array(3).fill([429, 'session']));
    const taken = [
      await send('/v1/responses', { model: 'echo', input: 'hi', conversation: other }),
      await send(`/v1/sessions/${third}/turns`, { input: 'hi' }),
    ];
    expect(taken.map((response) => response.status)).toEqual([200, 200]);
    // The token's limit (3) is reached by the turns taken alone.
    const over = await send(`/v1/sessions/${third}/turns`, { input: 'hi' });
    expect(over.status).toBe(429);
    expect(((await over.json()) as any).error.details.per).toBe('token');
  });
});

describe('the session a turn names', () => {
  it("counts a client loop's step that resends its whole history under the conversation it goes on in", async () => {
    // The AI SDK's and @openai/agents' loops name neither previous_response_id nor conversation:
    // each step resends the history, and the history index finds the conversation it continues.
    const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    const limited = { RATE_LIMIT_TURNS_PER_MINUTE_PER_SESSION: '2' };
    const metadata = { loop: freshId('loop') };
    const step = async (input: unknown[]) => {
      const response = await harness.fetchWithEnv(limited, '/v1/responses', {
        method: 'POST',
        headers,
        body: JSON.stringify({ model: 'echo', input, metadata }),
      });
      return {
        status: response.status,
        retryAfter: response.headers.get('retry-after'),
        body: (await response.json()) as any,
      };
    };
    let history: unknown[] = [{ role: 'user', content: 'step 0' }];
    const first = await step(history);
    expect(first.status).toBe(200);
    const conversation = first.body.conversation.id;
    const statuses: number[] = [];
    for (let n = 1; n <= 3; n++) {
      history = [...history, ...first.body.output, { role: 'user', content: `step ${n}` }];
      const answer = await step(history);
      statuses.push(answer.status);
      if (answer.status !== 200) {
        expect(answer.body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limited' });
        expect(Number(answer.retryAfter)).toBeGreaterThanOrEqual(1);
        break;
      }
      expect(answer.body.conversation.id).toBe(conversation);
      first.body.output = answer.body.output;
    }
    // The first step started the conversation, uncounted under it (no session yet); the next two
    // are its limit's two turns, and the third is refused.
    expect(statuses).toEqual([200, 200, 429]);
  });

  it('is counted only when it is a session id: a long or odd name keeps no key (the route refuses it)', async () => {
    const keys: string[] = [];
    const recording = {
      TURN_LIMIT_PER_SESSION: {
        limit: async ({ key }: { key: string }) => {
          keys.push(key);
          return { success: true };
        },
      },
    } as unknown as Record<string, string>;
    const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    const long = 'x'.repeat(100_000);
    const send = (path: string, body: unknown, extra: Record<string, string> = {}) =>
      harness.fetchWithEnv(recording, path, {
        method: 'POST',
        headers: { ...headers, ...extra },
        body: JSON.stringify(body),
      });
    const chat = { model: 'echo', messages: [{ role: 'user', content: 'hi' }] };
    const refused = [
      await send('/v1/responses', { model: 'echo', input: 'hi', conversation: long }),
      await send('/v1/responses', { model: 'echo', input: 'hi', conversation: { id: 'a/b' } }),
      await send('/v1/chat/completions', chat, { 'x-tailgate-session': 'x'.repeat(8_000) }),
      await send(`/v1/sessions/${'y'.repeat(8_000)}/turns`, { input: 'hi' }),
    ];
    expect(refused.map((response) => response.status)).toEqual([400, 404, 400, 400]);
    expect(keys.filter((key) => !/^session:[A-Za-z0-9_-]{1,64}$/.test(key))).toEqual([]);
    const id = freshId('named');
    expect(
      (await harness.fetch('/v1/sessions', { method: 'POST', headers, body: JSON.stringify({ id }) })).status,
    ).toBe(201);
    expect((await send(`/v1/sessions/${id}/turns`, { input: 'hi' })).status).toBe(200);
    expect(keys).toEqual([`session:${id}`]);
  });
});

describe('a Workers Rate Limiting binding', () => {
  it('holds the limit: a refusal says details.limit null even with the variable set', async () => {
    const bound = {
      TURN_LIMIT_PER_SESSION: { limit: async () => ({ success: false }) },
      RATE_LIMIT_TURNS_PER_MINUTE_PER_SESSION: '1000',
    } as unknown as Record<string, string>;
    const id = freshId('bound');
    const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    const created = await harness.fetch('/v1/sessions', { method: 'POST', headers, body: JSON.stringify({ id }) });
    expect(created.status).toBe(201);
    const refused = await harness.fetchWithEnv(bound, `/v1/sessions/${id}/turns`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ input: 'hi' }),
    });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('60');
    const details = ((await refused.json()) as any).error.details;
    expect(details).toEqual({ per: 'session', limit: null, retry_after_seconds: 60 });
  });
});

describe('a Rate Limiting binding that fails', () => {
  it('lets the turn through and logs an error naming the binding, rather than answering 500', async () => {
    const logged: string[] = [];
    const app = createApp({
      store: () => store,
      readEnvironment: (c) => c.env ?? {},
      log: (message) => logged.push(message),
      clock: () => new Date(now),
    });
    const failing = {
      limit: async () => {
        throw new Error('rate limiter unavailable');
      },
    };
    const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    const env = { ...environment, TURN_LIMIT_PER_SESSION: failing, TURN_LIMIT_PER_TOKEN: failing };
    const id = freshId('binding-down');
    await app.request('/v1/sessions', { method: 'POST', headers, body: JSON.stringify({ id }) }, env);
    const response = await app.request(
      `/v1/sessions/${id}/turns`,
      { method: 'POST', headers, body: JSON.stringify({ input: 'hi' }) },
      env,
    );
    expect(response.status).toBe(200);
    expect(logged.filter((line) => line.includes('TURN_LIMIT_PER_TOKEN'))).toHaveLength(1);
    expect(logged.filter((line) => line.includes('TURN_LIMIT_PER_SESSION'))).toHaveLength(1);
  });
});
