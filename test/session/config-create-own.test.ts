import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import {
  decodeUtf8,
  type Body,
  type ObjectInfo,
  type ObjectStore,
  type PutOptions,
} from '../../lib/store/object-store.ts';
import { LandsRefusedStore } from '../support/refusing-store.ts';
import { SessionLog } from '../support/session-log.ts';

/**
 * A create or a fork whose create-only put of its config is refused reads the config there, and
 * takes it for its own only when its fields name its generation: not a config of another writer,
 * created first, that carries that generation's text elsewhere (in its metadata). That one is
 * another session: the create or fork is refused (409), the other left as it was. Its own config,
 * landed though its put was answered as refused, is its own: the create or fork succeeds.
 */

/**
 * `inner`, where at the first create-only put of `id`'s config another writer creates session
 * `id` first, naming the generation of the config being put in its metadata. `other` holds that
 * generation and the keys that writer's create stored.
 */
class OtherWriterFirst implements ObjectStore {
  readonly inner = new MemoryStore();
  readonly other = { generation: '', keys: [] as string[] };
  #armed = true;
  readonly #key: string;

  constructor(id: string) {
    this.#key = `sessions/${id}/session.json`;
  }

  get: ObjectStore['get'] = (...args) => this.inner.get(...args);
  head: ObjectStore['head'] = (...args) => this.inner.head(...args);
  list: ObjectStore['list'] = (...args) => this.inner.list(...args);
  delete: ObjectStore['delete'] = (...args) => this.inner.delete(...args);

  async put(key: string, body: Body, options?: PutOptions): Promise<ObjectInfo | null> {
    if (this.#armed && key === this.#key && options?.onlyIfAbsent) {
      this.#armed = false;
      const { id, generation } = JSON.parse(typeof body === 'string' ? body : decodeUtf8(body as Uint8Array)) as Record<
        string,
        string
      >;
      const before = new Set(await keys(this.inner));
      await new SessionLog(this.inner).create({ id, metadata: { generation } });
      this.other.generation = generation!;
      this.other.keys = (await keys(this.inner)).filter((stored) => !before.has(stored));
    }
    return this.inner.put(key, body, options);
  }
}

async function keys(store: ObjectStore): Promise<string[]> {
  return (await store.list('', { limit: 1000 })).objects.map((object) => object.key).sort();
}

describe('a config another writer created first, carrying the generation in its metadata', () => {
  it('refuses the create: the session is the other’s', async () => {
    const store = new OtherWriterFirst('c');
    const sessions = new SessionLog(store);
    await expect(sessions.create({ id: 'c', metadata: { mine: true } })).rejects.toMatchObject({
      code: 'session_exists',
    });
    expect(store.other.generation).toMatch(/^g\d{13}[0-9a-f]{8}$/);
    await expect(sessions.get('c')).resolves.toMatchObject({ metadata: { generation: store.other.generation } });
    expect((await sessions.get('c')).metadata).not.toHaveProperty('mine');
  });

  it('refuses the fork and takes back what it wrote: the session is the other’s', async () => {
    const store = new OtherWriterFirst('f');
    const sessions = new SessionLog(store);
    await sessions.create({ id: 'p' });
    await sessions.append('p', [{ type: 'message', role: 'user', content: 'a' }]);
    const before = await keys(store);
    await expect(sessions.fork('p', { at_seq: 1, fields: { id: 'f' } })).rejects.toMatchObject({
      code: 'session_exists',
    });
    expect(store.other.generation).toMatch(/^g\d{13}[0-9a-f]{8}$/);
    const forked = await sessions.get('f');
    expect(forked).toMatchObject({ metadata: { generation: store.other.generation }, counts: { items: 0 } });
    expect(forked.forked_from).toBeUndefined();
    expect(await keys(store)).toEqual([...before, ...store.other.keys].sort());
  });
});

describe('a config put that landed, answered as refused', () => {
  it('is the create’s own: the create succeeds', async () => {
    const store = new LandsRefusedStore(new MemoryStore(), (key) => key === 'sessions/c/session.json');
    const sessions = new SessionLog(store);
    store.armed = true;
    await expect(sessions.create({ id: 'c', metadata: { mine: true } })).resolves.toMatchObject({ id: 'c' });
    expect(store.armed).toBe(false);
    await expect(sessions.get('c')).resolves.toMatchObject({ metadata: { mine: true } });
  });

  it('is the fork’s own: the fork succeeds', async () => {
    const store = new LandsRefusedStore(new MemoryStore(), (key) => key === 'sessions/f/session.json');
    const sessions = new SessionLog(store);
    await sessions.create({ id: 'p' });
    await sessions.append('p', [{ type: 'message', role: 'user', content: 'a' }]);
    store.armed = true;
    await expect(sessions.fork('p', { at_seq: 1, fields: { id: 'f' } })).resolves.toMatchObject({ id: 'f' });
    expect(store.armed).toBe(false);
    await expect(sessions.get('f')).resolves.toMatchObject({ counts: { items: 1 }, forked_from: { id: 'p' } });
  });
});
