import { afterEach, describe, expect, it, vi } from 'vitest';
import { RETENTION_SWEEP_MS, scheduleRetention, sweepExpiredSessions } from '../../functions/retention.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { SessionLog } from '../support/session-log.ts';

afterEach(() => {
  vi.useRealTimers();
});

describe('the retention sweep of Node and Deno', () => {
  it('runs a minute after start, then every RETENTION_SWEEP_MS, until stopped', async () => {
    vi.useFakeTimers();
    const sweep = vi.fn(async () => ({ checked: 0, deleted: [], failed: [], more: false }));
    const stop = scheduleRetention(sweep);
    await vi.advanceTimersByTimeAsync(59_000);
    expect(sweep).toHaveBeenCalledTimes(0);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(sweep).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(RETENTION_SWEEP_MS);
    expect(sweep).toHaveBeenCalledTimes(2);
    stop();
    await vi.advanceTimersByTimeAsync(3 * RETENTION_SWEEP_MS);
    expect(sweep).toHaveBeenCalledTimes(2);
  });

  it('a failed sweep is logged, and the next one runs', async () => {
    vi.useFakeTimers();
    const error = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    const sweep = vi.fn(async () => {
      throw new Error('store down');
    });
    const stop = scheduleRetention(sweep);
    await vi.advanceTimersByTimeAsync(60_000 + RETENTION_SWEEP_MS);
    stop();
    expect(sweep).toHaveBeenCalledTimes(2);
    expect(error).toHaveBeenCalledWith('tailgate: retention sweep failed', expect.any(Error));
    error.mockRestore();
  });

  it('sweeps with the settings of the environment', async () => {
    const store = new MemoryStore();
    const old = new Date(Date.now() - 5 * 86_400_000);
    const log = new SessionLog(store, { keyPrefix: 'p/', clock: () => old });
    await log.create({ id: 'idle' });
    await log.create({ id: 'kept', expires_after_days: 30 });
    const result = await sweepExpiredSessions(() => store, { KEY_PREFIX: 'p/', SESSION_TTL_DAYS: '4' });
    expect(result.deleted).toEqual(['idle']);
    expect((await log.listSessions({ limit: 10 })).sessions.map((row) => row.id)).toEqual(['kept']);
  });
});
