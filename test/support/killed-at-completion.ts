import type { ObjectStore } from '../../lib/store/object-store.ts';
import { FaultyStore } from './faulty-store.ts';

/**
 * `store` as a process sees it that is killed (a kill -9) as it writes a turn's completion: that
 * put and every call after it fail. The turn stays open, holding the notices it moved from the
 * inbox (its moves land before its completion, lib/turn/notices.ts `settle`), until a writer
 * closes it once its lease ran out (`lease_expired`).
 */
export function killedAtCompletion(store: ObjectStore): FaultyStore {
  let dead = false;
  return new FaultyStore(store).failWhen(
    ({ operation, key }) => (dead ||= operation === 'put' && /\/turn\/[^/]+\/\d+\.done$/.test(key)),
  );
}
