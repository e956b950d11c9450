import { describe, expect, it } from 'vitest';
import { StorageError } from '../../lib/errors.ts';
import type {
  Body,
  GetOptions,
  ListOptions,
  ListResult,
  ObjectInfo,
  ObjectStore,
  PutOptions,
  StoredObject,
} from '../../lib/store/object-store.ts';
import {
  CHARGED,
  chargeableSession,
  chargeList,
  configGet,
  fencePut,
  isCharge,
  totalsAfterTwoWrites,
} from '../support/charges.ts';
import { HeldStore } from '../support/held-store.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import { SessionLog } from '../support/session-log.ts';

// A carried charge (lib/session/log/charges.ts carry) goes with its marker, which kept its other
// carrier off it: a store deleting several keys in no set order (S3's DeleteObjects, R2's batch)
// may remove the marker and fail on the charge, or remove the marker first. The charge must be
// gone before its marker is, or its other carrier carries it a second time.

/** A store whose delete of several keys removes the last ones first, and fails on a charge once armed. */
class UnorderedDeletes implements ObjectStore {
  armed = false;
  readonly inner: ObjectStore;
  constructor(inner: ObjectStore) {
    this.inner = inner;
  }
  get(key: string, options?: GetOptions): Promise<StoredObject | null> {
    return this.inner.get(key, options);
  }
  head(key: string): Promise<ObjectInfo | null> {
    return this.inner.head(key);
  }
  put(key: string, body: Body, options?: PutOptions): Promise<ObjectInfo | null> {
    return this.inner.put(key, body, options);
  }
  list(prefix: string, options?: ListOptions): Promise<ListResult> {
    return this.inner.list(prefix, options);
  }
  async delete(keys: string | string[]): Promise<void> {
    const all = Array.isArray(keys) ? keys : [keys];
    for (const key of [...all].reverse()) {
      if (this.armed && isCharge(key) && !key.endsWith('.carried')) {
        this.armed = false;
        throw new StorageError(`delete ${key}: InternalError`);
      }
      await this.inner.delete(key);
    }
  }
}

describe.each(await memoryAndFileStores('charge-carry-delete'))(
  'a carried charge goes before its marker: %s',
  (_, storeOf) => {
    it('a delete of the charge failing after its marker went leaves no second carrier to it', async () => {
      const unordered = new UnorderedDeletes(storeOf());
      const store = new HeldStore(unordered);
      const log = new SessionLog(store, {});
      const turn = await chargeableSession(log);

      // The charge lands after the delete read its head; its writer reads the config once it moved,
      // and carries it while the delete's listing of the generation it left waits.
      const fence = store.hold(fencePut);
      const deleted = log.deleteTurn('s1', 1);
      await fence.reached;
      const listed = store.hold(chargeList);
      const read = store.hold(configGet);
      const stored = log.storeCharge(turn, { usage: CHARGED }).catch(() => 'failed');
      await read.reached;
      fence.release();
      await listed.reached;
      unordered.armed = true;
      read.release();
      await stored;
      listed.release();
      await deleted;

      expect(await totalsAfterTwoWrites(log)).toMatchObject({ turns: 1, input_tokens: 110, output_tokens: 6 });
    });
  },
);
