import { createExecutionContext, createMessageBatch, getQueueResult, waitOnExecutionContext } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import worker from '../../functions/worker.ts';
import { MAX_TURN_DELIVERIES, type BackgroundTurn } from '../../lib/turn/index.ts';
import { bindings, consoleErrors } from './worker-harness.ts';

// A background turn's message on the queue of background turns (TURNS, wrangler.toml) whose
// every delivery meets a storage failure: retried, and at its last delivery given up, logged.

const errors = consoleErrors();

/** An R2 bucket whose every operation fails: storage is down. */
const downBucket = new Proxy(bindings.BUCKET, {
  get: (target, name) =>
    typeof Reflect.get(target, name) === 'function'
      ? () => Promise.reject(new Error('R2 is unavailable'))
      : Reflect.get(target, name),
});

/** Delivers one turn's message as its `attempts`-th delivery, storage down (or unbound); what the queue was told. */
async function deliver(attempts: number, vars: Record<string, unknown> = {}) {
  const body = { session_id: `down-${crypto.randomUUID()}`, turn: 3, writer: 'w' };
  const batch = createMessageBatch<BackgroundTurn>('tailgate-turns', [
    { id: 'm', timestamp: new Date(), attempts, body },
  ]);
  const context = createExecutionContext();
  await worker.queue(batch as never, { ...bindings, BUCKET: downBucket, ...vars } as never, context);
  await waitOnExecutionContext(context);
  return { result: await getQueueResult(batch, context), session: body.session_id };
}

describe("a background turn's message whose every delivery fails", () => {
  it('is retried, not given up, before its last delivery', async () => {
    const { result } = await deliver(MAX_TURN_DELIVERIES - 1);
    expect(result.explicitAcks).toEqual([]);
    expect(result.retryMessages).toEqual([expect.objectContaining({ msgId: 'm' })]);
    expect(errors.filter((line) => line.includes('given up'))).toEqual([]);
  });

  it.each([
    ['left open by a storage failure', {}],
    ['whose handling threw (no bucket bound)', { BUCKET: undefined }],
  ])('is given up at its last delivery, %s, with an error line naming the turn', async (_, vars) => {
    const { result, session } = await deliver(MAX_TURN_DELIVERIES, vars);
    expect(result.explicitAcks).toEqual(['m']);
    expect(result.retryMessages).toEqual([]);
    expect(errors.filter((line) => line.includes('given up'))).toEqual([
      expect.stringContaining(
        `background turn 3 of session ${session} given up after ${MAX_TURN_DELIVERIES} deliveries`,
      ),
    ]);
  });
});
