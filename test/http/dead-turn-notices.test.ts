import { describe, expect, it } from 'vitest';
import { echoModel } from '../../lib/models/echo.ts';
import type { Model } from '../../lib/models/model.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { countedProcess, type CountedLine } from '../support/counted-process.ts';
import { killedAtCompletion } from '../support/killed-at-completion.ts';
import { TOKEN } from './http-suite.ts';

/**
 * A turn that took an inbox notice and whose process died (a kill -9) before it closed, closed
 * by `GET .../turns/1` once its lease ran out (`lease_expired`): what the reads tell of that
 * notice then (the turn's receipt, `.../inbox/delivered`), what the next turn delivers, and what
 * a retake after such a turn costs a process started afresh (README: the exceptions to a turn's 8
 * storage operations), as its log line counts them (`storage_ops`).
 */

// Long enough that no measured turn renews its lease (a renewal, a third of it in, is a get and
// more) however loaded the machine; diedHolding moves the clock past it instead of waiting.
const LEASE_MS = 30_000;
const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: String(LEASE_MS) };

/** Processes of the app on one memory store, sharing a clock the test moves. */
function world() {
  let now = Date.parse('2026-01-01T00:00:00Z');
  const clock = () => new Date(now);
  const store = new MemoryStore({ clock });
  /** A process of the app seeing the store as `wrap` gives it, its models `model` (echo by default). */
  const processOf = (wrap: (store: ObjectStore) => ObjectStore = (inner) => inner, model: Model = echoModel) =>
    countedProcess(wrap(store), { environment, clock, base: '/v1/sessions/s', model });
  /** Session `s`, with notice `0001-n` pending when `notice`. */
  const session = async (notice: boolean) => {
    const { app } = processOf();
    const created = await app.request('http://tailgate.test/v1/sessions', {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ id: 's' }),
    });
    expect(created.status).toBe(201);
    if (notice)
      expect((await processOf().call('POST', '/inbox', { name: '0001-n', content: 'budget low' })).status).toBe(201);
  };
  /** Turn 1 (input `one`), whose process dies as it writes its completion; the clock then passes its lease. */
  const diedHolding = async () => {
    const dying = processOf(killedAtCompletion);
    expect((await dying.call('POST', '/turns', { input: 'one' })).status).toBeGreaterThanOrEqual(500);
    await dying.drain();
    now += LEASE_MS + 1;
  };
  /** Turn 1 (input `one`), whose model call failed (502): an ordinary failure. */
  const failed = async () => {
    const failing = processOf(undefined, { ...echoModel, generate: () => Promise.reject(new Error('down')) });
    expect((await failing.call('POST', '/turns', { input: 'one' })).status).toBeGreaterThanOrEqual(500);
    await failing.drain();
  };
  /** The log line of a retake (`input: []`) of turn 1 by a process started afresh, once a read closed turn 1. */
  const retake = async () => {
    const reader = processOf();
    expect((await reader.call('GET', '/turns/1')).body.status).toBe('failed');
    await reader.drain();
    const fresh = processOf();
    const taken = await fresh.call('POST', '/turns', { input: [] });
    expect(taken.body.output).toMatchObject([{ type: 'message', content: 'echo: one' }]);
    await fresh.drain();
    return fresh.lines.find((line) => line.turn === 2)!;
  };
  return { processOf, session, diedHolding, failed, retake };
}

describe('a turn that took a notice, whose process died, closed by its lease', () => {
  it('lists its notice under no turn, as its receipt names none, until the next turn delivers it', async () => {
    const { processOf, session, diedHolding } = world();
    await session(true);
    await diedHolding();
    const reader = processOf();
    const closed = await reader.call('GET', '/turns/1');
    expect(closed.body).toMatchObject({ status: 'failed', error: { code: 'lease_expired' }, notices: [] });
    expect((await reader.call('GET', '/inbox')).body.pending).toEqual([]);
    // Taken, but delivered by no turn yet: listed under none.
    expect((await reader.call('GET', '/inbox/delivered')).body.delivered).toMatchObject([
      { name: '0001-n', stored_as: '0001-n', turn: null },
    ]);
    const next = await reader.call('POST', '/turns', { input: [] });
    expect(next.body.context.notices_delivered).toEqual(['0001-n']);
    await reader.drain();
    // Every record listed under a closed turn is in that turn's receipt, and one turn's only.
    expect((await reader.call('GET', '/inbox/delivered')).body.delivered).toMatchObject([{ name: '0001-n', turn: 2 }]);
    expect((await reader.call('GET', '/turns/2')).body.notices).toMatchObject([
      { name: '0001-n', stored_as: '0001-n' },
    ]);
    expect((await reader.call('GET', '/turns/1')).body.notices).toEqual([]);
  });
});

describe('a retake after a turn closed by its lease, by a process started afresh', () => {
  /** Of `line`'s calls, those of `operation` on keys under `part`. */
  const callsOf = (line: CountedLine, operation: string, part: string) =>
    line.calls.filter((call) => call.operation === operation && call.key.includes(part));

  it('costs 3 calls more than one after a failed turn: the stopped turn’s spend twice, its notices', async () => {
    const ordinary = world();
    await ordinary.session(false);
    await ordinary.failed();
    const afterFailure = await ordinary.retake();
    expect(afterFailure.storage_ops).toEqual({ get: 2, head: 0, put: 2, list: 2, delete: 0, total: 6 });

    const { session, diedHolding, retake } = world();
    await session(false);
    await diedHolding();
    const line = await retake();
    expect(line.storage_ops).toEqual({ get: 4, head: 0, put: 2, list: 3, delete: 0, total: 9 });
    // Its claim and its completion each look for what the stopped turn spent (docs/STORAGE.md,
    // "Stopped spend"), and its claim lists the notices that turn took (docs/STORAGE.md, "Notices").
    expect(callsOf(line, 'get', '/spent/')).toHaveLength(2);
    expect(callsOf(line, 'list', '/inbox_removed/')).toHaveLength(1);
    expect(callsOf(afterFailure, 'get', '/spent/')).toHaveLength(0);
    expect(callsOf(afterFailure, 'list', '/inbox_removed/')).toHaveLength(0);
  });
});
