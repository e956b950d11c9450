import { describe, expect, it } from 'vitest';
import { parseServiceConfig } from '../../lib/config.ts';
import { Inbox } from '../../lib/inbox/inbox.ts';
import { echoModel } from '../../lib/models/echo.ts';
import { sessionCreatedIn } from '../../lib/session/log/config-object.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { runInProcess, runTurn, type TurnServices } from '../../lib/turn/index.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { HeldStore } from '../support/held-store.ts';
import { SessionLog } from '../support/session-log.ts';

/**
 * A turn interrupted (cancelled, and the next turn claimed) while its moves out of the inbox are
 * still on their way: they land after the next turn listed the interrupted turn's delivery records
 * to take them over, and its process dies during its give-back. Every notice posted is delivered
 * once by a later turn all the same.
 */

const LEASE_MS = 30_000;

function world() {
  let now = Date.parse('2026-01-01T00:00:00Z');
  const clock = () => new Date(now);
  // The store keeps the same time as the service.
  const memory = new MemoryStore({ clock });
  const services = (store: ObjectStore = memory): TurnServices & { sessions: SessionLog; inbox: Inbox } => ({
    sessions: new SessionLog(store, { clock, leaseMs: LEASE_MS }),
    inbox: new Inbox(store, { clock, log: () => {}, sessionExists: sessionCreatedIn(store, '') }),
    config: parseServiceConfig({ TURN_LEASE_MS: String(LEASE_MS) }),
    clock,
    env: {},
    model: () => echoModel,
    // A dead process's work after the answer fails: dropped.
    background: (task) => void task.catch(() => undefined),
    startBackground(run) {
      return runInProcess(this, run);
    },
    log: () => {},
    info: () => {},
  });
  return { memory, services, advance: (ms: number) => (now += ms) };
}

const NOTICES = ['n1', 'n2'];

/**
 * Turn 1 claims n1 and n2 (its claim of n1 held), is cancelled, and turn 2 claims and lists turn 1's
 * records (none yet); then turn 1's claim of n1 lands before turn 2 moves n1, and turn 1's process
 * dies at its `k`th storage call from there on (after the call landed when `after`). The notices
 * turns 2 to 5 deliver, and the world.
 */
async function interruptedWhileMoving(k: number, after: boolean, unlisted = false) {
  const { memory, services, advance } = world();
  await services().sessions.create({ id: 's' });
  for (const name of NOTICES) await services().inbox.post('s', { name, content: `note ${name}` });
  const dying = new FaultyStore(memory);
  const first = new HeldStore(dying);
  const claim = first.hold(
    ({ operation, keys, options }) =>
      operation === 'put' && options?.onlyIfAbsent === true && keys[0]!.endsWith('/inbox_removed/n1'),
  );
  const one = runTurn(services(first), 's', { input: 'one' }).catch((error: unknown) => error);
  await claim.reached;
  await services().sessions.cancelTurn('s', 1);
  // Given `unlisted`, a turn without the inbox strategy comes first (it lists nothing), and the one
  // that first lists turn 1's records comes once 2 × TURN_LEASE_MS passed since turn 1's claim.
  if (unlisted) {
    await runTurn(services(), 's', { input: 'no inbox', strategies: [] });
    advance(2 * LEASE_MS);
  }
  // Turn 2 stops at its check of n1, read with its claim, once it listed turn 1's records.
  const second = new HeldStore(memory);
  const check = second.hold(({ operation, keys }) => operation === 'head' && keys[0]!.endsWith('/inbox/n1'));
  const two = runTurn(services(second), 's', { input: 'two' });
  await check.reached;
  // Turn 1's claim of n1 lands (its delete of the original follows it).
  const deleted = first.hold(({ operation, keys }) => operation === 'delete' && keys[0]!.endsWith('/inbox/n1'));
  claim.release();
  await deleted.reached;
  let calls = 0;
  dying.failWhen(() => ++calls === k, { after, times: 1 });
  dying.failWhen(() => calls >= k);
  deleted.release();
  check.release();
  await one;
  const delivered = [...(await two).context.notices_delivered];
  for (const input of ['three', 'four', 'five'])
    delivered.push(...(await runTurn(services(), 's', { input })).context.notices_delivered);
  return { delivered, died: dying.injected > 0, services, advance };
}

describe('a turn interrupted while its moves land late, the first turn after it not listing its claims', () => {
  it.each([false, true])(
    'leaves each notice to exactly one later turn, the turn that lists them first not the next (landed: %s)',
    async (after) => {
      for (let k = 1; ; k++) {
        const { delivered, died, services } = await interruptedWhileMoving(k, after, true);
        expect(delivered.sort(), `dies at call ${k}`).toEqual(NOTICES);
        expect(await services().inbox.listPending('s'), `dies at call ${k}`).toEqual([]);
        if (!died) return;
      }
    },
  );
});

describe('a turn interrupted while its moves land late, its process dying during its give-back', () => {
  it.each([false, true])(
    'leaves each notice to exactly one later turn (the call it dies at landed: %s)',
    async (after) => {
      for (let k = 1; ; k++) {
        const { delivered, died, services, advance } = await interruptedWhileMoving(k, after);
        expect(delivered.sort(), `dies at call ${k}`).toEqual(NOTICES);
        expect(await services().inbox.listPending('s'), `dies at call ${k}`).toEqual([]);
        // Turns keep looking for turn 1's late claims for 2 × TURN_LEASE_MS after turn 2 listed them, no longer.
        expect(new Set((await services().sessions.lostTurns('s')).map((entry) => entry.turn))).toEqual(new Set([1]));
        advance(2 * LEASE_MS);
        await runTurn(services(), 's', { input: 'six' });
        expect(await services().sessions.lostTurns('s')).toEqual([]);
        // Listed delivered once each, by the turn that delivered it.
        const records = await services().inbox.listDelivered('s');
        expect(records.map((record) => record.name).sort(), `dies at call ${k}`).toEqual(NOTICES);
        expect(records.every((record) => record.turn !== 1)).toBe(true);
        if (!died) return;
      }
    },
  );
});
