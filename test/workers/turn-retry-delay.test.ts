import { createExecutionContext, env, waitOnExecutionContext } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import worker from '../../functions/worker.ts';

// A background turn's queue message whose run meets a storage failure (the turn left open) is
// retried after a delay growing with its deliveries, at most half the turn lease, so a storage
// outage of some seconds does not use every delivery up at once.

const bindings = env as unknown as Record<string, unknown> & { BUCKET: R2Bucket };

/** An R2 bucket whose every operation fails: storage is down. */
const downBucket = new Proxy(bindings.BUCKET, {
  get: (target, name) =>
    typeof Reflect.get(target, name) === 'function'
      ? () => Promise.reject(new Error('R2 is unavailable'))
      : Reflect.get(target, name),
});

/**
 * The delays the consumer asks for the same turn's message on deliveries `attempts` (the pool's
 * createMessageBatch keeps no retry's options: these messages record them).
 */
async function retryDelays(attempts: number[], vars: Record<string, unknown> = {}): Promise<(number | undefined)[]> {
  const body = { session_id: `down-${crypto.randomUUID()}`, turn: 1, writer: 'w' };
  const settled: (number | undefined | 'acked')[] = attempts.map(() => 'acked');
  const messages = attempts.map((attempt, index) => ({
    id: `m${attempt}`,
    timestamp: new Date(),
    attempts: attempt,
    body,
    ack: () => {
      settled[index] = 'acked';
    },
    retry: (options?: { delaySeconds?: number }) => {
      settled[index] = options?.delaySeconds;
    },
  }));
  const batch = { queue: 'tailgate-turns', messages, ackAll: () => {}, retryAll: () => {} };
  const ctx = createExecutionContext();
  const [error, log] = [console.error, console.log];
  console.error = console.log = () => undefined;
  try {
    await worker.queue(batch as never, { ...bindings, BUCKET: downBucket, ...vars } as never, ctx);
    await waitOnExecutionContext(ctx);
  } finally {
    [console.error, console.log] = [error, log];
  }
  expect(settled).not.toContain('acked');
  return settled as (number | undefined)[];
}

describe('a background turn left open by a storage failure', () => {
  // Its last delivery (6, wrangler.toml's max_retries and one) is given up: test/workers/turn-queue.test.ts.
  it('is delivered again after 2, 4, 8 ... s, at most half the default lease of 30 s', async () => {
    expect(await retryDelays([1, 2, 3, 4, 5])).toEqual([2, 4, 8, 15, 15]);
  });

  it('waits at most half of TURN_LEASE_MS, and at least a second', async () => {
    expect(await retryDelays([1, 2, 3], { TURN_LEASE_MS: '9000' })).toEqual([2, 4, 4]);
    expect(await retryDelays([1, 2], { TURN_LEASE_MS: '3000' })).toEqual([1, 1]);
  });

  it("a message whose handling threw waits by the deployment's TURN_LEASE_MS, else the default's", async () => {
    // No bucket bound: the consumer throws before it reads the turn.
    expect(await retryDelays([3, 4], { BUCKET: undefined, TURN_LEASE_MS: '9000' })).toEqual([4, 4]);
    expect(await retryDelays([3, 4], { BUCKET: undefined, TURN_LEASE_MS: 'soon' })).toEqual([8, 15]);
  });
});
