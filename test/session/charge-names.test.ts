import { expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { recordSchema } from '../../lib/session/records.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { SessionLog } from '../support/session-log.ts';

// A charge's id is what its key lists after `-charge-` (lib/session/log/charges.ts), and the
// write that counts it names it in its record's `charged`: a name no charge has is no charge.

const user = (content: string): Item => ({ type: 'message', role: 'user', content });

it('an object listed as a charge under a name no charge has is named in no record', async () => {
  const store = new MemoryStore();
  const log = new SessionLog(store, {});
  await log.create({ id: 's1' });
  await log.append('s1', [user('a')]);
  const first = (await store.list('sessions/s1/turn/')).objects[0]!.key;
  await store.put(`${first.slice(0, first.lastIndexOf('/') + 1)}-charge-${'f'.repeat(80)}`, '');
  await log.append('s1', [user('b')]);
  const newest = (await store.list('sessions/s1/turn/')).objects.find((object) => /\/\d+$/.test(object.key))!.key;
  const body = JSON.parse(new TextDecoder().decode((await store.get(newest))!.body));
  expect(body.items[0].content).toBe('b');
  expect(recordSchema.safeParse(body).success).toBe(true);
  expect(body.charged).toBeUndefined();
});
