import { describe, expect, it } from 'vitest';
import { createTurnRunner, type AppOptions } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { BackgroundTurn } from '../../lib/turn/index.ts';
import { appHarness } from '../support/app-harness.ts';
import { CountingStore } from '../support/counting-store.ts';
import { heldOptions, releasedAfterEach } from '../support/slow-echo.ts';
import { createClient, TOKEN } from './http-suite.ts';

// What a request that meets a busy session costs in storage operations (README: the exceptions
// to a turn's 8), as its log line counts them (`storage_ops`, docs/API.md "Metrics and logs") in
// one process, whose record cache (lib/session/log/record-cache.ts) holds the records it wrote, so
// it gets none of them:
// an `interrupt` closes the running turn before it takes its own; an input queued behind the
// running turn is stored and indexed, and runs later as a background turn (on the queue of
// background turns, as on Workers: what any turn costs). No notices, no Idempotency-Key.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' };
const heldEcho = releasedAfterEach();

/** What a queued turn's run costs (on the queue of background turns, as in process). */
const QUEUED_TURN = { get: 2, head: 0, put: 3, list: 2, delete: 0, total: 7 };

type Line = { turn: number | null; status: string; storage_ops: Record<string, number> };

/**
 * A clock a millisecond later at each stamp: two inputs queued within one millisecond would be
 * stamped alike and read to be ordered (docs/STORAGE.md, "Queued inputs"), a count that would
 * depend on the machine's speed.
 */
function movingClock(): () => Date {
  let now = 0;
  return () => {
    now = Math.max(Date.now(), now + 1);
    return new Date(now);
  };
}

function world() {
  const store = new CountingStore(new MemoryStore({ clock: movingClock() }));
  const slow = heldEcho();
  const { options: held, drain } = heldOptions(slow.model);
  const lines: Line[] = [];
  const sent: BackgroundTurn[] = [];
  const options: Omit<AppOptions, 'store'> = {
    ...held,
    logLine: (line) => void lines.push(JSON.parse(line)),
    queueTurn: () => async (run) => void sent.push(run),
  };
  const api = createClient(appHarness(store, environment, options));
  const runner = createTurnRunner({ ...options, store: () => store, readEnvironment: () => environment });
  /** Turn 1 of session `id` is running, its model call held. */
  const calling = async (id: string) => {
    await expect.poll(() => slow.signals.length).toBe(1);
    await expect.poll(async () => (await api.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('in_progress');
  };
  return { store, api, drain, calling, lines, release: slow.release, sent, runner };
}

describe('the storage operations of a request on a busy session', () => {
  it('an interrupting turn: 15 (6 gets, 3 puts, 6 lists)', async () => {
    const { api, drain, calling, lines } = world();
    const id = await api.session();
    const pending = api.post(`/v1/sessions/${id}/turns`, { input: 'slow one' });
    await calling(id);
    const taken = await api.post(`/v1/sessions/${id}/turns`, { input: 'now', on_busy: 'interrupt' });
    expect(taken.status, JSON.stringify(taken.body)).toBe(200);
    expect((await pending).status).toBe(409);
    await drain();
    const line = lines.find((entry) => entry.turn === 2)!;
    expect(line.storage_ops).toEqual({ get: 6, head: 0, put: 3, list: 6, delete: 0, total: 15 });
  });

  it('an input queued behind the running turn: 10 to queue it, 7 for its turn', async () => {
    const { store, api, drain, calling, lines, release, sent, runner } = world();
    const id = await api.session({ on_busy: 'enqueue' });
    const pending = api.post(`/v1/sessions/${id}/turns`, { input: 'slow one' });
    await calling(id);
    const queued = await api.post(`/v1/sessions/${id}/turns`, { input: 'later' });
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    expect(lines.find((entry) => entry.status === 'queued')!.storage_ops).toEqual({
      get: 3,
      head: 0,
      put: 3,
      list: 4,
      delete: 0,
      total: 10,
    });
    release();
    expect((await pending).status).toBe(200);
    await drain();
    expect(sent).toHaveLength(1);
    store.reset();
    expect(await runner(sent[0]!, environment, () => undefined)).toBe('done');
    expect((await api.get(`/v1/sessions/${id}/turns/2`)).body.status).toBe('completed');
    expect(lines.find((entry) => entry.turn === 2)!.storage_ops).toEqual(QUEUED_TURN);
  });

  it('an input queued behind another queued input: 11, its listing of two reads which pickup is taking', async () => {
    const { api, drain, calling, lines, release } = world();
    const id = await api.session({ on_busy: 'enqueue' });
    const pending = api.post(`/v1/sessions/${id}/turns`, { input: 'slow one' });
    await calling(id);
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'later' })).body.position).toBe(1);
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'later still' })).body.position).toBe(2);
    const queued = lines.filter((entry) => entry.status === 'queued').map((entry) => entry.storage_ops);
    expect(queued).toEqual([
      { get: 3, head: 0, put: 3, list: 4, delete: 0, total: 10 },
      { get: 4, head: 0, put: 3, list: 4, delete: 0, total: 11 },
    ]);
    release();
    expect((await pending).status).toBe(200);
    await drain();
  });
});

describe('the storage operations of a turn run in process (no queue of background turns)', () => {
  function inProcess() {
    const store = new CountingStore(new MemoryStore());
    const slow = heldEcho();
    const { options: held, drain } = heldOptions(slow.model);
    const lines: Line[] = [];
    const api = createClient(
      appHarness(store, environment, { ...held, logLine: (line) => void lines.push(JSON.parse(line)) }),
    );
    return { store, api, drain, lines, slow };
  }

  it("an input queued behind the running turn: the closer's line its own, the queued turn's 7", async () => {
    const { api, drain, lines, slow } = inProcess();
    const id = await api.session({ on_busy: 'enqueue' });
    const pending = api.post(`/v1/sessions/${id}/turns`, { input: 'slow one' });
    await expect.poll(() => slow.signals.length).toBe(1);
    await expect.poll(async () => (await api.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('in_progress');
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'later' })).status).toBe(202);
    slow.release();
    expect((await pending).status).toBe(200);
    await drain();
    expect((await api.get(`/v1/sessions/${id}/turns/2`)).body.status).toBe('completed');
    const ops = (turn: number) => lines.find((entry) => entry.turn === turn)!.storage_ops;
    // The closer's line is its own turn's (a session's first: 5), the pickup after its answer in
    // none; the queued turn's, its run's alone, as the queue consumer's run counts it (above).
    expect(ops(1)).toEqual({ get: 1, head: 0, put: 2, list: 2, delete: 0, total: 5 });
    expect(ops(2)).toEqual(QUEUED_TURN);
  });
});

describe('the storage operations of a background turn', () => {
  it('its line counts its run alone, in process as on the queue of background turns', async () => {
    const runOn = async (queued: boolean) => {
      const store = new CountingStore(new MemoryStore());
      const { options: held, drain } = heldOptions(heldEcho().model);
      const lines: Line[] = [];
      const sent: BackgroundTurn[] = [];
      const options: Omit<AppOptions, 'store'> = {
        ...held,
        logLine: (line) => void lines.push(JSON.parse(line)),
        ...(queued ? { queueTurn: () => async (run: BackgroundTurn) => void sent.push(run) } : {}),
      };
      const api = createClient(appHarness(store, environment, options));
      const id = await api.session();
      expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'first' })).status).toBe(200);
      expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'later', background: true })).status).toBe(202);
      await drain();
      if (queued) {
        const runner = createTurnRunner({ ...options, store: () => store, readEnvironment: () => environment });
        expect(await runner(sent[0]!, environment, () => undefined)).toBe('done');
      }
      expect((await api.get(`/v1/sessions/${id}/turns/2`)).body.status).toBe('completed');
      return lines.find((entry) => entry.turn === 2)!.storage_ops;
    };
    const onQueue = await runOn(true);
    expect(await runOn(false)).toEqual(onQueue);
  });
});
