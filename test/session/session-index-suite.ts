import { describe, expect, it } from 'vitest';
import { NotFoundError } from '../../lib/errors.ts';
import type { Item } from '../../lib/items.ts';
import { indexEntryKey, indexPrefix, parseIndexKey } from '../../lib/session/log/session-index.ts';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { inbox, SessionLog } from '../support/session-log.ts';
import { CountingStore } from '../support/counting-store.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { appendItems } from '../../lib/turn/index.ts';
import { EMPTY_LEDGER, sessionUsage, turnUsage } from '../../lib/ledger/usage.ts';

/**
 * The session listing through the session index (lib/session/log/session-index.ts): one list
 * call a page, rows right after every kind of write, duplicates from a stopped writer shown
 * once, newest first across pages. Runs on the memory store and on S3 (fauxqs).
 */
export function defineSessionIndexSuite(label: string, makeStore: () => ObjectStore): void {
  let prefixes = 0;
  /** A log of its own (its own key prefix), with a clock one second apart per reading. */
  function setup(wrap: (store: ObjectStore) => ObjectStore = (store) => store) {
    const keyPrefix = `index-${Date.now()}-${prefixes++}-${Math.random().toString(36).slice(2)}/`;
    const store = wrap(makeStore());
    let now = Date.parse('2026-01-01T00:00:00Z');
    const clock = () => {
      now += 1000;
      return new Date(now);
    };
    const log = new SessionLog(store, { keyPrefix, clock });
    const tasks: Promise<unknown>[] = [];
    const background = (task: Promise<unknown>) => {
      tasks.push(task);
    };
    const settle = async () => {
      while (tasks.length > 0) await tasks.shift();
    };
    const list = (options: { after?: string; limit?: number } = {}) =>
      log.listSessions({ limit: options.limit ?? 100, background, ...(options.after ? { after: options.after } : {}) });
    // The sessions' entries (not the markers a delete leaves, lib/session/log/index-markers.ts).
    const entries = async () =>
      (await store.list(indexPrefix(keyPrefix), { limit: 1000 })).objects
        .map((o) => o.key)
        .filter((key) => parseIndexKey(keyPrefix, key) !== null);
    return { store, log, keyPrefix, list, background, settle, entries };
  }

  const user = (content: string): Item => ({ type: 'message', role: 'user', content });

  /**
   * A store wrapper whose holds each stop the first call they match (by method and key, the keys
   * of a delete of several joined by commas) until opened: `reached` tells that the call is held.
   */
  function holding() {
    const holds: { matches: (method: string, key: string) => boolean; reached: () => void; open: Promise<void> }[] = [];
    const hold = (matches: (method: string, key: string) => boolean) => {
      let open = () => {};
      const reached = new Promise<void>((resolve) => {
        holds.push({ matches, reached: resolve, open: new Promise<void>((release) => (open = release)) });
      });
      return { reached, open: () => open() };
    };
    const wrap = (store: ObjectStore): ObjectStore =>
      new Proxy(store, {
        get(target, property) {
          const value = Reflect.get(target, property, target) as unknown;
          if (typeof value !== 'function') return value;
          return async (key: unknown, ...rest: unknown[]) => {
            const index = holds.findIndex((held) => held.matches(String(property), String(key)));
            if (index >= 0) {
              const [held] = holds.splice(index, 1);
              held!.reached();
              await held!.open;
            }
            return (value as (...args: unknown[]) => unknown).call(target, key, ...rest);
          };
        },
      });
    return { hold, wrap };
  }

  async function turn(log: SessionLog, id: string, calls = 0) {
    const begun = await log.beginTurn(id, { input: [user('go')] });
    if (begun.kind !== 'claimed') throw new Error('expected a claimed turn');
    const output = Array.from({ length: calls }, (_, index) => ({
      type: 'function_call' as const,
      call_id: `c${begun.turn.turn}-${index}`,
      name: 'read',
      arguments: '{}',
    }));
    // 1,000 input tokens (400 read from the cache, 100 written to it), 50 out: 0.0011 USD at these prices.
    const usage = turnUsage(
      {
        input_tokens: 1000,
        cached_input_tokens: 400,
        cache_write_tokens: 100,
        output_tokens: 50,
        reasoning_tokens: 20,
      },
      { input: 1, cached_input: 0.5, cache_write: 2, output: 4 },
    );
    await log.completeTurn(begun.turn, { status: 'completed', output, receipt: {}, usage });
    await log.refreshIndex(id);
  }

  /**
   * Session `id` of two turns (the first with a call) on a log whose store calls `hold` stops, with
   * rules picking the calls on its index entries: a put of one, a listing of one session's.
   */
  async function twoTurnsHeld(id: string) {
    const { hold, wrap } = holding();
    const world = setup(wrap);
    await world.log.create({ id });
    await turn(world.log, id, 1);
    await turn(world.log, id);
    const isEntry = (key: string) => key.startsWith(indexPrefix(world.keyPrefix));
    const entryPut = (method: string, key: string) => method === 'put' && isEntry(key);
    const entryList = (method: string, key: string) =>
      method === 'list' && isEntry(key) && key !== indexPrefix(world.keyPrefix);
    return { ...world, hold, isEntry, entryPut, entryList };
  }

  describe(`${label}: session index`, () => {
    it('a page of 50 sessions is one list call and no get, newest created first', async () => {
      const counting = { store: undefined as CountingStore | undefined };
      const { log, list } = setup((store) => (counting.store = new CountingStore(store)));
      const ids = Array.from({ length: 50 }, (_, index) => `s${String(index).padStart(2, '0')}`);
      for (const id of ids) await log.create({ id, metadata: { name: id } });
      await turn(log, 's07', 1);
      counting.store!.reset();
      const page = await list({ limit: 50 });
      const { list: lists, get, head } = counting.store!.counts;
      expect({ lists, get, head }).toEqual({ lists: 1, get: 0, head: 0 });
      expect(page.sessions.map((row) => row.id)).toEqual([...ids].reverse());
      expect(page.sessions.find((row) => row.id === 's07')).toMatchObject({
        counts: { items: 2, turns: 1, tool_calls: 1 },
        metadata: { name: 's07' },
      });
    });

    it('rows follow create, turns, appends, PATCH, delete and a re-created id', async () => {
      const { log, list, background, settle, entries } = setup();
      const created = await log.create({ id: 'x', metadata: { team: 'red' } });
      const row = async () => (await list()).sessions.find((session) => session.id === 'x');
      expect(await row()).toEqual({
        id: 'x',
        created_at: created.created_at,
        metadata: { team: 'red' },
        metadata_complete: true,
        counts: { items: 0, turns: 0, tool_calls: 0 },
        usage: sessionUsage(EMPTY_LEDGER),
        last_activity_at: created.created_at,
        expires_at: null,
      });
      await turn(log, 'x', 2);
      await turn(log, 'x');
      const afterTurn = await row();
      expect(afterTurn?.counts).toEqual({ items: 4, turns: 2, tool_calls: 2 });
      // The totals the row carries in its key are the session's, to the nano-dollar.
      expect(afterTurn?.usage).toEqual((await log.get('x')).usage);
      expect(afterTurn?.usage).toMatchObject({
        turns: 2,
        input_tokens: 2000,
        cached_input_tokens: 800,
        cache_write_tokens: 200,
        output_tokens: 100,
        reasoning_tokens: 40,
        cost_usd: 0.0022,
        cache_read_share: 0.4,
      });
      expect(Date.parse(afterTurn!.last_activity_at!)).toBeGreaterThan(Date.parse(created.created_at));
      // An append through the pipeline writes the row after its response.
      const services = { env: {}, background, log: () => undefined, inbox, sessions: log };
      await appendItems(services, 'x', [user('more'), user('again')]);
      await settle();
      expect((await row())?.counts).toEqual({ items: 6, turns: 2, tool_calls: 2 });
      // An append carries the totals on.
      expect((await row())?.usage).toEqual(afterTurn?.usage);
      await log.update('x', { metadata: { team: 'blue', note: 'ü ✓' } });
      expect(await row()).toMatchObject({ metadata: { team: 'blue', note: 'ü ✓' }, counts: { items: 6, turns: 2 } });
      expect(await entries()).toHaveLength(1);
      await log.delete('x');
      expect(await row()).toBeUndefined();
      expect(await entries()).toEqual([]);
      const again = await log.create({ id: 'x', metadata: { team: 'green' } });
      expect(await row()).toMatchObject({
        created_at: again.created_at,
        metadata: { team: 'green' },
        counts: { items: 0, turns: 0, tool_calls: 0 },
      });
      expect(await entries()).toHaveLength(1);
    });

    it('a session whose totals pass what the key holds as a safe integer is listed, at that most', async () => {
      const { log, list } = setup();
      await log.create({ id: 'costly' });
      const begun = await log.beginTurn('costly', { input: [user('go')] });
      if (begun.kind !== 'claimed') throw new Error('expected a claimed turn');
      const usage = { ...turnUsage({ input_tokens: 10, output_tokens: 1 }, undefined), cost_usd: 10_000_000 };
      await log.completeTurn(begun.turn, { status: 'completed', output: [], receipt: {}, usage });
      await log.refreshIndex('costly');
      expect((await log.get('costly')).usage.cost_usd).toBe(10_000_000);
      const row = (await list()).sessions.find((session) => session.id === 'costly');
      expect(row?.usage).toMatchObject({ turns: 1, input_tokens: 10, cost_usd: Number.MAX_SAFE_INTEGER / 1e9 });
    });

    it(
      'a writer stopped between its put and its delete, ' + 'or a late stale write, still lists the session once',
      async () => {
        const faults = { store: undefined as FaultyStore | undefined };
        const { log, list, settle, entries, keyPrefix } = setup((store) => (faults.store = new FaultyStore(store)));
        await log.create({ id: 'y' });
        await log.create({ id: 'z' });
        faults.store!.failWhen(
          ({ operation, key }) => operation === 'delete' && key.startsWith(indexPrefix(keyPrefix)),
          {
            times: 1,
          },
        );
        await log.append('y', [user('one')]);
        await expect(log.refreshIndex('y')).rejects.toThrow();
        expect(await entries()).toHaveLength(3);
        expect((await list()).sessions.map((row) => [row.id, row.counts?.items])).toEqual([
          ['z', 0],
          ['y', 1],
        ]);
        await settle();
        expect(await entries()).toHaveLength(2);
        await turn(log, 'y');
        // The entry of an older state, written late (reordered background writes).
        const stale = indexEntryKey(keyPrefix, {
          id: 'y',
          createdMs: Date.parse((await log.get('y')).created_at),
          counts: { items: 1, turns: 0, tool_calls: 0 },
          lastActivityMs: 0,
          ledger: EMPTY_LEDGER,
          expiresAfterDays: null,
          metadata: {},
        });
        await faults.store!.put(stale, '');
        const page = await list();
        expect(page.sessions.map((row) => [row.id, row.counts])).toEqual([
          ['z', { items: 0, turns: 0, tool_calls: 0 }],
          ['y', { items: 2, turns: 1, tool_calls: 0 }],
        ]);
        await settle();
        expect(await entries()).toHaveLength(2);
      },
    );

    it('a writer stopped after its entry landed past a delete leaves no row of the session deleted', async () => {
      // The session never expires (no expires_after_days, no SESSION_TTL_DAYS): no sweep would take the entry.
      const { store, log, list, settle, entries, keyPrefix } = setup();
      await log.create({ id: 'kept' });
      await log.create({ id: 'gone', metadata: { v: 1 } });
      const { indexed } = await log.append('gone', [user('one')]);
      await log.delete('gone');
      // The append's background refresh writes the state the append wrote: its put lands after
      // the delete's clean-up, and its process stops at its config check (nothing after runs).
      const faults = new FaultyStore(store).failWhen(
        ({ operation, key }) => operation === 'get' && key === sessionConfigKey(keyPrefix, 'gone'),
      );
      await expect(new SessionLog(faults, { keyPrefix }).refreshIndex('gone', indexed)).rejects.toThrow(/injected/);
      expect(await entries()).toHaveLength(2);
      await expect(log.get('gone')).rejects.toBeInstanceOf(NotFoundError);
      // Whatever the page size, no page lists it.
      for (const limit of [1, 2, 100]) {
        const seen: string[] = [];
        let after: string | undefined;
        for (let pages = 0; pages < 5; pages++) {
          const page = await list({ limit, ...(after ? { after } : {}) });
          seen.push(...page.sessions.map((row) => row.id));
          if (!page.has_more) break;
          after = page.next_after!;
        }
        expect(seen, `limit ${limit}`).toEqual(['kept']);
      }
      // The listing deleted the entry after its response; the session's next incarnation lists alone.
      await settle();
      expect(await entries()).toHaveLength(1);
      await log.create({ id: 'gone' });
      expect((await list()).sessions.map((row) => row.id)).toEqual(['gone', 'kept']);
    });

    it('a page reads on past the markers of sessions deleted: it holds limit sessions while any remain', async () => {
      const counting = { store: undefined as CountingStore | undefined };
      const { log, list } = setup((store) => (counting.store = new CountingStore(store)));
      // Created first, so listed last: after 'older' the index holds their markers alone.
      for (const id of ['o0', 'o1', 'o2']) await log.create({ id });
      await log.create({ id: 'older' });
      await log.create({ id: 'live' });
      for (const id of ['o0', 'o1', 'o2']) await log.delete(id);
      // Created later, so listed first: their markers come before every key of 'live'.
      for (let index = 0; index < 6; index++) {
        await log.create({ id: `d${index}` });
        await log.delete(`d${index}`);
      }
      const before = counting.store!.counts.list;
      const first = await list({ limit: 1 });
      expect(first.sessions.map((row) => row.id)).toEqual(['live']);
      expect(first.has_more).toBe(true);
      // The page met markers: one listing of `limit` keys, then one reading on.
      expect(counting.store!.counts.list - before).toBe(2);
      const second = await list({ limit: 1, after: first.next_after! });
      expect([second.sessions.map((row) => row.id), second.has_more]).toEqual([['older'], true]);
      const third = await list({ limit: 5 });
      expect([third.sessions.map((row) => row.id), third.has_more]).toEqual([['live', 'older'], false]);
      // Markers alone to the index's end: the page reads on to it, and says so.
      const last = await list({ limit: 1, after: second.next_after! });
      expect([last.sessions, last.has_more, last.next_after]).toEqual([[], false, null]);
    });

    it('a delete whose marker put fails still removes an entry put while it deleted session.json', async () => {
      const { hold, wrap } = holding();
      const faults: FaultyStore[] = [];
      const { log, list, entries, keyPrefix } = setup((store) => {
        faults.push(new FaultyStore(store));
        return wrap(faults[0]!);
      });
      await log.create({ id: 'x' });
      const { indexed } = await log.append('x', [user('one')]);
      const configDelete = hold((method, key) => method === 'delete' && key === sessionConfigKey(keyPrefix, 'x'));
      const deleting = log.delete('x');
      await configDelete.reached;
      // The append's refresh runs whole before the config goes: its check finds the session, it keeps its entry.
      await log.refreshIndex('x', indexed);
      expect(await entries()).toHaveLength(1);
      faults[0]!.failWhen(({ operation, key }) => operation === 'put' && key.includes('/-'), { times: 1 });
      configDelete.open();
      await expect(deleting).rejects.toThrow(/injected/);
      expect(await entries()).toEqual([]);
      expect((await list()).sessions).toEqual([]);
      await expect(log.get('x')).rejects.toBeInstanceOf(NotFoundError);
    });

    it('a writer that read the session before a newest turn delete, stopped past the delete: no row', async () => {
      // The writer read the session (two turns), its put waits; the newest turn is deleted (a new
      // generation), then the session. The put lands, and the process stops at its config check.
      const { store, log, hold, list, settle, entries, keyPrefix, entryPut } = await twoTurnsHeld('t');
      const put = hold(entryPut);
      const faults = new FaultyStore(store);
      const refreshing = new SessionLog(faults, { keyPrefix }).refreshIndex('t');
      await put.reached;
      faults.failWhen(({ operation, key }) => operation === 'get' && key === sessionConfigKey(keyPrefix, 't'));
      await log.deleteTurn('t', 2);
      await log.delete('t');
      put.open();
      await expect(refreshing).rejects.toThrow(/injected/);
      expect(await entries()).toHaveLength(1);
      expect((await list()).sessions).toEqual([]);
      await settle();
      expect(await entries()).toEqual([]);
    });

    it("a delete of the newest turn lists the session's counts now, not those of the turn it took out", async () => {
      const { log, list, entries } = setup();
      await log.create({ id: 'x' });
      await turn(log, 'x', 1);
      await turn(log, 'x', 2);
      await log.refreshIndex('x');
      const row = async () => (await list()).sessions.find((session) => session.id === 'x');
      expect((await row())?.counts).toEqual({ items: 5, turns: 2, tool_calls: 3 });
      const after = await log.deleteTurn('x', 2);
      expect(after.counts).toEqual({ items: 2, turns: 1, tool_calls: 1 });
      expect((await row())?.counts).toEqual(after.counts);
      expect(await entries()).toHaveLength(1);
      // Later turns list as any.
      await turn(log, 'x');
      await log.refreshIndex('x');
      expect((await row())?.counts).toEqual({ items: 3, turns: 2, tool_calls: 1 });
      expect(await entries()).toHaveLength(1);
    });

    it("an append's row comes from the record it wrote, not from the log; out of order, the newest shows", async () => {
      const counting = { store: undefined as CountingStore | undefined };
      const { log, list, background, settle, entries, keyPrefix } = setup(
        (store) => (counting.store = new CountingStore(store)),
      );
      await log.create({ id: 'a' });
      const first = await log.append('a', [user('one')]);
      const second = await log.append('a', [user('two'), user('three')]);
      const listed: string[] = [];
      const inner = counting.store!.inner;
      const list0 = inner.list.bind(inner);
      inner.list = (prefix, options) => {
        listed.push(prefix);
        return list0(prefix, options);
      };
      counting.store!.reset();
      // The second append's refresh first, then the first's (background writes reordered).
      await log.refreshIndex('a', second.indexed);
      await log.refreshIndex('a', first.indexed);
      inner.list = list0;
      // Each lists the session's index entries and reads its config, never its log.
      expect(listed.length).toBe(2);
      expect(listed.every((prefix) => prefix.startsWith(indexPrefix(keyPrefix)))).toBe(true);
      expect(counting.store!.counts.get).toBe(2);
      expect((await list()).sessions.map((row) => [row.id, row.counts])).toEqual([
        ['a', { items: 3, turns: 0, tool_calls: 0 }],
      ]);
      await settle();
      expect(await entries()).toHaveLength(1);
      // Through the pipeline, an append hands its written state to the refresh.
      const known: unknown[] = [];
      const sessions = new Proxy(log, {
        get(target, property, receiver) {
          if (property === 'refreshIndex')
            return (id: string, state?: unknown) => {
              known.push(state);
              return target.refreshIndex(id, state as Parameters<typeof target.refreshIndex>[1]);
            };
          const value: unknown = Reflect.get(target, property, receiver);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
      await appendItems({ env: {}, background, log: () => undefined, inbox, sessions }, 'a', [user('four')]);
      await settle();
      expect(known).toEqual([expect.objectContaining({ newest: expect.objectContaining({ done: null }) })]);
      const handed = (known[0] as { newest: { record: { record: number; items: unknown[]; recent?: unknown } } })
        .newest;
      expect(handed.record.record).toBe(3);
      // Not the record's items: a refresh that runs late holds no more than the row needs.
      expect(handed.record.items).toEqual([]);
      expect(handed.record.recent).toBeUndefined();
      expect((await list()).sessions.map((row) => row.counts?.items)).toEqual([4]);
    });

    it('an entry is created, taking no key lock; the same state written again is put over it', async () => {
      const puts: string[] = [];
      const { log, list, entries, keyPrefix } = setup(
        (store) =>
          new Proxy(store, {
            get(target, property) {
              if (property === 'put')
                return (
                  key: string,
                  body: Parameters<ObjectStore['put']>[1],
                  options?: Parameters<ObjectStore['put']>[2],
                ) => {
                  if (key.startsWith(indexPrefix(keyPrefix))) puts.push(options?.onlyIfAbsent ? 'create' : 'put');
                  return target.put(key, body, options);
                };
              const value = Reflect.get(target, property, target) as unknown;
              return typeof value === 'function' ? value.bind(target) : value;
            },
          }),
      );
      await log.create({ id: 'c' });
      const { indexed } = await log.append('c', [user('one')]);
      puts.length = 0;
      await log.refreshIndex('c', indexed);
      expect(puts).toEqual(['create']);
      // Its key there already (a refresh of the same state): refused, then written over.
      await log.refreshIndex('c', indexed);
      expect(puts).toEqual(['create', 'create', 'put']);
      expect(await entries()).toHaveLength(1);
      expect((await list()).sessions).toMatchObject([{ id: 'c', counts: { items: 1 } }]);
    });

    it('refreshes of the same state racing leave its one entry', async () => {
      const { log, list, entries } = setup();
      await log.create({ id: 'r' });
      const { indexed } = await log.append('r', [user('one')]);
      await Promise.all([
        log.refreshIndex('r', indexed),
        log.refreshIndex('r', indexed),
        log.refreshIndex('r'),
        log.refreshIndex('r', indexed),
      ]);
      expect(await entries()).toHaveLength(1);
      expect((await list()).sessions).toMatchObject([{ id: 'r', counts: { items: 1 } }]);
    });

    it("an append's row, when a PATCH lands between its config read and its record, shows its counts", async () => {
      let gate: { reached: () => void; open: Promise<void> } | undefined;
      const { log, list, entries } = setup(
        (store) =>
          new Proxy(store, {
            get(target, property) {
              if (property === 'put')
                return async (
                  key: string,
                  ...rest: Parameters<ObjectStore['put']> extends [string, ...infer R] ? R : never
                ) => {
                  const held = gate;
                  if (held && /\/turn\/.*\d{12}$/.test(key)) {
                    gate = undefined;
                    held.reached();
                    await held.open;
                  }
                  return target.put(key, ...rest);
                };
              const value = Reflect.get(target, property, target) as unknown;
              return typeof value === 'function' ? value.bind(target) : value;
            },
          }),
      );
      await log.create({ id: 'r', metadata: { v: 1 } });
      let open = () => {};
      const reached = new Promise<void>((resolve) => {
        gate = { reached: resolve, open: new Promise<void>((release) => (open = release)) };
      });
      // The append read the config (v1) and is about to write its record when the PATCH lands.
      const appending = log.append('r', [user('one')]);
      await reached;
      await log.update('r', { metadata: { v: 2 } });
      open();
      const { indexed } = await appending;
      await log.refreshIndex('r', indexed);
      expect(await entries()).toHaveLength(1);
      expect((await list()).sessions).toMatchObject([{ id: 'r', metadata: { v: 2 }, counts: { items: 1 } }]);
    });

    it('racing writers (two refreshes and a PATCH) leave one entry, with the newest counts and metadata', async () => {
      const { log, list, entries } = setup();
      await log.create({ id: 'r', metadata: { v: 1 } });
      await turn(log, 'r');
      await log.append('r', [user('late')]);
      await Promise.all([log.refreshIndex('r'), log.update('r', { metadata: { v: 2 } }), log.refreshIndex('r')]);
      expect(await entries()).toHaveLength(1);
      expect((await list()).sessions).toMatchObject([
        { id: 'r', metadata: { v: 2 }, counts: { items: 2, turns: 1, tool_calls: 0 } },
      ]);
    });

    it("a refresh of the old metadata whose entry lands after a PATCH's leaves the PATCH's entry", async () => {
      // The refresh's entry put lands between the PATCH's put and its listing, uploaded later
      // than the PATCH's entry, and the refresh finds the config changed only after the PATCH listed.
      const { hold, wrap } = holding();
      const { log, list, entries, keyPrefix } = setup(wrap);
      await log.create({ id: 'r', metadata: { v: 1 } });
      await turn(log, 'r');
      const isEntry = (key: string) => key.startsWith(indexPrefix(keyPrefix));
      const isConfig = (key: string) => key.endsWith('r/session.json');
      const refreshPut = hold((method, key) => method === 'put' && isEntry(key));
      const refreshing = log.refreshIndex('r');
      await refreshPut.reached;
      const patchCheck = hold((method, key) => method === 'list' && isEntry(key));
      const patching = log.update('r', { metadata: { v: 2 } });
      await patchCheck.reached;
      // The refresh's entry is uploaded in a later millisecond than the PATCH's (the memory and
      // file stores stamp the ms; S3's seconds may tie, which ranks by metadata instead).
      for (const putAt = Date.now(); Date.now() <= putAt; );
      const refreshCheck = hold((method, key) => method === 'get' && isConfig(key));
      refreshPut.open();
      await refreshCheck.reached;
      patchCheck.open();
      await patching;
      refreshCheck.open();
      await refreshing;
      expect(await entries()).toHaveLength(1);
      expect((await list()).sessions).toMatchObject([{ id: 'r', metadata: { v: 2 }, counts: { turns: 1 } }]);
    });

    it.each([
      ['lists and deletes first', false],
      ['lists first, deleting after the delete', true],
    ])(
      "a refresh that read the session before a delete of its newest turn leaves the delete's row (it %s)",
      async (_, lateDelete) => {
        // The refresh read the head (two turns) and put its entry before the delete moved the
        // session back; it lists the session's entries once the delete has put its own (one turn).
        const { hold, wrap } = holding();
        const { log, list, entries, keyPrefix } = setup(wrap);
        await log.create({ id: 'd' });
        await turn(log, 'd', 1);
        await turn(log, 'd');
        const isEntry = (key: string) => key.startsWith(indexPrefix(keyPrefix));
        const refreshList = hold((method, key) => method === 'list' && isEntry(key));
        const refreshing = log.refreshIndex('d');
        await refreshList.reached;
        const deleteList = hold((method, key) => method === 'list' && isEntry(key));
        const deleting = log.deleteTurn('d', 2);
        await deleteList.reached;
        const refreshDelete = lateDelete ? hold((method, key) => method === 'delete' && isEntry(key)) : undefined;
        refreshList.open();
        // The refresh deletes what it deletes after the delete listed (and deleted), or before.
        if (refreshDelete) await Promise.race([refreshDelete.reached, refreshing]);
        else await refreshing;
        deleteList.open();
        const after = await deleting;
        refreshDelete?.open();
        await refreshing;
        expect(after.counts).toEqual({ items: 2, turns: 1, tool_calls: 1 });
        expect((await list()).sessions).toMatchObject([{ id: 'd', counts: after.counts }]);
        expect(await entries()).toHaveLength(1);
      },
    );

    it.each(['put', 'list', 'delete'])(
      'a refresh that read the session before its delete leaves no row once the delete ended (held at its %s)',
      async (method) => {
        // A close of a dead turn refreshes the row after its response: a DELETE of the session runs
        // whole while the refresh waits at one of its calls (its delete: of an entry it outranks).
        const { hold, wrap } = holding();
        const { log, store, list, entries, keyPrefix } = setup(wrap);
        const created = await log.create({ id: 'g' });
        await turn(log, 'g');
        const stale = indexEntryKey(keyPrefix, {
          id: 'g',
          createdMs: Date.parse(created.created_at),
          counts: { items: 0, turns: 0, tool_calls: 0 },
          lastActivityMs: Date.parse(created.created_at),
          ledger: EMPTY_LEDGER,
          expiresAfterDays: null,
          metadata: {},
        });
        await store.put(stale, '');
        const isEntry = (key: string) => key.startsWith(indexPrefix(keyPrefix));
        const held = hold((called, key) => called === method && isEntry(key));
        const refreshing = log.refreshIndex('g');
        await held.reached;
        await log.delete('g');
        held.open();
        await refreshing;
        expect(await entries()).toEqual([]);
        expect((await list()).sessions).toEqual([]);
      },
    );

    it('a delete of the newest turn that a delete of the session overtakes is answered not found', async () => {
      // The delete of the turn read the head, and reads the record before the turn once the
      // delete of the session swept it.
      const { hold, wrap } = holding();
      const { log, list, entries } = setup(wrap);
      await log.create({ id: 'o' });
      await turn(log, 'o', 1);
      await turn(log, 'o');
      const previousRead = hold((method, key) => method === 'get' && /\/o\/turn\/.*999999999999\.done$/.test(key));
      const deleting = log.deleteTurn('o', 2);
      await previousRead.reached;
      await log.delete('o');
      previousRead.open();
      await expect(deleting).rejects.toBeInstanceOf(NotFoundError);
      expect(await entries()).toEqual([]);
      expect((await list()).sessions).toEqual([]);
    });

    it("a listing meeting a stale refresh's entry beside a newest turn delete's keeps the delete's row", async () => {
      // The refresh read the head (two turns) before the delete moved the session back, and puts
      // its entry after the delete listed; a listing then meets both before the refresh finds the
      // config changed and deletes its own.
      const { hold, log, list, settle, entries, entryPut, entryList } = await twoTurnsHeld('m');
      const refreshPut = hold(entryPut);
      const refreshing = log.refreshIndex('m');
      await refreshPut.reached;
      const after = await log.deleteTurn('m', 2);
      const refreshList = hold(entryList);
      refreshPut.open();
      await refreshList.reached;
      expect(await entries()).toHaveLength(2);
      await list();
      await settle();
      refreshList.open();
      await refreshing;
      await settle();
      expect((await list()).sessions).toMatchObject([{ id: 'm', counts: after.counts }]);
      await settle();
      expect(await entries()).toHaveLength(1);
    });

    it("a refresh after a newest turn delete, meeting a stale refresh's entry, keeps the session's row", async () => {
      // The stale refresh read the head (two turns) before the delete moved the session back, and
      // puts its entry after the delete listed; a refresh of the session as it is now (one turn)
      // lists both before the stale one finds the config changed and deletes its own.
      const { hold, log, list, entries, entryPut, entryList } = await twoTurnsHeld('w');
      const stalePut = hold(entryPut);
      const stale = log.refreshIndex('w');
      await stalePut.reached;
      const after = await log.deleteTurn('w', 2);
      const staleList = hold(entryList);
      stalePut.open();
      await staleList.reached;
      await log.refreshIndex('w');
      staleList.open();
      await stale;
      expect((await list()).sessions).toMatchObject([{ id: 'w', counts: after.counts }]);
      expect(await entries()).toHaveLength(1);
    });

    it("a delete of the newest turn and a turn's refresh right after it leave the turn's row", async () => {
      // The delete read the session (one turn) before the next turn landed; that turn's refresh
      // puts its entry before the delete lists, and lists once the delete did (about to delete it).
      const { hold, log, list, entries, isEntry, entryPut, entryList } = await twoTurnsHeld('v');
      const deletePut = hold(entryPut);
      const deleting = log.deleteTurn('v', 2);
      await deletePut.reached;
      const begun = await log.beginTurn('v', { input: [user('next')] });
      if (begun.kind !== 'claimed') throw new Error('expected a claimed turn');
      await log.completeTurn(begun.turn, { status: 'completed', output: [], receipt: {} });
      const turnList = hold(entryList);
      const refreshing = log.refreshIndex('v');
      await turnList.reached;
      const deleteDelete = hold((method, key) => method === 'delete' && isEntry(key));
      deletePut.open();
      await deleteDelete.reached;
      turnList.open();
      await refreshing;
      deleteDelete.open();
      await deleting;
      expect((await list()).sessions).toMatchObject([{ id: 'v', counts: { turns: 2 } }]);
      expect(await entries()).toHaveLength(1);
    });

    it("a turn's refresh after a PATCH during the turn, at the same counts, leaves the turn's row", async () => {
      // The PATCH lands while the turn runs: its entry counts the turn's record, not its usage.
      // The turn fails with no output (no item more): both entries have the same counts, and on a
      // store whose upload times tie (S3's seconds) the later state must still be the one kept.
      const { log, list, entries } = setup();
      await log.create({ id: 'p', metadata: { v: 1 } });
      await turn(log, 'p');
      const begun = await log.beginTurn('p', { input: [user('go')] });
      if (begun.kind !== 'claimed') throw new Error('expected a claimed turn');
      await log.update('p', { metadata: { v: 2 } });
      const usage = turnUsage({ input_tokens: 10, output_tokens: 0 }, { input: 1, cached_input: 0.5, output: 4 });
      const failed = { code: 'provider_error', message: 'the model failed' };
      await log.completeTurn(begun.turn, { status: 'failed', error: failed, output: [], receipt: {}, usage });
      await log.refreshIndex('p');
      const session = await log.get('p');
      expect(await entries()).toHaveLength(1);
      expect((await list()).sessions).toMatchObject([
        { id: 'p', metadata: { v: 2 }, counts: session.counts, usage: session.usage },
      ]);
    });

    it("a cancelled turn's spend and a charge, stored after its close, list from the refresh after each", async () => {
      // Neither writes a record: the entry after each has the counts and last activity of the
      // close's, and on a store whose upload times tie (S3's seconds) its totals must outrank it.
      const { log, list, entries } = setup();
      await log.create({ id: 'c' });
      await turn(log, 'c');
      const begun = await log.beginTurn('c', { input: [user('go')] });
      if (begun.kind !== 'claimed') throw new Error('expected a claimed turn');
      await log.cancelTurn('c', begun.turn.turn);
      await log.refreshIndex('c');
      const closed = (await list()).sessions[0]!;
      const prices = { input: 1, cached_input: 0.5, output: 4 };
      const spent = turnUsage({ input_tokens: 300, output_tokens: 7 }, prices);
      expect(await log.storeStoppedSpend(begun.turn, { usage: spent })).toBe(true);
      await log.refreshIndex('c');
      const stopped = await log.get('c');
      expect(closed.usage).toMatchObject({ input_tokens: stopped.usage.input_tokens - 300 });
      expect((await list()).sessions).toEqual([{ ...closed, usage: stopped.usage }]);
      expect(await entries()).toHaveLength(1);
      const charged = turnUsage({ input_tokens: 20, output_tokens: 1 }, prices);
      expect(await log.storeCharge(begun.turn, { usage: charged })).toBe(true);
      await log.refreshIndex('c');
      const both = await log.get('c');
      expect(both.usage.input_tokens).toBe(stopped.usage.input_tokens + 20);
      expect((await list()).sessions).toEqual([{ ...closed, usage: both.usage }]);
      expect(await entries()).toHaveLength(1);
    });

    it("a PATCH whose read of a charge fails leaves its metadata's row, the charge counted", async () => {
      // The charge's refresh listed it; the PATCH's read missed it (a transient failure), so the
      // old metadata's entry counts more tokens. It still goes: the row says the PATCH's metadata,
      // and the PATCH, behind it, reads the session again and counts the charge.
      let failing = false;
      const { log, list, entries } = setup(
        (store) =>
          new Proxy(store, {
            get(target, property) {
              const value = Reflect.get(target, property, target) as unknown;
              if (typeof value !== 'function') return value;
              if (property !== 'get') return (value as (...args: unknown[]) => unknown).bind(target);
              return async (key: string, ...rest: unknown[]) => {
                if (failing && key.includes('-charge-')) {
                  failing = false;
                  throw new Error('transient storage error');
                }
                return (value as (...args: unknown[]) => unknown).call(target, key, ...rest);
              };
            },
          }),
      );
      await log.create({ id: 'm', metadata: { v: 1 } });
      await turn(log, 'm');
      const begun = await log.beginTurn('m', { input: [user('go')] });
      if (begun.kind !== 'claimed') throw new Error('expected a claimed turn');
      const usage = turnUsage({ input_tokens: 10, output_tokens: 1 }, { input: 1, cached_input: 0.5, output: 4 });
      await log.completeTurn(begun.turn, { status: 'completed', output: [], receipt: {}, usage });
      const charge = turnUsage({ input_tokens: 300, output_tokens: 7 }, { input: 1, cached_input: 0.5, output: 4 });
      expect(await log.storeCharge(begun.turn, { usage: charge })).toBe(true);
      await log.refreshIndex('m');
      failing = true;
      await log.update('m', { metadata: { v: 2 } });
      expect(failing).toBe(false);
      const session = await log.get('m');
      expect(session.usage.input_tokens).toBe(1000 + 10 + 300);
      expect(await entries()).toHaveLength(1);
      expect((await list()).sessions).toMatchObject([
        { id: 'm', metadata: { v: 2 }, counts: session.counts, usage: session.usage },
      ]);
    });

    it("an append landing after a stopped turn's spend was listed keeps that spend in the row", async () => {
      // The append read no spend (not stored yet), so its record names the turn still unbilled;
      // the spend's refresh read the session before that record landed. The append's own entry
      // (more items) then replaces the spend's: it must count what a read shows, the spend too.
      const { hold, wrap } = holding();
      const { log, list, entries, keyPrefix } = setup(wrap);
      await log.create({ id: 'c' });
      await turn(log, 'c');
      const begun = await log.beginTurn('c', { input: [user('go')] });
      if (begun.kind !== 'claimed') throw new Error('expected a claimed turn');
      await log.cancelTurn('c', begun.turn.turn);
      await log.refreshIndex('c');
      const records = `${keyPrefix}sessions/c/turn/`;
      const isRecord = (key: string) => key.startsWith(records) && /\/\d{12}$/.test(key);
      const recordPut = hold((method, key) => method === 'put' && isRecord(key));
      const appending = log.append('c', [user('more')]);
      await recordPut.reached;
      const spent = turnUsage({ input_tokens: 300, output_tokens: 7 }, { input: 1, cached_input: 0.5, output: 4 });
      expect(await log.storeStoppedSpend(begun.turn, { usage: spent })).toBe(true);
      await log.refreshIndex('c');
      expect((await list()).sessions[0]!.usage).toEqual((await log.get('c')).usage);
      recordPut.open();
      const { indexed } = await appending;
      await log.refreshIndex('c', indexed);
      const session = await log.get('c');
      expect((await list()).sessions).toMatchObject([{ id: 'c', counts: session.counts, usage: session.usage }]);
      expect(await entries()).toHaveLength(1);
    });

    it.each([
      ['before', false],
      ['after', true],
    ])(
      "an append landing after a charge was listed keeps the charge in the row (its refresh's put %s)",
      async (_, late) => {
        // The append listed no charge (not stored yet), so its record does not count it; the
        // charge's refresh read the session before that record landed, and its entry, of fewer
        // items, is outranked by the append's, which counts less: the session is read again.
        const { hold, wrap } = holding();
        const { log, list, entries, keyPrefix } = setup(wrap);
        await log.create({ id: 'c' });
        await turn(log, 'c');
        const begun = await log.beginTurn('c', { input: [user('go')] });
        if (begun.kind !== 'claimed') throw new Error('expected a claimed turn');
        const usage = turnUsage({ input_tokens: 10, output_tokens: 1 }, { input: 1, cached_input: 0.5, output: 4 });
        await log.completeTurn(begun.turn, { status: 'completed', output: [], receipt: {}, usage });
        await log.refreshIndex('c');
        const records = `${keyPrefix}sessions/c/turn/`;
        const isRecord = (key: string) => key.startsWith(records) && /\/\d{12}$/.test(key);
        const recordPut = hold((method, key) => method === 'put' && isRecord(key));
        const appending = log.append('c', [user('more')]);
        await recordPut.reached;
        const charge = turnUsage({ input_tokens: 300, output_tokens: 7 }, { input: 1, cached_input: 0.5, output: 4 });
        expect(await log.storeCharge(begun.turn, { usage: charge })).toBe(true);
        const entryPut = hold((method, key) => late && method === 'put' && key.startsWith(indexPrefix(keyPrefix)));
        const charged = log.refreshIndex('c');
        if (late) await entryPut.reached;
        else await charged;
        recordPut.open();
        const { indexed } = await appending;
        await log.refreshIndex('c', indexed);
        entryPut.open();
        await charged;
        const session = await log.get('c');
        expect(session.usage.input_tokens).toBe(1000 + 10 + 300);
        expect((await list()).sessions).toMatchObject([{ id: 'c', counts: session.counts, usage: session.usage }]);
        expect(await entries()).toHaveLength(1);
      },
    );

    it('metadata too large for a key is left to GET /v1/sessions/:id, and says so', async () => {
      const { log, list } = setup();
      const large = { notes: 'n'.repeat(2000) };
      const fits = { name: 'ü'.repeat(100), tags: ['a', 'b'], nested: { deep: [1, 2, 3] } };
      await log.create({ id: 'big', metadata: large });
      await log.create({ id: 'small', metadata: fits });
      const rows = (await list()).sessions;
      expect(rows.find((row) => row.id === 'big')).toMatchObject({ metadata: {}, metadata_complete: false });
      expect(rows.find((row) => row.id === 'small')).toMatchObject({ metadata: fits, metadata_complete: true });
      expect((await log.get('big')).metadata).toEqual(large);
      // A PATCH that makes it fit lists it whole again.
      await log.update('big', { metadata: { notes: 'short' } });
      expect((await list()).sessions.find((row) => row.id === 'big')).toMatchObject({
        metadata: { notes: 'short' },
        metadata_complete: true,
      });
    });

    it('pages go newest first with no duplicates or gaps; an old id cursor continues after that session', async () => {
      const { log, list } = setup();
      const ids = ['m', 'a', 'z-9', 'b_2', 'q', 'c', 'k'];
      for (const id of ids) await log.create({ id });
      // Activity does not move a session: the order is by creation.
      await turn(log, 'a');
      const seen: string[] = [];
      let after: string | undefined;
      for (let pages = 0; pages < 10; pages++) {
        const page = await list({ limit: 3, ...(after ? { after } : {}) });
        expect(page.sessions.length).toBeLessThanOrEqual(3);
        seen.push(...page.sessions.map((row) => row.id));
        if (!page.has_more) {
          expect(page.next_after).toBeNull();
          break;
        }
        after = page.next_after!;
        expect(after).not.toBe(page.sessions.at(-1)!.id);
      }
      expect(seen).toEqual([...ids].reverse());
      expect((await list({ after: 'q' })).sessions.map((row) => row.id)).toEqual(['b_2', 'z-9', 'a', 'm']);
      // A session id naming no session is no cursor a listing issued: refused, not the first page again.
      await expect(list({ after: 'gone' })).rejects.toThrow(/next_after/);
      await expect(list({ after: 'a/b' })).rejects.toThrow(/next_after/);
    });
  });
}
