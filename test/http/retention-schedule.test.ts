import { afterEach, describe, expect, it, vi } from 'vitest';
import { QUEUE_SWEEP_MS, scheduleQueueSweep } from '../../functions/queue-sweep.ts';
import { RETENTION_SWEEP_MS, scheduleRetention, sweepExpiredSessions } from '../../functions/retention.ts';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { headerLine } from '../support/export-lines.ts';
import { SessionLog } from '../support/session-log.ts';
import { TOKEN } from './http-suite.ts';

afterEach(() => {
  vi.useRealTimers();
});

describe('the retention sweep of Node and Deno', () => {
  it('runs a minute after start, then every RETENTION_SWEEP_MS, until stopped', async () => {
    vi.useFakeTimers();
    const sweep = vi.fn(async () => ({ checked: 0, deleted: [], orphans: 0, failed: [], more: false }));
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
    expect(error).toHaveBeenCalledWith(
      'tailgate: retention sweep failed',
      expect.stringMatching(/^Error: store down\n\s+at /),
    );
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

  it('keeps a session imported just now, whenever it was created', async () => {
    const store = new MemoryStore();
    const environment = { API_TOKEN: TOKEN, SESSION_TTL_DAYS: '7' };
    const app = createApp({ store: () => store, readEnvironment: () => environment, log: () => undefined });
    // An export of a session created 30 days ago elsewhere, with no items yet.
    const header = { ...JSON.parse(headerLine('migrated')), created_at: new Date(Date.now() - 30 * 86_400_000) };
    const imported = await app.request('/v1/sessions/import', {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/x-ndjson' },
      body: `${JSON.stringify(header)}\n`,
    });
    expect(imported.status, await imported.clone().text()).toBe(201);
    expect((await sweepExpiredSessions(() => store, environment)).deleted).toEqual([]);
    const log = new SessionLog(store);
    expect((await log.get('migrated')).id).toBe('migrated');
  });
});

describe('the queue sweep of Node and Deno', () => {
  it('runs every QUEUE_SWEEP_MS, one at a time, until stopped', async () => {
    vi.useFakeTimers();
    let finish: () => void = () => undefined;
    const sweep = vi.fn(
      () =>
        new Promise<void>((resolve) => {
          finish = resolve;
        }),
    );
    const stop = scheduleQueueSweep(sweep);
    await vi.advanceTimersByTimeAsync(QUEUE_SWEEP_MS - 1);
    expect(sweep).toHaveBeenCalledTimes(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(sweep).toHaveBeenCalledTimes(1);
    // Still running when the next one is due: that one is skipped.
    await vi.advanceTimersByTimeAsync(QUEUE_SWEEP_MS);
    expect(sweep).toHaveBeenCalledTimes(1);
    finish();
    await vi.advanceTimersByTimeAsync(QUEUE_SWEEP_MS);
    expect(sweep).toHaveBeenCalledTimes(2);
    finish();
    stop();
    await vi.advanceTimersByTimeAsync(3 * QUEUE_SWEEP_MS);
    expect(sweep).toHaveBeenCalledTimes(2);
  });
});
