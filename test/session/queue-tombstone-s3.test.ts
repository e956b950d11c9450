import { expect, inject, it } from 'vitest';
import { logContext } from '../../lib/session/log/context.ts';
import { TOMBSTONE_STALE_MS, tombstoneCleared, withdrawing } from '../../lib/session/log/queue-withdraw.ts';
import { queuedKey, tombstoneClearKey, type LogScope } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { viewPolicy } from '../../lib/turn/view-policy.ts';
import { createTestS3Store } from '../support/s3-store.ts';
import { conditionalGatewayForFile } from '../support/s3-gateway-hooks.ts';

const gateway = conditionalGatewayForFile();

/** A promise and the function that resolves it. */
function signal(): { done: Promise<void>; set: () => void } {
  let set: () => void = () => undefined;
  const done = new Promise<void>((resolve) => (set = resolve));
  return { done, set };
}

interface Gates {
  /** After each get (its key). */
  got?: (key: string) => void;
  /** Before the first put. */
  put?: Promise<void>;
  /** After the first put settled. */
  putDone?: () => void;
  /** Before each delete. */
  delete?: Promise<void>;
}

/** `store` as one process sees it, each of its writes held until its gate opens. */
function gated(store: ObjectStore, gates: Gates): ObjectStore {
  let first = true;
  return new Proxy(store, {
    get(target, property) {
      if (property === 'get')
        return async (...args: Parameters<ObjectStore['get']>) => {
          const found = await target.get(...args);
          gates.got?.(args[0]);
          return found;
        };
      if (property === 'put')
        return async (...args: Parameters<ObjectStore['put']>) => {
          if (!first) return target.put(...args);
          first = false;
          await gates.put;
          try {
            return await target.put(...args);
          } finally {
            gates.putDone?.();
          }
        };
      if (property === 'delete')
        return async (...args: Parameters<ObjectStore['delete']>) => {
          await gates.delete;
          return target.delete(...args);
        };
      const value = Reflect.get(target, property);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  }) as ObjectStore;
}

it('a pickup and an enqueue clearing one stale tombstone on S3 leave the entry the enqueue put after it', async () => {
  await clearStaleTombstone(createTestS3Store(gateway().endpoint, inject('s3Bucket')));
});

it('a pickup and an enqueue clearing one stale tombstone in memory leave the entry put after it', async () => {
  await clearStaleTombstone(new MemoryStore());
});

/** A pickup and an enqueue read one stale tombstone in `s3` at once and both go to clear it. */
async function clearStaleTombstone(s3: ObjectStore): Promise<void> {
  const scope: LogScope = { keyPrefix: `tombstone-${crypto.randomUUID()}/`, id: 's1', generation: '' };
  const keyHash = 'a'.repeat(64);
  const key = queuedKey(scope, keyHash);
  // A tombstone its withdraw never deleted, a minute old by the service's clock.
  await s3.put(key, '');
  const options = {
    viewPolicy,
    keyPrefix: scope.keyPrefix,
    clock: () => new Date(Date.now() + TOMBSTONE_STALE_MS + 1000),
  };
  // Both read the tombstone before either writes; the enqueue writes first, then the pickup; the
  // enqueue deletes nothing before the pickup's write settled, the pickup nothing before the
  // enqueue has put its entry again.
  const [bothRead, enqueueWrote, pickupWrote, entryPut] = [signal(), signal(), signal(), signal()];
  let reads = 0;
  const got = (read: string) => {
    if (read === key && ++reads === 2) bothRead.set();
  };
  const enqueuer = logContext(
    gated(s3, { got, put: bothRead.done, putDone: enqueueWrote.set, delete: pickupWrote.done }),
    options,
  );
  const picker = logContext(
    gated(s3, { got, put: enqueueWrote.done, putDone: pickupWrote.set, delete: entryPut.done }),
    options,
  );
  const picked = withdrawing(picker, scope, keyHash);
  void picked.finally(pickupWrote.set);
  expect(await tombstoneCleared(enqueuer, scope, keyHash, 0)).toBe(true);
  // The enqueue puts its entry again, as enqueueInput does once the tombstone is cleared.
  expect(await s3.put(key, '{"queued":true}', { onlyIfAbsent: true })).not.toBeNull();
  entryPut.set();
  expect(await picked).toBe(true);
  expect((await s3.get(key))?.body.length).toBeGreaterThan(0);
}

it('deletes a stale tombstone a minute after its queue_cleared/ key, whose creator stopped first', async () => {
  let storeNow = Date.parse('2026-01-01T00:00:00Z');
  const t0 = storeNow;
  const store = new MemoryStore({ clock: () => new Date(storeNow) });
  const scope: LogScope = { keyPrefix: 'cleared/', id: 's1', generation: '' };
  const keyHash = 'b'.repeat(64);
  const key = queuedKey(scope, keyHash);
  await store.put(key, '');
  // A pickup created the key a minute after the tombstone, then stopped before deleting it.
  storeNow += TOMBSTONE_STALE_MS + 1000;
  const decided = tombstoneClearKey(scope, keyHash, String(t0));
  await store.put(decided, 'stopped', { onlyIfAbsent: true });
  const at = (ms: number) => logContext(store, { viewPolicy, keyPrefix: scope.keyPrefix, clock: () => new Date(ms) });
  // Its key is young: the tombstone is passed over as one its clearer deletes.
  expect(await withdrawing(at(storeNow + 1000), scope, keyHash)).toBe(true);
  expect(await store.head(key)).not.toBeNull();
  // A minute later, of two that read it, one deletes it through a key named by both times.
  const late = at(storeNow + TOMBSTONE_STALE_MS + 1000);
  expect(await Promise.all([withdrawing(late, scope, keyHash), withdrawing(late, scope, keyHash)])).toEqual([
    true,
    true,
  ]);
  expect(await store.head(key)).toBeNull();
  expect(await store.head(tombstoneClearKey(scope, keyHash, `${t0}-${storeNow}`))).not.toBeNull();
});
