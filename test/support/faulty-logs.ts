import type { ObjectStore } from '../../lib/store/object-store.ts';
import { FaultyStore } from './faulty-store.ts';
import { SessionLog } from './session-log.ts';

/**
 * Two session logs (two writers, as two processes) over one FaultyStore wrapping `inner`, on a
 * clock of their own that only `advance` moves, with leases of `leaseMs`; `failAt(k, after)`
 * fails the `k`th storage call from then on (once), before it or after it landed.
 */
export function faultyLogs(inner: ObjectStore, leaseMs: number) {
  const store = new FaultyStore(inner);
  let now = Date.parse('2026-01-01T00:00:00Z');
  const options = { clock: () => new Date(now), leaseMs };
  const failAt = (k: number, after: boolean) => {
    let calls = 0;
    store.failWhen(() => ++calls === k, { after, times: 1 });
  };
  return {
    store,
    log: new SessionLog(store, options),
    other: new SessionLog(store, options),
    failAt,
    advance: (ms: number) => (now += ms),
  };
}
