import { describe, expect, it } from 'vitest';
import { createApp, createOutsideServices, createTurnRunner, type AppOptions } from '../../functions/app.ts';
import { queuedInputSchema } from '../../lib/session/queued-input.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { BackgroundTurn } from '../../lib/turn/index.ts';
import { claimInput } from '../../lib/turn/background.ts';
import { appHarness } from '../support/app-harness.ts';
import { heldOptions, releasedAfterEach } from '../support/slow-echo.ts';
import { createClient, TOKEN } from './http-suite.ts';

// A queued input's turn (`on_busy: "enqueue"`) is named in its log line by the request that
// queued it (the x-request-id of its 202), not by the request whose close took it up, which the
// line names apart (`pickup_request_id`; docs/API.md "Metrics and logs"): run in process after
// the closer's response, and on the queue of background turns, whose message carries both.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' };
const heldEcho = releasedAfterEach();

type Line = { turn: number | null; status: string; request_id: string | null; pickup_request_id?: string | null };

describe("a queued input's turn names the request that queued it", () => {
  it.each([false, true])('on the queue of background turns: %s', async (queued) => {
    const store = new MemoryStore();
    const slow = heldEcho();
    const { options: held, drain } = heldOptions(slow.model);
    const lines: Line[] = [];
    const sent: BackgroundTurn[] = [];
    const tasks: Promise<unknown>[] = [];
    const options: Omit<AppOptions, 'store'> = {
      ...held,
      afterResponse: (task) => {
        tasks.push(task);
        held.afterResponse(task);
      },
      logLine: (line) => void lines.push(JSON.parse(line)),
      // As functions/worker.ts sends a message: with the id of the request that sends it.
      ...(queued
        ? {
            queueTurn: (_: unknown, requestId: string | null) => async (run: BackgroundTurn) =>
              void sent.push({ ...run, request_id: requestId ?? undefined }),
          }
        : {}),
    };
    const api = createClient(appHarness(store, environment, options));
    const id = await api.session({ on_busy: 'enqueue' });
    const pending = api.post(`/v1/sessions/${id}/turns`, { input: 'slow one' });
    await expect.poll(() => slow.signals.length).toBe(1);
    await expect.poll(async () => (await api.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('in_progress');
    const before = tasks.length;
    const enqueued = await api.post(`/v1/sessions/${id}/turns`, { input: 'later' });
    // The enqueue's own pickup after its answer finds the session busy: the close takes it up.
    await Promise.allSettled(tasks.slice(before));
    expect(enqueued.status).toBe(202);
    const enqueuer = enqueued.headers.get('x-request-id');
    expect(enqueuer).toMatch(/^req_[0-9a-f]{24}$/);
    slow.release();
    const closed = await pending;
    expect(closed.status).toBe(200);
    const closer = closed.headers.get('x-request-id');
    expect(closer).not.toBe(enqueuer);
    await drain();
    if (queued) {
      expect(sent).toEqual([
        { session_id: id, turn: 2, writer: expect.any(String), request_id: closer, enqueued_by: enqueuer },
      ]);
      const runner = createTurnRunner({ ...options, store: () => store, readEnvironment: () => environment });
      expect(await runner(sent[0]!, environment, () => undefined)).toBe('done');
    }
    expect((await api.get(`/v1/sessions/${id}/turns/2`)).body.status).toBe('completed');
    expect(lines.find((line) => line.status === 'queued')).toMatchObject({ request_id: enqueuer });
    expect(lines.find((line) => line.turn === 1)).toMatchObject({ request_id: closer, pickup_request_id: null });
    expect(lines.find((line) => line.turn === 2)).toMatchObject({ request_id: enqueuer, pickup_request_id: closer });
  });

  it('an entry stored before entries named their request still parses; a malformed name does not', () => {
    const entry = {
      format: 'tailgate.queued.v1',
      key_sha256: 'a'.repeat(64),
      enqueued_at: new Date(0).toISOString(),
      writer: 'w',
      input: [{ type: 'message', role: 'user', content: 'later' }],
      request: {},
    };
    expect(queuedInputSchema.safeParse(entry).success).toBe(true);
    expect(queuedInputSchema.parse({ ...entry, request_id: 'req_1' }).request_id).toBe('req_1');
    expect(queuedInputSchema.safeParse({ ...entry, request_id: 5 }).success).toBe(false);
    expect(queuedInputSchema.safeParse({ ...entry, request_id: '' }).success).toBe(false);
  });

  it('names only its own turn so: a lapsed lease it closes is logged under the request running it', async () => {
    const store = new MemoryStore();
    const lease = { ...environment, TURN_LEASE_MS: '3000' };
    let now = Date.parse('2026-01-01T00:00:00.000Z');
    const lines: Line[] = [];
    const options: AppOptions = {
      store: () => store,
      readEnvironment: () => lease,
      clock: () => new Date(now),
      logLine: (line) => void lines.push(JSON.parse(line)),
      log: () => undefined,
      info: () => undefined,
    };
    const app = createApp(options);
    const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    const created = await app.request('/v1/sessions', { method: 'POST', headers, body: '{}' }, lease);
    const { id } = (await created.json()) as { id: string };
    const servicesFor = createOutsideServices(options);
    // A turn claimed, whose runner never comes: its lease runs out.
    const dead = await claimInput(
      servicesFor(lease, () => undefined),
      id,
      {
        input: [{ type: 'message', role: 'user', content: 'never run' }],
        request: {},
      },
    );
    now += 60_000;
    // The services of a queued input's turn (turn 7 of another session), run by the message of
    // request req_pickup, which close that lapsed lease on their way.
    const queued = { session_id: 'sess_other', turn: 7, writer: 'w', enqueued_by: 'req_enqueuer' };
    const services = servicesFor(lease, () => undefined, 'req_pickup', queued);
    expect(await services.sessions.closeIfExpired(id, dead.turn)).toMatchObject({ status: 'failed' });
    const line = lines.find((each) => each.turn === dead.turn && each.status === 'failed');
    expect(line).toMatchObject({ request_id: 'req_pickup', pickup_request_id: null });
  });
});
