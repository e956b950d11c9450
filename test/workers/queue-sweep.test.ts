import {
  createExecutionContext,
  createMessageBatch,
  createScheduledController,
  env,
  getQueueResult,
  waitOnExecutionContext,
} from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import worker from '../../functions/worker.ts';
import { sha256Hex } from '../../lib/hash.ts';
import { R2Store } from '../../lib/store/r2.ts';
import type { BackgroundTurn } from '../../lib/turn/index.ts';
import { SessionLog } from '../support/session-log.ts';

// The Cron Trigger takes up the inputs queued behind a turn whose process died once its lease
// ran out, with no webhooks configured and no client coming back: its pickup runs the turn on
// the TURNS queue when the binding is there, else in the isolate (waitUntil).

const bindings = env as unknown as Record<string, unknown> & { BUCKET: R2Bucket };

/** Session `s` under `keyPrefix`: turn 1 claimed two minutes ago by a process that died, an input queued behind it. */
async function deadTurnWithQueue(keyPrefix: string): Promise<SessionLog> {
  const store = new R2Store(bindings.BUCKET);
  const twoMinutesAgo = new Date(Date.now() - 120_000);
  const dead = new SessionLog(store, { keyPrefix, clock: () => twoMinutesAgo });
  await dead.create({ id: 's', model: 'echo', on_busy: 'enqueue' });
  expect((await dead.beginTurn('s', { input: [] })).kind).toBe('claimed');
  await dead.enqueue('s', {
    input: [{ type: 'message', role: 'user', content: 'queued' }],
    request: {},
    key_sha256: sha256Hex('queued'),
  });
  return new SessionLog(store, { keyPrefix });
}

/** Runs the Cron Trigger (wrangler.toml's, at 12:05) with `vars` over the bindings, to its end (waitUntil too). */
async function cronRun(vars: Record<string, unknown>): Promise<void> {
  const context = createExecutionContext();
  // No webhooks: nothing but the sweep finds the dead turn.
  const environment = { ...bindings, WEBHOOK_SECRET: '', ...vars };
  const controller = createScheduledController({ cron: '* * * * *', scheduledTime: Date.UTC(2026, 0, 1, 12, 5) });
  await worker.scheduled(controller, environment as never, context);
  await waitOnExecutionContext(context);
}

describe('the Cron Trigger (scheduled) and the inputs queued behind a dead turn', () => {
  it('closes the turn and runs the queued input in the isolate without the TURNS binding', async () => {
    const keyPrefix = `${crypto.randomUUID()}/`;
    const log = await deadTurnWithQueue(keyPrefix);
    expect((await bindings.BUCKET.list({ prefix: `${keyPrefix}queues/` })).objects).toHaveLength(1);
    await cronRun({ KEY_PREFIX: keyPrefix, TURNS: undefined });
    expect(await log.getTurn('s', 1)).toMatchObject({ status: 'failed', error: { code: 'lease_expired' } });
    expect(await log.getTurn('s', 2)).toMatchObject({ status: 'completed' });
    expect(await log.queued(await log.scope('s'))).toEqual([]);
    // The sweep met turn 2 running, and kept the marker for it: the next run, once it closed and
    // nothing is queued, removes it.
    expect((await bindings.BUCKET.list({ prefix: `${keyPrefix}queues/` })).objects).toHaveLength(1);
    await cronRun({ KEY_PREFIX: keyPrefix, TURNS: undefined });
    expect((await bindings.BUCKET.list({ prefix: `${keyPrefix}queues/` })).objects).toEqual([]);
  });

  it('sends the queued input to the TURNS queue, whose consumer runs it', async () => {
    const keyPrefix = `${crypto.randomUUID()}/`;
    const log = await deadTurnWithQueue(keyPrefix);
    // The messages the binding was sent, delivered below to this worker's consumer with this key prefix.
    const sent: BackgroundTurn[] = [];
    const turns = { send: async (run: BackgroundTurn) => void sent.push(run) };
    await cronRun({ KEY_PREFIX: keyPrefix, TURNS: turns });
    expect(sent).toEqual([expect.objectContaining({ session_id: 's', turn: 2 })]);
    expect(await log.getTurn('s', 2)).toMatchObject({ status: 'queued' });
    const batch = createMessageBatch<BackgroundTurn>(
      'tailgate-turns',
      sent.map((body, index) => ({ id: `m${index}`, timestamp: new Date(), attempts: 1, body })),
    );
    const context = createExecutionContext();
    await worker.queue(batch as never, { ...bindings, KEY_PREFIX: keyPrefix } as never, context);
    expect((await getQueueResult(batch, context)).explicitAcks).toEqual(['m0']);
    expect(await log.getTurn('s', 1)).toMatchObject({ status: 'failed', error: { code: 'lease_expired' } });
    expect(await log.getTurn('s', 2)).toMatchObject({ status: 'completed' });
  });

  // A run that outlasts its minute overlaps the next (the platform does not wait for it), and the
  // message of the input's turn may then be delivered twice: the input runs once all the same.
  // A short lease: the second delivery waits a renewal to find the first's runner alive.
  it('takes the input up once when two runs overlap, and runs its turn once when its message comes twice', async () => {
    const keyPrefix = `${crypto.randomUUID()}/`;
    const log = await deadTurnWithQueue(keyPrefix);
    const sent: BackgroundTurn[] = [];
    const turns = { send: async (run: BackgroundTurn) => void sent.push(run) };
    await Promise.all([
      cronRun({ KEY_PREFIX: keyPrefix, TURNS: turns, TURN_LEASE_MS: '3000' }),
      cronRun({ KEY_PREFIX: keyPrefix, TURNS: turns, TURN_LEASE_MS: '3000' }),
    ]);
    expect(sent).toEqual([expect.objectContaining({ session_id: 's', turn: 2 })]);
    const batch = createMessageBatch<BackgroundTurn>(
      'tailgate-turns',
      [...sent, ...sent].map((body, index) => ({ id: `m${index}`, timestamp: new Date(), attempts: 1, body })),
    );
    const context = createExecutionContext();
    const [info, told] = [console.info, [] as string[]];
    console.info = (line?: unknown) => void told.push(String(line));
    try {
      await worker.queue(
        batch as never,
        { ...bindings, KEY_PREFIX: keyPrefix, TURN_LEASE_MS: '3000' } as never,
        context,
      );
    } finally {
      console.info = info;
    }
    expect((await getQueueResult(batch, context)).explicitAcks.sort()).toEqual(['m0', 'm1']);
    expect(await log.getTurn('s', 2)).toMatchObject({ status: 'completed' });
    expect((await log.get('s')).counts.turns).toBe(2);
    // The second delivery's runner called no model: it found the turn run elsewhere, or closed.
    expect(
      told.filter((line) => /background turn 2 of session s (runs elsewhere|is closed already)/.test(line)),
    ).toHaveLength(1);
  });
});
