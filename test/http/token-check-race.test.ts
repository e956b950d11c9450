import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { GetOptions, StoredObject } from '../../lib/store/object-store.ts';
import { SIGNING_KEY } from './http-suite.ts';

// A bound token's check (the turn limits', checkRevocation's: functions/auth.ts) reads its
// session's config before the route does. What another request writes between that read and the
// route (the session deleted and created again, the token revoked) is what the route acts on:
// the token is refused as it would be had the check come after, and nothing is stored. The
// inbox's routes check the token again on their own read of the config; a notice whose put lands
// after the session was deleted and created again names the deleted one, and is never delivered.
const TOKEN = 'race-token';
const environment = {
  API_TOKEN: TOKEN,
  TOKEN_SIGNING_KEY: SIGNING_KEY,
  DEFAULT_MODEL: 'echo',
  RATE_LIMIT_TURNS_PER_MINUTE_PER_SESSION: '100',
};

/**
 * A store whose next read of session `s`'s config runs `between` once that read is done (after
 * `skip` reads more, when set).
 */
class RacingStore extends MemoryStore {
  between: (() => Promise<void>) | undefined;
  skip = 0;

  override async get(key: string, options?: GetOptions): Promise<StoredObject | null> {
    const object = await super.get(key, options);
    const between = this.between;
    if (between && key === 'sessions/s/session.json' && this.skip-- === 0) {
      this.between = undefined;
      await between();
    }
    return object;
  }
}

function setup() {
  const store = new RacingStore();
  const app = createApp({ store: () => store, readEnvironment: () => environment, log: () => {} });
  const background: Promise<unknown>[] = [];
  const executionContext = {
    waitUntil: (task: Promise<unknown>) => void background.push(task),
    passThroughOnException: () => {},
    props: {},
  };
  const call = async (token: string, method: string, path: string, body?: unknown) => {
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const init = { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) };
    const response = await app.request(path, init, environment, executionContext);
    const answer = { status: response.status, body: (await response.json().catch(() => null)) as any };
    while (background.length > 0) await Promise.all(background.splice(0));
    return answer;
  };
  /** Session `s` with one turn, and an admin token bound to it. */
  const session = async () => {
    expect((await call(TOKEN, 'POST', '/v1/sessions', { id: 's' })).status).toBe(201);
    expect((await call(TOKEN, 'POST', '/v1/sessions/s/turns', { input: 'first' })).status).toBe(200);
    return (await call(TOKEN, 'POST', '/v1/tokens', { scopes: ['admin'], session_id: 's' })).body.token as string;
  };
  return { store, call, session };
}

describe("a bound token's check, then another request's write, then the route", () => {
  it.each([
    ['a turn under a limit', 'POST', '/v1/sessions/s/turns', { input: 'late' }],
    ['a delete', 'DELETE', '/v1/sessions/s', undefined],
  ] as const)('%s of a session deleted and created again meanwhile is refused', async (_, method, path, body) => {
    const { store, call, session } = setup();
    const token = await session();
    store.between = async () => {
      expect((await call(TOKEN, 'DELETE', '/v1/sessions/s')).status).toBe(204);
      expect((await call(TOKEN, 'POST', '/v1/sessions', { id: 's' })).status).toBe(201);
      expect((await call(TOKEN, 'POST', '/v1/sessions/s/turns', { input: 'again' })).status).toBe(200);
    };
    const answer = await call(token, method, path, body);
    expect(store.between).toBeUndefined();
    expect(answer).toMatchObject({ status: 401, body: { error: { code: 'unauthorized' } } });
    // The session created again is as its own requests left it, and holds nothing of the token's.
    const items = await call(TOKEN, 'GET', '/v1/sessions/s/items');
    expect(items.body.items.map((item: { content: string }) => item.content)).toEqual(['echo: again', 'again']);
    const { objects } = await store.list('sessions/s/turn/');
    expect(new Set(objects.map((object) => object.key.split('/')[3])).size).toBe(1);
  });

  it('a turn under a limit of a token revoked meanwhile is refused', async () => {
    const { store, call, session } = setup();
    const token = await session();
    store.between = async () => {
      expect((await call(TOKEN, 'POST', '/v1/sessions/s/tokens/revoke')).status).toBe(200);
    };
    const answer = await call(token, 'POST', '/v1/sessions/s/turns', { input: 'late' });
    expect(store.between).toBeUndefined();
    expect(answer).toMatchObject({ status: 401, body: { error: { code: 'unauthorized' } } });
    const items = await call(TOKEN, 'GET', '/v1/sessions/s/items');
    expect(items.body.items.map((item: { content: string }) => item.content)).toEqual(['echo: first', 'first']);
  });

  // The inbox's own read of the config (the session the notice names) checks the token again.
  const recreate = (call: ReturnType<typeof setup>['call']) => async () => {
    expect((await call(TOKEN, 'DELETE', '/v1/sessions/s')).status).toBe(204);
    expect((await call(TOKEN, 'POST', '/v1/sessions', { id: 's' })).status).toBe(201);
  };
  it.each([
    ['a notice', 'POST', '/v1/sessions/s/inbox', { name: 'late', content: 'from a deleted session' }],
    ['a listing of the inbox', 'GET', '/v1/sessions/s/inbox', undefined],
  ] as const)('%s of a session deleted and created again meanwhile is refused', async (_, method, path, body) => {
    const { store, call, session } = setup();
    const token = await session();
    store.between = recreate(call);
    const answer = await call(token, method, path, body);
    expect(store.between).toBeUndefined();
    expect(answer).toMatchObject({ status: 401, body: { error: { code: 'unauthorized' } } });
    expect((await store.list('sessions/s/inbox/')).objects).toEqual([]);
  });

  it('a notice whose put lands after the session was deleted and created again never reaches it', async () => {
    const { store, call, session } = setup();
    const token = await session();
    // After the inbox's read of the config (which passed the token), before the notice's put.
    store.skip = 1;
    store.between = recreate(call);
    const posted = await call(token, 'POST', '/v1/sessions/s/inbox', {
      name: 'late',
      content: 'from a deleted session',
    });
    expect(store.between).toBeUndefined();
    expect(posted.status).toBe(201);
    expect((await store.list('sessions/s/inbox/')).objects.map((object) => object.key)).toEqual([
      'sessions/s/inbox/late',
    ]);
    const turn = await call(TOKEN, 'POST', '/v1/sessions/s/turns', { input: 'again' });
    expect(turn.status).toBe(200);
    expect((await call(TOKEN, 'GET', '/v1/sessions/s/turns/1')).body).toMatchObject({
      status: 'completed',
      notices: [],
    });
    expect((await call(TOKEN, 'GET', '/v1/sessions/s/inbox')).body.pending).toEqual([]);
    expect((await call(TOKEN, 'GET', '/v1/sessions/s/inbox/delivered')).body.delivered).toEqual([]);
  });
});

// An import keeps the created_at of the session it was exported from: a notice names the
// incarnation it was posted to by the config's `incarnation` too, which an import does not keep.
it('a notice whose put lands after the session was deleted and imported again never reaches it', async () => {
  const { store, call, session } = setup();
  const token = await session();
  const app = createApp({ store: () => store, readEnvironment: () => environment, log: () => {} });
  const headers = { authorization: `Bearer ${TOKEN}` };
  const lines = await (await app.request('/v1/sessions/s/export', { headers }, environment)).text();
  // After the inbox's read of the config (which passed the token), before the notice's put.
  store.skip = 1;
  store.between = async () => {
    expect((await call(TOKEN, 'DELETE', '/v1/sessions/s')).status).toBe(204);
    const imported = await app.request(
      '/v1/sessions/import',
      { method: 'POST', headers: { ...headers, 'content-type': 'application/x-ndjson' }, body: lines },
      environment,
    );
    expect(imported.status).toBe(201);
  };
  const posted = await call(token, 'POST', '/v1/sessions/s/inbox', { name: 'late', content: 'from a deleted session' });
  expect(store.between).toBeUndefined();
  expect(posted.status).toBe(201);
  const turn = await call(TOKEN, 'POST', '/v1/sessions/s/turns', { input: 'again' });
  expect(turn.status).toBe(200);
  expect(turn.body.context.notices_delivered).toEqual([]);
  expect((await call(TOKEN, 'GET', `/v1/sessions/s/turns/${turn.body.turn}`)).body.notices).toEqual([]);
  expect((await call(TOKEN, 'GET', '/v1/sessions/s/inbox')).body.pending).toEqual([]);
  expect((await call(TOKEN, 'GET', '/v1/sessions/s/inbox/delivered')).body.delivered).toEqual([]);
});
