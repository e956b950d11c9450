import { describe, expect, it } from 'vitest';
import { InvalidRequestError } from '../../lib/errors.ts';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { SessionLog } from '../support/session-log.ts';

// A create, a fork or a PATCH stores only a config its reads take back (`sessionConfigSchema`): a field
// it would refuse is refused before the put, and the session stays as it was. The routes'
// schemas refuse such fields first; the log holds to it for any caller.

describe('a session config a read would refuse', () => {
  it.each([
    ['a retention of 0 days', { expires_after_days: 0 }, 'expires_after_days'],
    ['a negative budget', { budget: { max_turns: -1 } }, 'budget.max_turns'],
    ['a fractional budget of tokens', { budget: { max_total_tokens: 1.5 } }, 'budget.max_total_tokens'],
  ])('%s: a PATCH is refused, the session unchanged', async (_name, fields, field) => {
    const store = new MemoryStore();
    const sessions = new SessionLog(store);
    const { id } = await sessions.create({ metadata: { kept: true } });
    const before = (await store.get(sessionConfigKey('', id)))!.etag;
    const refused = await sessions.update(id, { metadata: { kept: false }, ...fields }).catch((error) => error);
    expect(refused).toBeInstanceOf(InvalidRequestError);
    expect(refused.details).toMatchObject({ field });
    expect((await store.get(sessionConfigKey('', id)))!.etag).toBe(before);
    expect((await sessions.get(id)).metadata).toEqual({ kept: true });
  });

  it('a create with one is refused, nothing stored', async () => {
    const store = new MemoryStore();
    const sessions = new SessionLog(store);
    const refused = await sessions.create({ id: 'refused', budget: { max_cost_usd: -1 } }).catch((error) => error);
    expect(refused).toBeInstanceOf(InvalidRequestError);
    expect(refused.details).toMatchObject({ field: 'budget.max_cost_usd' });
    expect(await store.get(sessionConfigKey('', 'refused'))).toBeNull();
  });

  it('a fork with one is refused, nothing stored', async () => {
    const store = new MemoryStore();
    const sessions = new SessionLog(store);
    await sessions.create({ id: 'p' });
    await sessions.append('p', [{ type: 'message', role: 'user', content: 'a' }]);
    const keys = async () => (await store.list('', { limit: 1000 })).objects.map((object) => object.key);
    const before = await keys();
    const refused = await sessions
      .fork('p', { at_seq: 1, fields: { id: 'f', budget: { max_turns: 0.5 } } })
      .catch((error) => error);
    expect(refused).toBeInstanceOf(InvalidRequestError);
    expect(refused.details).toMatchObject({ field: 'budget.max_turns' });
    expect(await keys()).toEqual(before);
  });
});
