import { describe, expect, it } from 'vitest';
import { createServices } from '../../functions/services.ts';
import { countedStore, noStorageOps } from '../../functions/turn-log.ts';
import { parseServiceConfig } from '../../lib/config.ts';
import { Inbox } from '../../lib/inbox/inbox.ts';
import type { Item } from '../../lib/items.ts';
import { echoModel } from '../../lib/models/echo.ts';
import type { Model, ModelRequest } from '../../lib/models/model.ts';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import { ViewCache, viewCacheOf } from '../../lib/session/log/view-cache.ts';
import type { LogView } from '../../lib/session/view-records.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { runInProcess, runTurn, type TurnServices } from '../../lib/turn/index.ts';
import { DepthStore } from '../support/depth-store.ts';
import { SessionLog } from '../support/session-log.ts';

function fakeView(record: number): LogView {
  return {
    format: 'tailgate.view.v1',
    v: 1,
    policy: 'p',
    record,
    last_seq: 0,
    tail: { from_seq: 1, window_start: 1, items: [{ type: 'message', role: 'user', content: 'hi', seq: 1 }] },
    created_at: '2026-01-01T00:00:00.000Z',
  } as unknown as LogView;
}

describe('ViewCache', () => {
  it('keeps the newest view of a session and evicts the least recently used past its bytes', () => {
    const cache = new ViewCache(100);
    cache.set('sessions/a/turn/g/009', fakeView(1), 40);
    cache.set('sessions/b/turn/g/009', fakeView(1), 40);
    // A newer view of session a replaces its older one.
    cache.set('sessions/a/turn/g/008', fakeView(2), 40);
    expect(cache.get('sessions/a/turn/g/009')).toBeUndefined();
    expect(cache.bytes).toBe(80);
    // Used just now, so c evicts a's view rather than b's.
    expect(cache.get('sessions/b/turn/g/009')?.record).toBe(1);
    cache.set('sessions/c/turn/g/009', fakeView(1), 40);
    expect(cache.get('sessions/a/turn/g/008')).toBeUndefined();
    expect(cache.get('sessions/b/turn/g/009')).toBeDefined();
    expect(cache.bytes).toBe(80);
    // A view larger than the whole cache is not kept.
    cache.set('sessions/d/turn/g/009', fakeView(1), 101);
    expect(cache.get('sessions/d/turn/g/009')).toBeUndefined();
  });

  it('freezes what it keeps, so a change in place fails', () => {
    const cache = new ViewCache(100);
    const view = fakeView(1);
    cache.set('sessions/a/turn/g/009', view, 10);
    const items = cache.get('sessions/a/turn/g/009')!.tail!.items;
    expect(() => items.push(items[0]!)).toThrow(TypeError);
    expect(() => Object.assign(items[0]!, { seq: 2 })).toThrow(TypeError);
  });

  it('freezes the items a view holds beside those of the view it was built from, whatever their place', () => {
    const cache = new ViewCache(1000);
    const base = fakeView(1);
    cache.set('sessions/a/turn/g/009', base, 10);
    const kept = base.tail!.items[0]!;
    const message = (seq: number) =>
      ({ type: 'message', role: 'user', content: [{ type: 'input_text', text: `m${seq}` }], seq }) as never;
    // New items before, after and instead of the base's (a copy of one at its seq).
    const view = fakeView(2);
    view.tail!.items = [message(0), kept, message(2), { ...kept, seq: 3 }, message(4)];
    cache.set('sessions/a/turn/g/008', view, 10, base);
    for (const item of view.tail!.items as { content: unknown }[]) {
      expect(Object.isFrozen(item)).toBe(true);
      if (Array.isArray(item.content)) expect(Object.isFrozen(item.content[0])).toBe(true);
    }
    expect(Object.isFrozen(view.tail!.items)).toBe(true);
    expect(Object.isFrozen(view)).toBe(true);
  });

  it('is one per store, and none at 0 bytes', () => {
    const one = new MemoryStore();
    expect(viewCacheOf(one, 1000)).toBe(viewCacheOf(one, 1000));
    expect(viewCacheOf(new MemoryStore(), 1000)).not.toBe(viewCacheOf(one, 1000));
    expect(viewCacheOf(one, 0)).toBeNull();
  });

  it('is shared by the wrappers of one store made per request (the app counts each request’s calls)', () => {
    const one = new MemoryStore();
    const ops = noStorageOps();
    expect(viewCacheOf(countedStore(one, ops, undefined), 1000)).toBe(viewCacheOf(one, 1000));
    expect(viewCacheOf(countedStore(one, ops, undefined), 1000)).toBe(
      viewCacheOf(countedStore(one, ops, undefined), 1000),
    );
  });
});

/** Turns of the echo model over `store`, recording every prompt sent and running packing as it is handed over. */
function world(viewCacheBytes: number) {
  const store = new DepthStore(new MemoryStore());
  const prompts: ModelRequest['prompt'][] = [];
  const model: Model = {
    ...echoModel,
    id: 'echo',
    generate: (request) => {
      prompts.push(request.prompt);
      return echoModel.generate(request);
    },
  };
  const clock = () => new Date(Date.UTC(2026, 0, 1));
  const sessions = new SessionLog(store, { viewCacheBytes, clock });
  const background: Promise<unknown>[] = [];
  const services: TurnServices = {
    sessions,
    inbox: new Inbox(store, { log: () => {}, sessionExists: sessionExistsIn(store, '') }),
    config: parseServiceConfig({}),
    clock,
    env: { DEFAULT_MODEL: 'echo' },
    model: () => model,
    background: (task) => void background.push(task),
    startBackground: (run) => runInProcess(services, run),
    log: () => {},
    info: () => {},
  };
  const turn = async (input: string) => {
    await runTurn(services, 's', { input });
    while (background.length > 0) await Promise.all(background.splice(0));
  };
  const viewGets = () => store.calls.filter((call) => call.op === 'get' && call.key.endsWith('.view')).length;
  return { store, sessions, prompts, turn, viewGets };
}

function toolHistory(calls: number, tag: string): Item[] {
  const items: Item[] = [{ type: 'message', role: 'user', content: `start ${tag}` }];
  for (let index = 0; index < calls; index++) {
    const call_id = `call_${tag}_${index}`;
    items.push({ type: 'function_call', call_id, name: 'read_file', arguments: `{"path":"f${index}"}` });
    items.push({ type: 'function_call_output', call_id, output: `contents ${index} `.repeat(40) });
  }
  return items;
}

describe('a session log with a view cache', () => {
  it('fetches a view it wrote or read never again, and sends the prompts a log without it sends', async () => {
    const cached = world(1 << 22);
    const uncached = world(0);
    for (const w of [cached, uncached]) {
      await w.sessions.create({ id: 's' });
      for (let block = 0; block < 6; block++) {
        await w.sessions.append('s', toolHistory(60, `${block}`));
        await w.sessions.pack('s', { refresh: true });
        for (let index = 0; index < 3; index++) await w.turn(`block ${block} turn ${index}`);
      }
    }
    expect(cached.prompts.length).toBe(18);
    expect(cached.prompts).toEqual(uncached.prompts);
    // Compacted calls are in the prompts: the views served them.
    expect(cached.prompts.at(-1)!.filter((item) => item.compacted).length).toBeGreaterThan(10);
    expect(cached.viewGets()).toBe(0);
    expect(uncached.viewGets()).toBeGreaterThanOrEqual(18);
  });

  it('is on in the services the app builds, at VIEW_CACHE_BYTES', async () => {
    for (const [setting, fetched] of [
      [undefined, 0],
      ['0', 2],
    ] as const) {
      const store = new DepthStore(new MemoryStore());
      const tasks: Promise<unknown>[] = [];
      const environment = { DEFAULT_MODEL: 'echo', ...(setting === undefined ? {} : { VIEW_CACHE_BYTES: setting }) };
      const services = createServices({
        store,
        config: parseServiceConfig(environment),
        env: environment,
        model: () => echoModel,
        background: (task) => void tasks.push(task),
        log: () => {},
        info: () => {},
      });
      await services.sessions.create({ id: 's' });
      await services.sessions.append('s', toolHistory(40, 'a'));
      await services.sessions.pack('s', { refresh: true });
      store.mark();
      for (const input of ['one', 'two']) {
        await runTurn(services, 's', { input });
        await Promise.all(tasks.splice(0));
      }
      const views = store.calls.filter((call) => call.op === 'get' && call.key.endsWith('.view'));
      expect(views.length).toBe(fetched);
    }
  });

  it("does not serve a deleted session's view to the session created again under its id", async () => {
    const w = world(1 << 22);
    await w.sessions.create({ id: 's' });
    await w.sessions.append('s', toolHistory(50, 'old'));
    await w.sessions.pack('s', { refresh: true });
    await w.turn('before the delete');
    await w.sessions.delete('s');
    await w.sessions.create({ id: 's' });
    await w.sessions.append('s', toolHistory(5, 'new'));
    await w.sessions.pack('s', { refresh: true });
    await w.turn('after the delete');
    const prompt = JSON.stringify(w.prompts.at(-1));
    expect(prompt).toContain('call_new_4');
    expect(prompt).not.toContain('call_old_');
  });
});
