import { expect, inject, it } from 'vitest';
import { Inbox } from '../../lib/inbox/inbox.ts';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { createTestS3Store } from '../support/s3-store.ts';
import { conditionalGatewayForFile } from '../support/s3-gateway-hooks.ts';

const gateway = conditionalGatewayForFile();

it('a notice a closed turn gives back while the next turn takes it over goes to one of them on S3', async () => {
  const keyPrefix = `takeover-${crypto.randomUUID()}/`;
  const s3 = createTestS3Store(gateway().endpoint, inject('s3Bucket'));
  // Both read the delivery record before either rewrites it.
  let reads = 0;
  let bothRead: () => void = () => undefined;
  const read = new Promise<void>((resolve) => (bothRead = resolve));
  const store = new Proxy(s3, {
    get(target, property) {
      if (property === 'get')
        return async (key: string) => {
          const found = await target.get(key);
          if (key.includes('/inbox_removed/') && ++reads === 2) bothRead();
          return found;
        };
      if (property === 'put')
        return async (key: string, body: unknown, options?: { ifMatch?: string }) => {
          if (key.includes('/inbox_removed/') && options?.ifMatch) await read;
          return target.put(key, body as string, options);
        };
      const value = Reflect.get(target, property);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  }) as ObjectStore;
  const inbox = new Inbox(store, { keyPrefix, sessionExists: sessionExistsIn(store, keyPrefix) });
  await store.put(sessionConfigKey(keyPrefix, 's1'), '{}');
  await inbox.post('s1', { name: 'note.md', content: 'once' });
  const since = new Date(Date.now() - 1000).toISOString();
  const taken = await inbox.consume('s1', { turn: 8, sessionExists: true });
  expect(taken.delivered.map((notice) => notice.name)).toEqual(['note.md']);
  // Turn 8 was closed by someone else: turn 9 takes its notices over while turn 8's owner gives them back.
  const [recovered] = await Promise.all([
    inbox.recover('s1', [{ turn: 8, since }], 9),
    inbox.giveBack('s1', taken.delivered, 8),
  ]);
  const pending = await inbox.listPending('s1');
  expect(recovered.length + pending.length).toBe(1);
});
