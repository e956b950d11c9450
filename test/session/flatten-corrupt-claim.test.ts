import { expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { SessionLog } from '../support/session-log.ts';
import { contents, turnOf } from './rewind-simulation-suite.ts';

const user = (content: string): Item => ({ type: 'message', role: 'user', content });

it('a delete that flattens a history holding an unreadable `idem/` claim flattens it', async () => {
  const store = new MemoryStore();
  const log = new SessionLog(store, { packMinRecords: 2, keepRecords: 1 });
  await log.create({ id: 's' });
  const begun = await log.beginTurn('s', { input: [user('keyed')], idempotencyKey: 'key' });
  if (begun.kind !== 'claimed') throw new Error('expected a claim');
  await log.completeTurn(begun.turn, { status: 'completed', output: [], receipt: {} });
  const claims = (await store.list('sessions/s/idem/', { limit: 10 })).objects;
  expect(claims).toHaveLength(1);
  await store.put(claims[0]!.key, 'not a claim');
  for (let n = 1; n <= 9; n++) {
    await turnOf(log, 's', `kept ${n}`);
    await turnOf(log, 's', `gone ${n}`);
    await log.deleteTurn('s', n + 2);
  }
  expect((await contents(log, 's')).length).toBe(19);
  const config = JSON.parse(new TextDecoder().decode((await store.get(sessionConfigKey('', 's')))!.body));
  expect(config.named?.length).toBeGreaterThan(0);
});
