import { describe, expect, it } from 'vitest';
import { sha256Hex } from '../../lib/hash.ts';
import { echoModel } from '../../lib/models/echo.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { pickUp, runInProcess, runTurn, type BackgroundTurn, type TurnServices } from '../../lib/turn/index.ts';
import { SessionLog } from '../support/session-log.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { DEFAULTS } from '../../lib/defaults.ts';
import { turnWorld } from '../support/turn-world.ts';
import { dataUrl, pngBytes } from '../support/media-fixtures.ts';

/** Inputs queued under a generation a delete of the newest turn left (docs/STORAGE.md, "Queued inputs"). */

function services(store: ObjectStore = new MemoryStore()): TurnServices & {
  sessions: SessionLog;
  settle: (failing?: boolean) => Promise<void>;
  advance: (ms: number) => void;
} {
  const pending: Promise<unknown>[] = [];
  const failures: unknown[] = [];
  let now = Date.parse('2026-01-01T00:00:00Z');
  const { services: turnServices } = turnWorld(store, echoModel);
  const world = {
    ...turnServices,
    sessions: new SessionLog(store, { clock: () => new Date(now) }),
    // Background turns run on this world's services, so `settle` waits for them.
    startBackground: (run: BackgroundTurn) => runInProcess(world, run),
    // A task's failure is kept for `settle`, so none goes unhandled meanwhile.
    background: (task: Promise<unknown>) =>
      void pending.push(
        task.then(
          () => undefined,
          (error: unknown) => void failures.push(error),
        ),
      ),
    // Background work (pickups, runs) starts on a timer after a response.
    // `failing`: a failed task is let go (an injected fault), and the rest run on.
    settle: async (failing = false): Promise<void> => {
      for (let rounds = 0; rounds < 20; rounds++) {
        await new Promise((resolve) => setTimeout(resolve, 0));
        if (pending.length === 0) return;
        await Promise.all(pending.splice(0));
        const [failure] = failures.splice(0);
        if (failure !== undefined && !failing) throw failure;
      }
    },
    advance: (ms: number) => {
      now += ms;
    },
  };
  return world;
}

/** Queues `content` as the enqueue does, without its pickup (its process died after the put). */
async function queue(turnServices: ReturnType<typeof services>, id: string, content: string): Promise<string> {
  const key_sha256 = sha256Hex(content);
  await turnServices.sessions.enqueue(id, {
    input: [{ type: 'message', role: 'user', content }],
    request: {},
    key_sha256,
  });
  return key_sha256;
}

/** Session `s` (in `store`) with one turn ('one'), its background work settled. */
async function withOneTurn(store?: ObjectStore): Promise<ReturnType<typeof services>> {
  const turnServices = services(store);
  await turnServices.sessions.create({ id: 's' });
  await runTurn(turnServices, 's', { input: 'one' });
  await turnServices.settle();
  return turnServices;
}

async function userTexts(log: SessionLog, id: string): Promise<string[]> {
  const page = await log.listItems(id, { limit: 100 });
  return page.items
    .reverse()
    .filter((item) => item.type === 'message' && item.role === 'user')
    .map((item) => String((item as { content: unknown }).content));
}

describe('queued inputs across a delete of the newest turn', () => {
  it('are listed, and taken up in order, oldest first, by the next pickup', async () => {
    const turnServices = await withOneTurn();
    const { sessions } = turnServices;
    const first = await queue(turnServices, 's', 'queued before');
    await sessions.deleteTurn('s', 1);
    const second = await queue(turnServices, 's', 'queued after');
    const listed = await sessions.listQueuedInputs('s', 10);
    expect(listed.queued.map((row) => [row.queued_turn, row.position, row.preview])).toEqual([
      [first, 1, 'queued before'],
      [second, 2, 'queued after'],
    ]);
    expect(listed.total).toBe(2);
    await pickUp(turnServices, 's');
    await turnServices.settle();
    expect(await userTexts(sessions, 's')).toEqual(['queued before', 'queued after']);
    expect((await sessions.listQueuedInputs('s', 10)).total).toBe(0);
  });

  it('are not run again when their turn, taken up before the delete, is the one it took out', async () => {
    const turnServices = await withOneTurn();
    const { sessions } = turnServices;
    await queue(turnServices, 's', 'queued');
    await pickUp(turnServices, 's');
    await turnServices.settle();
    expect(await userTexts(sessions, 's')).toEqual(['one', 'queued']);
    // The pickup died before removing the entry: it is still there when the delete comes.
    await queue(turnServices, 's', 'queued');
    await sessions.deleteTurn('s', 2);
    await runTurn(turnServices, 's', { input: 'two' });
    await turnServices.settle();
    expect(await userTexts(sessions, 's')).toEqual(['one', 'two']);
    expect((await sessions.listQueuedInputs('s', 10)).total).toBe(0);
  });

  it('survive a second delete that goes back past the generation they are under', async () => {
    const turnServices = await withOneTurn();
    const { sessions } = turnServices;
    await sessions.deleteTurn('s', 1);
    await runTurn(turnServices, 's', { input: 'two' });
    await turnServices.settle();
    await queue(turnServices, 's', 'queued');
    await sessions.deleteTurn('s', 1);
    await runTurn(turnServices, 's', { input: 'three' });
    await turnServices.settle();
    expect(await userTexts(sessions, 's')).toEqual(['three', 'queued']);
  });
  it("are kept when a fork's delete sweeps the session while they wait", async () => {
    const turnServices = await withOneTurn();
    const { sessions } = turnServices;
    await sessions.fork('s', { at_turn: 1, fields: { id: 'f' } });
    await queue(turnServices, 's', 'queued');
    // The session's first turn: its new generation forks nothing, so no reference keeps the old one.
    await sessions.deleteTurn('s', 1);
    // The fork's delete sweeps its parent, which names another generation now.
    await sessions.delete('f');
    await runTurn(turnServices, 's', { input: 'two' });
    await turnServices.settle();
    expect(await userTexts(sessions, 's')).toEqual(['two', 'queued']);
  });
  it('are not run again after such a sweep when their turn was the one a delete took out', async () => {
    const turnServices = services();
    const { sessions } = turnServices;
    await sessions.create({ id: 's' });
    await queue(turnServices, 's', 'queued');
    await pickUp(turnServices, 's');
    await turnServices.settle();
    // The pickup died before removing the entry; the session's first turn is deleted.
    await queue(turnServices, 's', 'queued');
    await sessions.fork('s', { at_turn: 1, fields: { id: 'f' } });
    await sessions.deleteTurn('s', 1);
    await sessions.delete('f');
    await runTurn(turnServices, 's', { input: 'two' });
    await turnServices.settle();
    expect(await userTexts(sessions, 's')).toEqual(['two']);
  });
  it('are not run again by a pickup that read the session before the delete', async () => {
    const turnServices = await withOneTurn();
    const { sessions } = turnServices;
    await queue(turnServices, 's', 'queued');
    await pickUp(turnServices, 's');
    await turnServices.settle();
    // The pickup died before removing the entry; another, following a turn closed before the
    // delete, lists the generation the delete left as its own.
    await queue(turnServices, 's', 'queued');
    const before = await sessions.scope('s');
    await sessions.deleteTurn('s', 2);
    await pickUp(turnServices, 's', before);
    await turnServices.settle();
    expect(await userTexts(sessions, 's')).toEqual(['one']);
    expect((await sessions.listQueuedInputs('s', 10)).total).toBe(0);
  });
  it('are taken up once whichever storage call of the delete and the pickup after it fails', async () => {
    for (const after of [false, true]) {
      for (let at = 1; ; at++) {
        const store = new FaultyStore(new MemoryStore());
        let armed = false;
        let calls = 0;
        store.failWhen(() => armed && ++calls === at, { after, times: 1 });
        const turnServices = services(store);
        const { sessions } = turnServices;
        await sessions.create({ id: 's' });
        await runTurn(turnServices, 's', { input: 'one' });
        await turnServices.settle();
        await queue(turnServices, 's', 'queued');
        armed = true;
        await sessions
          .deleteTurn('s', 1)
          .then(() => pickUp(turnServices, 's'))
          .catch(() => undefined);
        await turnServices.settle(true);
        armed = false;
        // The failed process's leases run out; the next turn takes up what is left queued.
        turnServices.advance(DEFAULTS.turnLeaseMs + 1);
        await runTurn(turnServices, 's', { input: 'two' });
        await turnServices.settle();
        const where = `call ${at} ${after ? 'after' : 'before'}`;
        expect(
          (await userTexts(sessions, 's')).filter((text) => text === 'queued'),
          where,
        ).toEqual(['queued']);
        expect((await sessions.listQueuedInputs('s', 10)).total, where).toBe(0);
        if (store.injected === 0) break;
      }
    }
  });
});

describe('a queued input with an image, across a delete of the first turn', () => {
  it('runs in the new generation with its image, which later turns read', async () => {
    const turnServices = await withOneTurn();
    const { sessions } = turnServices;
    const input = await sessions.storeAttachments('s', [
      {
        type: 'message',
        role: 'user',
        content: [
          { type: 'input_text', text: 'look' },
          { type: 'input_image', image_url: dataUrl('image/png', pngBytes(4, 4, 64)) },
        ],
      },
    ]);
    await sessions.enqueue('s', { input, request: {}, key_sha256: sha256Hex('image') });
    await sessions.deleteTurn('s', 1);
    await pickUp(turnServices, 's');
    await turnServices.settle();
    const next = await runTurn(turnServices, 's', { input: 'next' });
    expect(next.output).toHaveLength(1);
    const page = await sessions.listItems('s', { limit: 100 });
    const image = page.items.find((item) => item.type === 'message' && Array.isArray(item.content));
    expect(image).toBeDefined();
  });
});

describe("a queued input the session's budget refuses", () => {
  it('waits in the queue, the pickup failing nothing, until the budget is raised', async () => {
    const world = services();
    const { sessions } = world;
    await sessions.create({ id: 's', budget: { max_turns: 1 } });
    await runTurn(world, 's', { input: 'one' });
    await world.settle();
    await queue(world, 's', 'queued past the budget');
    await pickUp(world, 's');
    await world.settle();
    expect(await userTexts(sessions, 's')).toEqual(['one']);
    expect((await sessions.listQueuedInputs('s', 10)).total).toBe(1);
    await sessions.update('s', { budget: { max_turns: 2 } });
    await pickUp(world, 's');
    await world.settle();
    expect(await userTexts(sessions, 's')).toEqual(['one', 'queued past the budget']);
    expect((await sessions.listQueuedInputs('s', 10)).total).toBe(0);
  });
});

describe('a queued input under a key a deleted turn of an older generation held', () => {
  /** Session `s`: turn 1, then one under Idempotency-Key `K`, deleted (`K` free again); `input` queued under `key`. */
  async function queuedUnderFreedKey(world: ReturnType<typeof services>, key: string, input: string) {
    const { sessions } = world;
    await sessions.create({ id: 's' });
    await runTurn(world, 's', { input: 'one' });
    await runTurn(world, 's', { input: 'keyed' }, { idempotencyKey: 'K' });
    await world.settle();
    await sessions.deleteTurn('s', 2);
    // Spent: the input waits, listed, until a PATCH raises the budget.
    await sessions.update('s', { budget: { max_turns: 1 } });
    await sessions.enqueue('s', {
      input: [{ type: 'message', role: 'user', content: input }],
      request: {},
      key_sha256: sha256Hex(key),
    });
    expect(await pickUp(world, 's')).toBe('budget_spent');
    await world.settle();
  }

  for (const [key, which] of [
    ['K', 'that key'],
    ['another key', 'another'],
  ] as const)
    it(`runs after a later delete and a budget raise (queued under ${which})`, async () => {
      const world = services();
      const { sessions } = world;
      await queuedUnderFreedKey(world, key, 'queued');
      const queuedUnder = (await sessions.scope('s')).generation;
      // Another delete of the newest turn: the generation the input is under is in `queued_in`
      // now, after it the one whose `idem/` names the deleted turn's key.
      await sessions.deleteTurn('s', 1);
      expect((await sessions.scope('s')).queuedIn?.[0]).toBe(queuedUnder);
      await sessions.update('s', { budget: { max_turns: 10 } });
      await pickUp(world, 's');
      await world.settle();
      expect(await userTexts(sessions, 's')).toEqual(['queued']);
      expect((await sessions.listQueuedInputs('s', 10)).total).toBe(0);
    });

  it('can be withdrawn while it waits, after a later delete', async () => {
    const world = services();
    const { sessions } = world;
    await queuedUnderFreedKey(world, 'K', 'queued');
    await sessions.deleteTurn('s', 1);
    await sessions.withdrawQueued('s', sha256Hex('K'));
    await sessions.update('s', { budget: { max_turns: 10 } });
    await pickUp(world, 's');
    await world.settle();
    expect(await userTexts(sessions, 's')).toEqual([]);
    expect((await sessions.listQueuedInputs('s', 10)).total).toBe(0);
  });
});

/** A store whose first get of a queued input runs `hook` after the read (a delete and a create racing the pickup). */
class RacingStore extends MemoryStore {
  hook: (() => Promise<void>) | null = null;
  override async get(key: string, options?: Parameters<MemoryStore['get']>[1]) {
    const object = await super.get(key, options);
    if (!key.includes('/queue/')) return object;
    const hook = this.hook;
    this.hook = null;
    await hook?.();
    return object;
  }
}

describe('a queued input of a deleted incarnation', () => {
  it('is not run in the session created again under the same id', async () => {
    const store = new RacingStore();
    const world = services(store);
    await world.sessions.create({ id: 's' });
    await queue(world, 's', 'queued for the deleted session');
    // The pickup has listed the entry and is reading it when the session is deleted and created again.
    store.hook = async () => {
      await world.sessions.delete('s');
      await world.sessions.create({ id: 's' });
    };
    await pickUp(world, 's');
    await world.settle();
    expect(store.hook).toBeNull();
    expect(await userTexts(world.sessions, 's')).toEqual([]);
    expect(await world.sessions.queued(await world.sessions.scope('s'))).toEqual([]);
  });
});

/** The keys of `kind` (`idem`, `blob`, `queue`, `turn`, ...) of generation `generation` of session `id`. */
async function keysOf(store: ObjectStore, id: string, kind: string, generation: string): Promise<string[]> {
  return (await store.list(`sessions/${id}/${kind}/${generation}/`)).objects.map((object) => object.key);
}

/** A message with an image (stored as a blob of the generation it is written in). */
function imageMessage(text: string) {
  return {
    type: 'message' as const,
    role: 'user' as const,
    content: [
      { type: 'input_text' as const, text },
      { type: 'input_image' as const, image_url: dataUrl('image/png', pngBytes(4, 4, 64)) },
    ],
  };
}

const DAY_MS = 24 * 60 * 60 * 1000;

// `queued_in` is never shortened (docs/STORAGE.md, "Queued inputs across a delete of the newest
// turn"): an enqueue reads the config once, and nothing bounds how long after that read its entry's
// put lands, so a generation whose queue is empty now may still receive an input. These tests hold
// what follows from it, and the case that makes it so.
describe('the generations a delete of the newest turn left', () => {
  it('grow by one a delete, and a sweep keeps their idem and blob objects with nothing queued', async () => {
    const store = new MemoryStore();
    const world = await withOneTurn(store);
    const { sessions } = world;
    // A fork of the session: its delete sweeps the session (which names another generation by then).
    await sessions.fork('s', { at_turn: 1, fields: { id: 'f' } });
    const left: string[] = [];
    for (let round = 0; round < 6; round++) {
      left.unshift((await sessions.scope('s')).generation);
      await runTurn(world, 's', { input: [imageMessage(`look ${round}`)] }, { idempotencyKey: `key ${round}` });
      await world.settle();
      await sessions.deleteTurn('s', 2);
    }
    const scope = await sessions.scope('s');
    expect(scope.queuedIn).toEqual(left);
    // Read on from: the first generation's history is the session's (`fork_of`).
    const read = scope.ancestors?.map((point) => point.generation) ?? [];
    const unread = left.filter((generation) => !read.includes(generation));
    expect(unread).toHaveLength(5);
    expect(await sessions.listQueuedInputs('s', 10)).toMatchObject({ total: 0 });
    // Long after, with nothing queued, the fork's delete sweeps the session.
    world.advance(365 * DAY_MS);
    await sessions.delete('f');
    for (const generation of unread) {
      expect(await keysOf(store, 's', 'turn', generation), generation).toEqual([]);
      expect(await keysOf(store, 's', 'idem', generation), generation).toHaveLength(1);
      expect(await keysOf(store, 's', 'blob', generation), generation).toHaveLength(1);
    }
    expect((await sessions.scope('s')).queuedIn).toEqual(left);
  });

  it("keep a waiting input's image through such a sweep, long after the delete, and it runs with it", async () => {
    const store = new MemoryStore();
    const world = await withOneTurn(store);
    const { sessions } = world;
    await sessions.fork('s', { at_turn: 1, fields: { id: 'f' } });
    const queuedUnder = (await sessions.scope('s')).generation;
    const input = await sessions.storeAttachments('s', [imageMessage('look')]);
    await sessions.enqueue('s', { input, request: {}, key_sha256: sha256Hex('image') });
    // The session's first turn: the new generation reads none, and only `queued_in` names the old one.
    await sessions.deleteTurn('s', 1);
    expect((await sessions.scope('s')).queuedIn).toEqual([queuedUnder]);
    world.advance(365 * DAY_MS);
    await sessions.delete('f');
    expect(await keysOf(store, 's', 'turn', queuedUnder)).toEqual([]);
    expect(await keysOf(store, 's', 'blob', queuedUnder)).toHaveLength(1);
    await pickUp(world, 's');
    await world.settle();
    const next = await runTurn(world, 's', { input: 'next' });
    expect(next.output).toHaveLength(1);
    // Its pickup copied the image into the generation it ran in.
    expect(await keysOf(store, 's', 'blob', (await sessions.scope('s')).generation)).toHaveLength(1);
    const page = await sessions.listItems('s', { limit: 100 });
    expect(page.items.filter((item) => item.type === 'message' && Array.isArray(item.content))).toHaveLength(1);
  });

  it('receive the entry of an enqueue that read the config before the delete, a year after, and it runs', async () => {
    const store = new DelayedQueueStore();
    const world = await withOneTurn(store);
    const { sessions } = world;
    const readUnder = (await sessions.scope('s')).generation;
    // The enqueue read the config; before its entry's put lands, the turn is deleted, more turns
    // are taken and deleted, and a year passes, its queue empty all along.
    store.beforeQueuePut = async () => {
      await sessions.deleteTurn('s', 1);
      for (let round = 0; round < 3; round++) {
        await runTurn(world, 's', { input: `taken out ${round}` });
        await world.settle();
        await sessions.deleteTurn('s', 1);
      }
      expect(await sessions.listQueuedInputs('s', 10)).toMatchObject({ total: 0 });
      world.advance(365 * DAY_MS);
    };
    const queued = await queue(world, 's', 'queued late');
    expect(store.beforeQueuePut).toBeNull();
    expect(await keysOf(store, 's', 'queue', readUnder)).toEqual([`sessions/s/queue/${readUnder}/${queued}`]);
    // The generation it landed under is the oldest `queued_in` names: the input still runs.
    expect((await sessions.scope('s')).queuedIn?.at(-1)).toBe(readUnder);
    await pickUp(world, 's');
    await world.settle();
    expect(await userTexts(sessions, 's')).toEqual(['queued late']);
  });
});

/** A store whose first put of a queued input runs `beforeQueuePut` first (an enqueue slow to put its entry). */
class DelayedQueueStore extends MemoryStore {
  beforeQueuePut: (() => Promise<void>) | null = null;
  override async put(
    key: string,
    body: Parameters<MemoryStore['put']>[1],
    options?: Parameters<MemoryStore['put']>[2],
  ) {
    const hook = key.includes('/queue/') ? this.beforeQueuePut : null;
    if (hook) {
      this.beforeQueuePut = null;
      await hook();
    }
    return super.put(key, body, options);
  }
}
