import { describe, expect, it, vi } from 'vitest';
import { parseServiceConfig } from '../../lib/config.ts';
import { Inbox } from '../../lib/inbox/inbox.ts';
import { echoModel } from '../../lib/models/echo.ts';
import type { Model, ModelRequest } from '../../lib/models/model.ts';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { RunningTurns, runInProcess, runTurn, type TurnServices } from '../../lib/turn/index.ts';
import { SessionLog } from '../support/session-log.ts';

// The turn attempts a process runs (lib/turn/running.ts): each is registered while it runs and
// removed however it ends, and a close the session log writes in the process (a cancel, a
// delete) marks it, and its own timer aborts it within STOP_CHECK_MS, with the error its lease
// renewal would have found. The lease here is ten minutes long: no renewal comes within a test.

/** A model that answers `stuck` prompts only when their call is aborted (then it throws), `fail` never. */
function waitingModel() {
  const signals: AbortSignal[] = [];
  let called = () => {};
  const calling = new Promise<void>((resolve) => (called = resolve));
  const model: Model = {
    ...echoModel,
    async generate(request: ModelRequest) {
      const text = JSON.stringify(request.prompt.at(-1));
      if (text.includes('fail')) throw new Error('the provider broke');
      if (!text.includes('stuck')) return echoModel.generate(request);
      const signal = request.signal!;
      signals.push(signal);
      called();
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      throw signal.reason;
    },
  };
  return { model, signals, calling };
}

function world(store: MemoryStore = new MemoryStore(), leaseMs = 600_000) {
  const running = new RunningTurns();
  const waiting = waitingModel();
  const sessions = new SessionLog(store, { leaseMs, onClosedByOther: (closed) => running.stop(closed) });
  const services: TurnServices = {
    sessions,
    inbox: new Inbox(store, { log: () => {}, sessionExists: sessionExistsIn(store, '') }),
    config: parseServiceConfig({ TURN_LEASE_MS: String(leaseMs) }),
    clock: () => new Date(),
    env: { DEFAULT_MODEL: echoModel.id },
    model: () => waiting.model,
    background: () => undefined,
    startBackground: (run) => runInProcess(services, run),
    log: () => {},
    info: () => {},
    running,
  };
  return { store, sessions, services, running, ...waiting };
}

/** A memory store whose lease puts wait for `release()`: `reached` once one waits, `landed` once it landed. */
class HeldLeaseStore extends MemoryStore {
  readonly reached: Promise<void>;
  readonly landed: Promise<void>;
  release = () => {};
  #reach = () => {};
  #land = () => {};

  constructor() {
    super();
    this.reached = new Promise((resolve) => (this.#reach = resolve));
    this.landed = new Promise((resolve) => (this.#land = resolve));
  }

  override async put(...args: Parameters<MemoryStore['put']>) {
    if (!args[0].endsWith('.lease')) return super.put(...args);
    this.#reach();
    await new Promise<void>((resolve) => (this.release = resolve));
    const put = await super.put(...args);
    this.#land();
    return put;
  }
}

describe('the running turns of a process', () => {
  it('holds an attempt while it runs and none once it completed or failed', async () => {
    const { sessions, services, running } = world();
    await sessions.create({ id: 's' });
    expect(running.size).toBe(0);
    const turn = runTurn(services, 's', { input: 'hello' });
    expect((await turn).output).toMatchObject([{ content: 'echo: hello' }]);
    expect(running.size).toBe(0);
    await expect(runTurn(services, 's', { input: 'fail' })).rejects.toThrow('the provider broke');
    expect(running.size).toBe(0);
    expect((await sessions.getTurn('s', 2)).status).toBe('failed');
  });

  it.each([
    ['cancel', (sessions: SessionLog) => sessions.cancelTurn('s', 1), 'turn_cancelled'],
    ['delete', (sessions: SessionLog) => sessions.delete('s'), 'not_found'],
  ] as const)(
    'a %s written here aborts the model call within STOP_CHECK_MS, answered as a renewal would; nothing left held',
    async (_, close, code) => {
      const { sessions, services, running, signals, calling } = world();
      await sessions.create({ id: 's' });
      const turn = runTurn(services, 's', { input: 'stuck' }).catch((error: unknown) => error);
      await calling;
      expect(running.size).toBe(1);
      await close(sessions);
      // Aborted by the attempt's own check of the mark the close left (no storage read found it).
      await expect.poll(() => signals[0]!.aborted, { interval: 5 }).toBe(true);
      expect(await turn).toMatchObject({ code });
      expect(running.size).toBe(0);
    },
  );

  it('a close of another turn, or of the same number in another session, stops nothing', async () => {
    const { sessions, services, running, signals, calling } = world();
    await sessions.create({ id: 's' });
    const turn = runTurn(services, 's', { input: 'stuck' }).catch((error: unknown) => error);
    await calling;
    const scope = await sessions.scope('s');
    running.stop({ scope, turn: 2, error: { code: 'turn_cancelled' } });
    running.stop({ scope: { ...scope, id: 'other' }, turn: 1, error: { code: 'turn_cancelled' } });
    running.stop({ scope: { ...scope, generation: `${scope.generation}x` }, turn: 1 });
    expect(signals[0]!.aborted).toBe(false);
    await sessions.cancelTurn('s', 1);
    expect(await turn).toMatchObject({ code: 'turn_cancelled' });
    expect(running.size).toBe(0);
  });

  it("a delete met by a lease renewal's put under way leaves no lease in the deleted session", async () => {
    // Renewals each second: the first one read no completion, and its put waits while the
    // delete sweeps the session and the turn stops.
    const store = new HeldLeaseStore();
    const { sessions, services, running, calling } = world(store, 3_000);
    await sessions.create({ id: 's' });
    const turn = runTurn(services, 's', { input: 'stuck' }).catch((error: unknown) => error);
    await calling;
    await store.reached;
    await sessions.delete('s');
    store.release();
    expect(await turn).toMatchObject({ code: 'not_found' });
    await store.landed;
    // Removed after the answer, once every renewal under way ended.
    await vi.waitFor(
      async () => {
        const left = await store.list('');
        expect(
          left.objects.map((object) => object.key).filter((key) => key.includes('/s/') && !key.endsWith('.done')),
        ).toEqual([]);
      },
      { timeout: 15_000 },
    );
    expect(running.size).toBe(0);
  });
});
