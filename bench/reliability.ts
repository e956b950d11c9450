import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startFauxqs } from 'fauxqs';
import { DEFAULTS } from '../lib/defaults.ts';
import { killMidTurnAndRecover } from '../test/runtimes/crash-recovery.ts';
import { startConditionalGateway } from '../test/support/s3-store.ts';

/**
 * The reliability figures of bench/RESULTS.md:
 * - the protocol simulation (test/session/protocol-simulation.test.ts) run with
 *   `interleavings` random interleavings: how many crash points and interleavings it checked;
 * - kill -9 of a real Node server mid-stream with the default settings (TURN_LEASE_MS 30 s, or
 *   `leaseMs` when given): the time until the session takes a turn again, and with a cancel
 *   instead of waiting.
 * Only the simulation's two properties these figures count run (its crash matrix and its
 * concurrent actors); `npm test` runs the whole file.
 */

export interface ReliabilityFigures {
  simulation: {
    crashPoints: Record<string, number>;
    interleavings: number;
    withCrash: number;
    actors: Record<number, number>;
    storageCalls: number;
    seconds: number;
  };
  recovery: { leaseMs: number; recoveryMs: number; restartMs: number; refused: number };
  cancelled: { recoveryMs: number; restartMs: number };
  command: string;
}

const root = fileURLToPath(new URL('..', import.meta.url));

export async function measureReliability(options: {
  interleavings: number;
  /** TURN_LEASE_MS of the killed server; the default (lib/defaults.ts) when not given. */
  leaseMs?: number;
  log: (line: string) => void;
}): Promise<ReliabilityFigures> {
  const reportDirectory = mkdtempSync(join(tmpdir(), 'tailgate-sim-'));
  const report = join(reportDirectory, 'report.json');
  options.log(`  protocol simulation, ${options.interleavings} interleavings`);
  const started = performance.now();
  let simulation: ReliabilityFigures['simulation'];
  try {
    try {
      const file = 'test/session/protocol-simulation.test.ts';
      execFileSync('npx', ['vitest', 'run', '--project', 'unit', file, '-t', 'the session protocol '], {
        cwd: root,
        env: { ...process.env, SIMULATION_RUNS: String(options.interleavings), SIMULATION_REPORT: report },
        stdio: ['ignore', 'pipe', 'pipe'],
        encoding: 'utf8',
      });
    } catch (error) {
      // vitest's own report says what failed: show it rather than only the exit status.
      const failed = error as { stdout?: string; stderr?: string };
      throw new Error(`the protocol simulation failed:\n${failed.stdout ?? ''}${failed.stderr ?? ''}`);
    }
    simulation = { ...JSON.parse(readFileSync(report, 'utf8')), seconds: (performance.now() - started) / 1000 };
  } finally {
    rmSync(reportDirectory, { recursive: true, force: true });
  }

  const leaseMs = options.leaseMs ?? DEFAULTS.turnLeaseMs;
  const fauxqs = await startFauxqs({ port: 0, logger: false, host: '127.0.0.1' } as Parameters<typeof startFauxqs>[0]);
  const bucket = 'tailgate-bench';
  fauxqs.createBucket(bucket);
  const gateway = await startConditionalGateway(fauxqs.address);
  const environment = (keyPrefix: string) => (port: number) => ({
    PORT: String(port),
    API_TOKEN: 'bench',
    S3_ENDPOINT: gateway.endpoint,
    S3_BUCKET: bucket,
    S3_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'bench',
    AWS_SECRET_ACCESS_KEY: 'bench',
    KEY_PREFIX: keyPrefix,
    ...(options.leaseMs === undefined ? {} : { TURN_LEASE_MS: String(options.leaseMs) }),
  });
  try {
    options.log(`  kill -9 mid-stream, lease ${leaseMs / 1000} s: waiting for it to run out`);
    const waited = await killMidTurnAndRecover(environment('recover/'), 'bench');
    options.log(`  recovered in ${(waited.recoveryMs / 1000).toFixed(1)} s; now with a cancel`);
    const cancelled = await killMidTurnAndRecover(environment('cancel/'), 'bench', { cancel: true });
    return {
      simulation,
      recovery: {
        leaseMs,
        recoveryMs: waited.recoveryMs,
        restartMs: waited.restartMs,
        refused: waited.refused.length,
      },
      cancelled: { recoveryMs: cancelled.recoveryMs, restartMs: cancelled.restartMs },
      command: 'npm run bench -- --only=reliability',
    };
  } finally {
    await gateway.close();
    await fauxqs.stop();
  }
}
