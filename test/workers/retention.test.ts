import { createExecutionContext, createScheduledController, env, waitOnExecutionContext } from 'cloudflare:test';
import { describe, expect, it, vi } from 'vitest';
import worker from '../../functions/worker.ts';
import { R2Store } from '../../lib/store/r2.ts';
import { SessionLog } from '../support/session-log.ts';

const DAY = 86_400_000;
const bindings = env as unknown as Record<string, unknown> & { BUCKET: R2Bucket };

describe('the Cron Trigger (scheduled) on the R2 binding', () => {
  it('deletes the sessions idle longer than their retention and keeps the others', async () => {
    const keyPrefix = `${crypto.randomUUID()}/`;
    const threeDaysAgo = new Date(Date.now() - 3 * DAY);
    const old = new SessionLog(new R2Store(bindings.BUCKET), { keyPrefix, clock: () => threeDaysAgo });
    await old.create({ id: 'idle', expires_after_days: 1 });
    await old.create({ id: 'kept', expires_after_days: 10 });
    await old.create({ id: 'by-default' });
    const context = createExecutionContext();
    await worker.scheduled(
      createScheduledController({ cron: '17 * * * *' }),
      { ...bindings, KEY_PREFIX: keyPrefix, SESSION_TTL_DAYS: '2' } as never,
      context,
    );
    await waitOnExecutionContext(context);
    const log = new SessionLog(new R2Store(bindings.BUCKET), { keyPrefix });
    await expect(log.get('idle')).rejects.toMatchObject({ code: 'not_found' });
    await expect(log.get('by-default')).rejects.toMatchObject({ code: 'not_found' });
    expect((await log.get('kept')).expires_after_days).toBe(10);
    expect((await log.listSessions({ limit: 10 })).sessions.map((row) => row.id)).toEqual(['kept']);
  });

  it("sweeps retention at wrangler.toml's run at :17 only, not at the other minutes", async () => {
    const keyPrefix = `${crypto.randomUUID()}/`;
    const old = new SessionLog(new R2Store(bindings.BUCKET), {
      keyPrefix,
      clock: () => new Date(Date.now() - 3 * DAY),
    });
    await old.create({ id: 'idle', expires_after_days: 1 });
    const log = new SessionLog(new R2Store(bindings.BUCKET), { keyPrefix });
    const runAt = async (minute: number) => {
      const context = createExecutionContext();
      const controller = createScheduledController({
        cron: '* * * * *',
        scheduledTime: Date.UTC(2026, 0, 1, 9, minute),
      });
      await worker.scheduled(controller, { ...bindings, KEY_PREFIX: keyPrefix } as never, context);
      await waitOnExecutionContext(context);
    };
    await runAt(16);
    expect((await log.get('idle')).expires_after_days).toBe(1);
    await runAt(17);
    await expect(log.get('idle')).rejects.toMatchObject({ code: 'not_found' });
  });
});

describe('the Cron Trigger (scheduled) of a deployment whose settings do not parse', () => {
  it('logs one line naming the setting and runs nothing', async () => {
    const error = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    let logged: unknown[][];
    try {
      const context = createExecutionContext();
      const environment = {
        ...bindings,
        KEY_PREFIX: `${crypto.randomUUID()}/`,
        DEFAULT_SESSION_BUDGET: '{"max_cost": 5}',
      };
      await worker.scheduled(createScheduledController({ cron: '17 * * * *' }), environment as never, context);
      await waitOnExecutionContext(context);
    } finally {
      logged = [...error.mock.calls];
      error.mockRestore();
    }
    expect(logged).toEqual([
      [expect.stringMatching(/^tailgate: the Cron Trigger's run skipped: invalid setting DEFAULT_SESSION_BUDGET/)],
    ]);
  });
});
