import { describe, expect, it } from 'vitest';
import {
  COUNTED,
  chargeList,
  configGet,
  fencedDelete,
  isCharge,
  leaseClock,
  totalsAfterTwoWrites,
} from '../support/charges.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';

// A carried charge (lib/session/log/charges.ts carry) goes with its marker, which kept its other
// carrier off it: a store deleting several keys in no set order (S3's DeleteObjects, R2's batch)
// may remove the marker and fail on the charge, or remove the marker first. The charge must be
// gone before its marker is, or its other carrier carries it a second time. A carry that failed
// is finished by a write once its marker is older than a lease (lib/session/log/owed-charges.ts).

const LEASE_MS = 1000;

describe.each(await memoryAndFileStores('charge-carry-delete'))(
  'a carried charge goes before its marker: %s',
  (_, storeOf) => {
    it('a delete of the charge failing after its marker went leaves no second carrier to it', async () => {
      // Its delete of several keys removes the last ones first.
      const clock = leaseClock(LEASE_MS);
      const { faulty, store, log, charge, fence, deleted } = await fencedDelete(storeOf(), {
        log: clock.options,
        store: { deleteEachLastFirst: true },
      });

      // The charge lands after the delete read its head; its writer reads the config once it moved,
      // and carries it while the delete's listing of the generation it left waits.
      const listed = store.hold(chargeList);
      const read = store.hold(configGet);
      const stored = charge().catch(() => 'failed');
      await read.reached;
      fence.release();
      await listed.reached;
      faulty.failWhen(({ operation, key }) => operation === 'delete' && isCharge(key) && !key.endsWith('.carried'), {
        times: 1,
      });
      read.release();
      await stored;
      listed.release();
      await deleted;

      clock.advance(2 * LEASE_MS);
      expect(await totalsAfterTwoWrites(log)).toMatchObject(COUNTED);
    });
  },
);
