import { sessionConfigKey, type LogScope } from '../keys.ts';
import type { SessionConfig } from '../records.ts';
import { CARRY_ATTEMPTS, carriedOn } from './charges.ts';
import type { LogContext } from './context.ts';

/**
 * Charges a delete of the newest turn owes (docs/STORAGE.md **Charges**): once it moved the config
 * off a generation, the charges put there after it read its head, by writers that read the config
 * before it moved, are counted by no write until they are carried to the generation the config
 * names (log/charges.ts carriedOn). The config it writes names the generation it left in
 * `carry_from`, in the same put, so a delete stopped before it carried them (its process gone, its
 * listings failed) leaves them owed, not lost: the next write that reads the config carries them,
 * and takes the generations it carried out of `carry_from` with a put of the config if-match on
 * the one it read, once no carry of them is left unfinished (one whose carrier stopped is resumed
 * once its marker is older than a lease: log/charges.ts carryOn, which can be done again without
 * counting twice). A charge's writer that carries it itself names its generation again first
 * (log/charges.ts oweAgain). Nothing owed (no `carry_from`): no call. A commit that carried one
 * reads the session again, so its own record counts it (log/commit.ts prepareCommit); a delete
 * writes the session's index entry after it carried them (log/rewind.ts).
 */

/** The scope of `generation`, a generation of session `config` that a delete of its newest turn left. */
function leftScope(log: LogContext, config: SessionConfig, generation: string): LogScope {
  return { keyPrefix: log.keyPrefix, id: config.id, generation };
}

/**
 * Carries the charges of each generation `config` owes (`carry_from`), each listed up to
 * `attempts` times, then, given the etag `config` was read with, puts it without those carried
 * (if-match: a config changed meanwhile keeps them, for the write after). True when none is owed
 * any more; a failure leaves the generation owed, never thrown. `onMoved`: called for each charge
 * it put under the generation the config names.
 */
export async function payOwed(
  log: LogContext,
  config: SessionConfig,
  etag: string | undefined,
  attempts = CARRY_ATTEMPTS,
  onMoved?: () => void,
): Promise<boolean> {
  const owed = config.carry_from ?? [];
  if (owed.length === 0) return true;
  const carried: string[] = [];
  for (const generation of owed) {
    try {
      if (await carriedOn(log, leftScope(log, config, generation), attempts, onMoved)) carried.push(generation);
    } catch {
      // Still owed: the next write lists it again.
    }
  }
  if (carried.length === 0 || etag === undefined) return false;
  const { carry_from: _, carry_mark, ...rest } = config;
  const left = owed.filter((generation) => !carried.includes(generation));
  const still = left.length > 0 ? { carry_from: left, ...(carry_mark ? { carry_mark } : {}) } : {};
  const next: SessionConfig = { ...rest, ...still };
  const key = sessionConfigKey(log.keyPrefix, config.id);
  const put = { ifMatch: etag, contentType: 'application/json' };
  const written = await log.store.put(key, JSON.stringify(next), put).catch(() => null);
  return written !== null && left.length === 0;
}

/** `carry_from` of the config a delete of the newest turn puts on leaving `left`, from the one it read. */
export function owedAfter(current: SessionConfig, left: string): string[] {
  return [left, ...(current.carry_from ?? []).filter((generation) => generation !== left)];
}
