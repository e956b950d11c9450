import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import type { Body, ObjectInfo, ObjectStore, PutOptions } from '../../lib/store/object-store.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import { type OpenTurn, SessionLog } from '../support/session-log.ts';

// A charge put after a delete of the newest turn moved the session on is carried to the
// generation it moved to (lib/session/log/charges.ts carry), by whoever's create-only marker
// lands. A marker put answered as refused may be its own that landed (a store's retry refused by
// its own first attempt): its carrier carries the charge all the same, so it is counted once.

const user = (content: string): Item => ({ type: 'message', role: 'user', content });
const usage = (input: number, output: number) => ({
  input_tokens: input,
  cached_input_tokens: 0,
  cache_write_tokens: 0,
  output_tokens: output,
  reasoning_tokens: 0,
  cost_usd: 0,
});

/** `inner`, whose create-only put of a carried charge's marker, once armed, lands and is answered as refused. */
class RefusesItsOwnMarker implements ObjectStore {
  armed = false;
  readonly inner: ObjectStore;
  constructor(inner: ObjectStore) {
    this.inner = inner;
  }
  get: ObjectStore['get'] = (...args) => this.inner.get(...args);
  head: ObjectStore['head'] = (...args) => this.inner.head(...args);
  list: ObjectStore['list'] = (...args) => this.inner.list(...args);
  delete: ObjectStore['delete'] = (...args) => this.inner.delete(...args);
  async put(key: string, body: Body, options?: PutOptions): Promise<ObjectInfo | null> {
    const written = await this.inner.put(key, body, options);
    if (!this.armed || !options?.onlyIfAbsent || !key.endsWith('.carried')) return written;
    this.armed = false;
    return null;
  }
}

describe.each(await memoryAndFileStores('charge-carry-own-marker'))(
  'a charge carried on by its writer counts once: %s',
  (_, storeOf) => {
    it('its marker landed, answered as refused', async () => {
      const store = new RefusesItsOwnMarker(storeOf());
      const log = new SessionLog(store, {});
      await log.create({ id: 's1' });
      const begun = await log.beginTurn('s1', { input: [user('a')] });
      if (begun.kind !== 'claimed') throw new Error('expected a claim');
      await log.completeTurn(begun.turn, { status: 'completed', output: [], receipt: {}, usage: usage(100, 5) });
      const turn = { scope: await log.scope('s1') } as OpenTurn;
      // Read before the delete of the newest turn; its charge put after that delete moved the session on.
      await log.deleteTurn('s1', 1);
      store.armed = true;
      expect(await log.storeCharge(turn, { usage: usage(10, 1) })).toBe(true);
      expect(store.armed).toBe(false);
      for (const content of ['b', 'c', 'd']) await log.append('s1', [user(content)]);
      expect((await log.get('s1')).usage).toMatchObject({ input_tokens: 110, output_tokens: 6 });
    });
  },
);
