import { describe, expect, it } from 'vitest';
import type { AppOptions } from '../../functions/app.ts';
import { Metrics } from '../../functions/metrics.ts';
import { closesByOthers } from '../../functions/services.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { appHarness } from '../support/app-harness.ts';
import { heldOptions, releasedAfterEach } from '../support/slow-echo.ts';
import { createClient, TOKEN } from './http-suite.ts';

// A background turn whose process died (its runner never ran: nothing of it is logged or
// counted anywhere) is closed as failed `lease_expired` by another process once its lease ran
// out: the process whose close landed logs the turn's line and counts it in its metrics, once,
// whoever closes it (a GET of the turn, the session's next writer, a reader of its events);
// another process reading the closed turn afterwards tells nothing more. A turn closed so by
// the process that runs it (its clock past the lease) is told by its stopped attempt alone.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: '3000' };
const hourLater = () => new Date(Date.now() + 3_600_000);
const heldEcho = releasedAfterEach();

/** A process on `store`: its client, its log lines and its metrics. */
function process(store: ObjectStore, options: Partial<AppOptions> = {}, env = environment) {
  const lines: string[] = [];
  const metrics = new Metrics();
  const harness = appHarness(store, env, { metrics, logLine: (line) => lines.push(line), ...options });
  const api = createClient(harness);
  /** Its log lines of turn `turn` of session `id`. */
  const linesOf = (id: string, turn: number) =>
    lines.map((line) => JSON.parse(line)).filter((line) => line.session_id === id && line.turn === turn);
  return { api, metrics, linesOf };
}

/** A session whose background turn 1 (model `echo`) was claimed by a process that died before running it. */
async function deadTurn(store: ObjectStore) {
  // Its background turns never run: it dies before it runs them.
  const dead = process(store, { queueTurn: () => async () => undefined });
  const id = await dead.api.session();
  const posted = await dead.api.post(`/v1/sessions/${id}/turns`, { input: 'first', model: 'echo', background: true });
  expect(posted.status).toBe(202);
  return { id, dead };
}

type Closer = (api: ReturnType<typeof createClient>, id: string) => Promise<unknown>;
const closers: [string, Closer][] = [
  [
    'a GET of the turn',
    async (api, id) =>
      expect((await api.get(`/v1/sessions/${id}/turns/1`)).body).toMatchObject({
        status: 'failed',
        error: { code: 'lease_expired' },
      }),
  ],
  [
    'the next writer',
    async (api, id) =>
      expect(await api.post(`/v1/sessions/${id}/turns`, { input: 'next' })).toMatchObject({
        status: 200,
        body: { turn: 2 },
      }),
  ],
  [
    'a reader of its events',
    async (api, id) => {
      const events = await api.get(`/v1/sessions/${id}/turns/1/events`);
      expect(events.status).toBe(200);
      expect(events.body).toContain('lease_expired');
    },
  ],
];

describe('a turn closed as lease_expired by another process than its dead runner', () => {
  it.each(closers)('is logged and counted once, by the process whose close landed: %s', async (_, close) => {
    const store = new MemoryStore();
    const { id, dead } = await deadTurn(store);
    const closer = process(store, { clock: hourLater });
    const later = process(store, { clock: hourLater });
    await close(closer.api, id);
    // Read again, by the closer and by a process that found it closed: nothing more is told.
    expect((await closer.api.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('failed');
    const receipt = (await later.api.get(`/v1/sessions/${id}/turns/1`)).body;
    expect(receipt.status).toBe('failed');

    const [line, ...more] = closer.linesOf(id, 1);
    expect(more).toEqual([]);
    expect(line).toMatchObject({
      event: 'turn',
      level: 'warn',
      status: 'failed',
      error_code: 'lease_expired',
      model: 'echo',
      tokens: null,
      cost_usd: null,
      first_output_ms: null,
    });
    // From its claim to its close, as its receipt dates them (the closer's clock runs an hour ahead).
    expect(line.duration_ms).toBe(Date.parse(receipt.completed_at) - Date.parse(receipt.started_at));
    expect(later.linesOf(id, 1)).toEqual([]);
    // The dead process told only that it accepted the turn (no line with its number).
    expect(dead.linesOf(id, 1)).toEqual([]);

    const scraped = closer.metrics.render();
    expect(scraped).toContain('tailgate_turn_errors_total{code="lease_expired"} 1\n');
    expect(scraped).toContain('tailgate_turns_total{status="failed",model="echo"} 1\n');
    expect(scraped).toContain('tailgate_turn_duration_seconds_count{status="failed"} 1\n');
    expect(later.metrics.render()).not.toContain('lease_expired');
  });

  it('is told once by the attempt it stops when the process that runs it closes it', async () => {
    const slow = heldEcho();
    const { options, drain } = heldOptions(slow.model);
    let offset = 0;
    // A lease of ten minutes: no renewal within the test; the process's clock then jumps past it.
    const env = { ...environment, TURN_LEASE_MS: '600000' };
    const runner = process(new MemoryStore(), { ...options, clock: () => new Date(Date.now() + offset) }, env);
    const id = await runner.api.session();
    const posted = await runner.api.post(`/v1/sessions/${id}/turns`, { input: 'slow one', background: true });
    expect(posted.status).toBe(202);
    await expect.poll(() => slow.signals.length).toBe(1);
    offset = 3_600_000;
    expect((await runner.api.get(`/v1/sessions/${id}/turns/1`)).body).toMatchObject({
      status: 'failed',
      error: { code: 'lease_expired' },
    });
    await drain();
    expect(slow.signals[0]!.aborted).toBe(true);
    expect(runner.linesOf(id, 1)).toMatchObject([{ status: 'failed', error_code: 'lease_expired', model: 'echo' }]);
    expect(runner.metrics.render()).toContain('tailgate_turn_errors_total{code="lease_expired"} 1\n');
  });
});

it('a log line that throws does not fail the close that told it', () => {
  const { onClosedByOther } = closesByOthers(undefined, () => {
    throw new Error('log sink down');
  });
  const closed = {
    scope: { keyPrefix: '', id: 's', generation: '' },
    turn: 1,
    status: 'failed' as const,
    error: { code: 'lease_expired', message: 'lapsed' },
    completedAt: new Date().toISOString(),
    webhookUrl: undefined,
  };
  expect(() => onClosedByOther?.(closed)).not.toThrow();
});
