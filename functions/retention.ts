import { parseServiceConfig, type ServiceConfig } from '../lib/config.ts';
import type { SweepResult } from '../lib/session/session-log.ts';
import type { ObjectStore } from '../lib/store/object-store.ts';
import { requireConditionalWrites } from '../lib/store/write-probe.ts';
import { sessionLogFor } from './services.ts';
import { sweepTokenSpend } from '../lib/ledger/token-spend.ts';
import { loggable } from '../lib/loggable.ts';

/**
 * The retention sweep (lib/session/log/retention.ts) with a deployment's settings: on Workers
 * from the Cron Trigger (`scheduled` in functions/worker.ts, `[triggers]` in wrangler.toml), on
 * Node and Deno from `scheduleRetention`'s timer.
 */

/** How often Node and Deno sweep; the first sweep runs a minute after start. */
export const RETENTION_SWEEP_MS = 60 * 60 * 1000;
const FIRST_SWEEP_MS = 60 * 1000;

/** One sweep of the store `storeFor` gives for the settings in `env`. */
export async function sweepExpiredSessions(
  storeFor: (config: ServiceConfig) => ObjectStore,
  env: Record<string, unknown>,
): Promise<SweepResult> {
  const config = parseServiceConfig(env);
  const store = storeFor(config);
  // Deletes close open turns with create-only puts: the store must honour them, as for requests.
  await requireConditionalWrites(store, { keyPrefix: config.keyPrefix });
  // The spend records of expired tokens go too (docs/STORAGE.md, "Token spend").
  await sweepTokenSpend(store, config.keyPrefix, new Date());
  return sessionLogFor(store, config).sweepExpired();
}

/** Logs what a sweep did; a failed sweep is logged and the next one tries again. */
export async function reportSweep(sweep: Promise<SweepResult>): Promise<void> {
  try {
    const result = await sweep;
    if (result.deleted.length > 0)
      console.log(`tailgate: retention deleted ${result.deleted.length} idle sessions: ${result.deleted.join(', ')}`);
    if (result.orphans > 0) console.log(`tailgate: retention deleted ${result.orphans} index entries of sessions gone`);
    for (const { id, error } of result.failed) {
      console.error(`tailgate: retention of session ${id} failed`, loggable(error));
    }
  } catch (error) {
    console.error('tailgate: retention sweep failed', loggable(error));
  }
}

/** Node and Deno: a sweep a minute after start, then every RETENTION_SWEEP_MS. Returns a stop. */
export function scheduleRetention(sweep: () => Promise<SweepResult>): () => void {
  return schedulePeriodic(() => reportSweep(sweep()), FIRST_SWEEP_MS, RETENTION_SWEEP_MS);
}

/**
 * Node and Deno: `run` `firstMs` after start, then every `everyMs`, one run at a time (a run
 * due while the last one goes on is skipped); `run` logs its own failures. Neither timer keeps
 * the process alive. Returns a stop.
 */
export function schedulePeriodic(run: () => Promise<void>, firstMs: number, everyMs: number): () => void {
  let running = false;
  const tick = () => {
    if (running) return;
    running = true;
    const done = () => {
      running = false;
    };
    void run().then(done, done);
  };
  const first = setTimeout(tick, firstMs);
  const every = setInterval(tick, everyMs);
  (first as { unref?: () => void }).unref?.();
  (every as { unref?: () => void }).unref?.();
  return () => {
    clearTimeout(first);
    clearInterval(every);
  };
}
