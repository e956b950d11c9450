import { describe, expect, it } from 'vitest';
import { sha256Hex } from '../../lib/hash.ts';
import type { Item, PromptItem } from '../../lib/items.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import {
  pickUp,
  previewPrompt,
  runTurn,
  takeUnderPolicy,
  type TurnResponse,
  type TurnServices,
} from '../../lib/turn/index.ts';
import { CountingStore } from '../support/counting-store.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { killedAtCompletion } from '../support/killed-at-completion.ts';
import type { SessionLog } from '../support/session-log.ts';
import { recordingEcho, turnWorld, userTexts } from '../support/turn-world.ts';

/**
 * GET /prompt (`previewPrompt`, lib/turn/preview.ts) on a busy session: the prompt the next turn
 * sends when inputs wait queued behind a turn whose lease ran out, and under `on_busy: interrupt`.
 */

const LEASE_MS = 30_000;

/** Session `s`'s world on `store`, queued inputs taken up as the service does, background work kept for `settle`. */
function busyWorld(store: ObjectStore = new MemoryStore({ clock: () => new Date(clock.now) })) {
  const model = recordingEcho();
  const kept: Promise<unknown>[] = [];
  const world = turnWorld(store, model, { clock: () => new Date(clock.now), leaseMs: LEASE_MS, kept });
  const settle = async () => {
    for (let rounds = 0; rounds < 20 && kept.length > 0; rounds++) await Promise.all(kept.splice(0));
  };
  return { ...world, store, model, settle };
}

const clock = { now: Date.parse('2026-01-01T00:00:00Z') };

/** A turn without input whose process dies as it writes its completion, its lease left to run out. */
async function dies(store: ObjectStore, model = recordingEcho()): Promise<void> {
  const left: Promise<unknown>[] = [];
  const { services } = turnWorld(killedAtCompletion(store), model, {
    clock: () => new Date(clock.now),
    leaseMs: LEASE_MS,
  });
  await runTurn({ ...services, background: (task) => void left.push(task) }, 's', { input: [] }).catch(() => null);
  await Promise.allSettled(left);
}

/** Queues `content` as an enqueue does (its pickup left to the next claim). */
async function queue(sessions: SessionLog, content: string): Promise<void> {
  await sessions.enqueue('s', {
    input: [{ type: 'message', role: 'user', content }],
    request: {},
    key_sha256: sha256Hex(content),
  });
}

/** What the model reads of an item: no `pending` mark, no `created_at`. */
function seen(prompt: PromptItem[]): unknown[] {
  return prompt.map((item) => {
    const { pending: _pending, created_at: _createdAt, ...rest } = item as PromptItem & { created_at?: string };
    return rest;
  });
}

describe('previewPrompt with inputs queued behind a turn whose lease ran out', () => {
  it("shows the oldest queued input's turn, which the next claim takes up first, and writes nothing", async () => {
    const world = busyWorld(new CountingStore(new MemoryStore({ clock: () => new Date(clock.now) })));
    const { sessions, inbox, services, model } = world;
    await sessions.create({ id: 's' });
    await sessions.append('s', [{ type: 'message', role: 'user', content: 'hello' }]);
    await inbox.post('s', { name: '0001-n', content: 'taken by the dead turn' });
    await dies(world.store, model);
    await queue(sessions, 'queued first');
    clock.now += 1000;
    await queue(sessions, 'queued second');
    await inbox.post('s', { name: '0002-n', content: 'posted after' });
    clock.now += LEASE_MS + 1;

    (world.store as CountingStore).reset();
    const preview = await previewPrompt(services, 's', {});
    expect((world.store as CountingStore).counts).toMatchObject({ put: 0, delete: 0 });
    expect(userTexts(preview.items).at(-1)).toBe('queued first');
    expect(preview.context.notices_pending).toEqual(['0001-n', '0002-n']);

    // The next turn request takes the queued input up first (its own is then refused: the session is busy).
    const before = model.prompts.length;
    await expect(runTurn(services, 's', { input: [] })).rejects.toMatchObject({ code: 'turn_in_progress' });
    await world.settle();
    expect(seen(model.prompts[before]!)).toEqual(seen(preview.items));
  });

  it('shows the turn itself under `on_busy: interrupt`, which runs before the queued inputs', async () => {
    const world = busyWorld();
    const { sessions, services, model } = world;
    await sessions.create({ id: 's', on_busy: 'interrupt' });
    await sessions.append('s', [{ type: 'message', role: 'user', content: 'hello' }]);
    await dies(world.store, model);
    await queue(sessions, 'queued first');
    clock.now += LEASE_MS + 1;

    const preview = await previewPrompt(services, 's', {});
    expect(userTexts(preview.items)).toEqual(['hello']);
    const before = model.prompts.length;
    await runTurn(services, 's', { input: [] });
    expect(seen(model.prompts[before]!)).toEqual(seen(preview.items));
  });
});

describe('previewPrompt with inputs queued behind a turn whose lease ran out, the budget spent', () => {
  it("shows the queued input's turn: the request is refused, that turn runs once the budget is raised", async () => {
    const world = busyWorld();
    const { sessions, services, model } = world;
    await sessions.create({ id: 's', budget: { max_turns: 1 } });
    await runTurn(services, 's', { input: 'hello' });
    await dies(world.store, model);
    await queue(sessions, 'queued first');
    clock.now += LEASE_MS + 1;

    const preview = await previewPrompt(services, 's', {});
    expect(preview.context.queued_turn).toBe(sha256Hex('queued first'));
    expect(userTexts(preview.items)).toEqual(['hello', 'queued first']);
    expect(preview.refused).toMatchObject({ code: 'budget_exhausted', details: { limit: 'max_turns' } });
    // The claim checks the budget before it takes the queue up: the request is refused, nothing runs.
    const before = model.prompts.length;
    await expect(
      takeUnderPolicy(services, 's', { input: 'own' }, {}, (busy, lapsed) =>
        runTurn(busy, 's', { input: 'own' }, lapsed),
      ),
    ).rejects.toMatchObject({ code: 'budget_exhausted' });
    await world.settle();
    expect(model.prompts.length).toBe(before);
    const scope = (await sessions.getWithNewestTurn('s')).scope;
    expect((await sessions.queued(scope)).map((entry) => entry.keyHash)).toEqual([sha256Hex('queued first')]);
    // A PATCH raising the budget takes the queue up (functions/routes/sessions.ts): the input's turn runs first.
    await sessions.update('s', { budget: { max_turns: 5 } });
    const raised = await previewPrompt(services, 's', {});
    expect(seen(raised.items)).toEqual(seen(preview.items));
    expect(raised.refused).toBeNull();
    await pickUp(services, 's');
    await world.settle();
    expect(seen(model.prompts[before]!)).toEqual(seen(preview.items));
  });
});

describe('previewPrompt under `on_busy: interrupt` while a turn holds its lease', () => {
  it('shows the turn that interrupts it: that turn read cancelled, the notices it took first', async () => {
    const world = busyWorld(new CountingStore(new MemoryStore({ clock: () => new Date(clock.now) })));
    const { sessions, inbox, services, model } = world;
    await sessions.create({ id: 's', on_busy: 'interrupt' });
    await sessions.append('s', [{ type: 'message', role: 'user', content: 'hello' }]);
    await inbox.post('s', { name: '0001-n', content: 'taken by the running turn' });
    // Its process died as it wrote its completion: its lease still runs, as a live turn's does.
    await dies(world.store, model);
    await inbox.post('s', { name: '0002-n', content: 'posted after' });
    expect((await sessions.getWithNewestTurn('s')).newestTurn).toMatchObject({ turn: 1, status: null });

    (world.store as CountingStore).reset();
    const preview = await previewPrompt(services, 's', {});
    expect((world.store as CountingStore).counts).toMatchObject({ put: 0, delete: 0 });
    expect((await sessions.getWithNewestTurn('s')).newestTurn).toMatchObject({ turn: 1, status: null });
    expect(preview.context.notices_pending).toEqual(['0001-n', '0002-n']);

    const before = model.prompts.length;
    const taken = await takeUnderPolicy(services, 's', { input: [] }, {}, (busy) => runTurn(busy, 's', { input: [] }));
    expect(taken).toMatchObject({ kind: 'taken', value: { turn: 2 } });
    expect(seen(model.prompts[before]!)).toEqual(seen(preview.items));
    const { context } = (taken as { value: TurnResponse }).value;
    expect(context.notices_delivered).toEqual(preview.context.notices_pending);
  });

  it('shows the session as it stands under `reject`: the next turn is refused while the lease runs', async () => {
    const world = busyWorld();
    const { sessions, inbox, services, model } = world;
    await sessions.create({ id: 's' });
    await inbox.post('s', { name: '0001-n', content: 'taken by the running turn' });
    await dies(world.store, model);
    expect((await previewPrompt(services, 's', {})).context.notices_pending).toEqual([]);
    await expect(runTurn(services, 's', { input: [] })).rejects.toMatchObject({ code: 'turn_in_progress' });
  });
});

/** A turn answered at its end (a stored response) of `input` whose process died; its lease lapses: `lapse`. */
async function diesAnsweredAtEnd(
  world: ReturnType<typeof busyWorld>,
  input: string,
  meanwhile?: () => Promise<void>,
  lapse = true,
): Promise<void> {
  const dying = turnWorld(killedAtCompletion(world.store), world.model, {
    clock: () => new Date(clock.now),
    leaseMs: LEASE_MS,
  });
  const left: Promise<unknown>[] = [];
  await runTurn(
    { ...dying.services, background: (task) => void left.push(task) },
    's',
    { input },
    { answeredAtEnd: true },
  )
    // Its process died: nothing answers it.
    .catch(() => null);
  await Promise.allSettled(left);
  // While its lease runs (an input queued behind it).
  await meanwhile?.();
  if (lapse) clock.now += LEASE_MS + 1;
}

/** `services` whose inbox counts the calls of `tookNothing` (lib/inbox/carry.ts: a listing of the delivery records). */
function askedTookNothing(services: TurnServices): { services: TurnServices; count: () => number } {
  let asked = 0;
  const inbox = new Proxy(services.inbox, {
    get(target, property) {
      const value = Reflect.get(target, property, target) as unknown;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        if (property === 'tookNothing') asked += 1;
        return (value as (...args: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { services: { ...services, inbox }, count: () => asked };
}

/** The preview, read only, then the next turn request (taking the session as the service does): the prompt it sent. */
async function previewThenTurn(world: ReturnType<typeof busyWorld>) {
  const counting = new CountingStore(world.store);
  const preview = await previewPrompt(busyWorld(counting).services, 's', {});
  expect(counting.counts).toMatchObject({ put: 0, delete: 0 });
  const before = world.model.prompts.length;
  const turn = await takeUnderPolicy(world.services, 's', { input: [] }, {}, (busy, lapsed) =>
    runTurn(busy, 's', { input: [] }, lapsed),
  );
  return { preview, sent: world.model.prompts[before]!, turn: (turn as { value: TurnResponse }).value };
}

describe('previewPrompt after the dead turn of a response answered at its end', () => {
  it('reads that turn taken out, as the next turn takes it out first, its lease run out', async () => {
    const world = busyWorld();
    await world.sessions.create({ id: 's' });
    await world.sessions.append('s', [{ type: 'message', role: 'user', content: 'hello' }]);
    await diesAnsweredAtEnd(world, 'dead input');
    const { preview, sent } = await previewThenTurn(world);
    expect(userTexts(sent)).toEqual(['hello']);
    expect(seen(sent)).toEqual(seen(preview.items));
  });

  it('reads it as it stands when it took an inbox notice, which keeps it in: the next turn follows it', async () => {
    const world = busyWorld();
    await world.sessions.create({ id: 's' });
    await world.sessions.append('s', [{ type: 'message', role: 'user', content: 'hello' }]);
    await world.inbox.post('s', { name: '0001-n', content: 'taken by the dead turn' });
    await diesAnsweredAtEnd(world, 'dead input');
    const { preview, sent, turn } = await previewThenTurn(world);
    expect(userTexts(sent)).toEqual(['hello', 'dead input']);
    expect(seen(sent)).toEqual(seen(preview.items));
    expect(turn.context.notices_delivered).toEqual(preview.context.notices_pending);
    expect(preview.context.notices_pending).toEqual(['0001-n']);
  });

  it('reads it taken out under `interrupt` while its lease runs, as the turn cancelling it takes it out', async () => {
    const world = busyWorld();
    await world.sessions.create({ id: 's', on_busy: 'interrupt' });
    await world.sessions.append('s', [{ type: 'message', role: 'user', content: 'hello' }]);
    // Its lease still runs: the next turn cancels it (an interrupt), then takes it out.
    await diesAnsweredAtEnd(world, 'dead input', undefined, false);
    expect((await world.sessions.getWithNewestTurn('s')).newestTurn).toMatchObject({ turn: 1, status: null });
    const { preview, sent } = await previewThenTurn(world);
    expect(userTexts(sent)).toEqual(['hello']);
    expect(seen(sent)).toEqual(seen(preview.items));
  });

  it("shows the queued input's turn after the history before it, as the pickup takes it out first", async () => {
    const world = busyWorld();
    await world.sessions.create({ id: 's' });
    await world.sessions.append('s', [{ type: 'message', role: 'user', content: 'hello' }]);
    await diesAnsweredAtEnd(world, 'dead input', () => queue(world.sessions, 'queued first'));
    const counting = new CountingStore(world.store);
    const preview = await previewPrompt(busyWorld(counting).services, 's', {});
    expect(counting.counts).toMatchObject({ put: 0, delete: 0 });
    expect(preview.context.queued_turn).toBe(sha256Hex('queued first'));
    const before = world.model.prompts.length;
    await expect(runTurn(world.services, 's', { input: [] })).rejects.toMatchObject({ code: 'turn_in_progress' });
    await world.settle();
    const sent = world.model.prompts[before]!;
    expect(userTexts(sent)).toEqual(['hello', 'queued first']);
    expect(seen(sent)).toEqual(seen(preview.items));
  });

  it('asks whether that turn took notices once, as its take-out does, reading the queued turn again', async () => {
    const world = busyWorld();
    await world.sessions.create({ id: 's' });
    await world.sessions.append('s', [{ type: 'message', role: 'user', content: 'hello' }]);
    // Notices delivered before: the question lists their delivery records, whose number grows.
    for (const name of ['0001-n', '0002-n']) {
      await world.inbox.post('s', { name, content: `delivered ${name}` });
      await runTurn(world.services, 's', { input: [] });
    }
    await diesAnsweredAtEnd(world, 'dead input', () => queue(world.sessions, 'queued first'));
    const asking = askedTookNothing(world.services);
    const preview = await previewPrompt(asking.services, 's', {});
    expect(preview.context.queued_turn).toBe(sha256Hex('queued first'));
    const previewAsked = asking.count();
    const turn = askedTookNothing(world.services);
    await expect(
      takeUnderPolicy(turn.services, 's', { input: [] }, {}, (busy, lapsed) =>
        runTurn(busy, 's', { input: [] }, lapsed),
      ),
    ).rejects.toMatchObject({ code: 'turn_in_progress' });
    expect(turn.count()).toBe(1);
    expect(previewAsked).toBe(turn.count());
  });

  it('reads it taken out behind the lapsed fence of a take-out of it cut short, as the next turn', async () => {
    const world = busyWorld();
    const { sessions, services, model } = world;
    await sessions.create({ id: 's' });
    await sessions.append('s', [{ type: 'message', role: 'user', content: 'hello' }]);
    await diesAnsweredAtEnd(world, 'dead input');
    // The next turn's take-out of it lands its fence, then its store fails: the turn stays, fenced.
    let fenced = false;
    const failing = new FaultyStore(world.store).failWhen(({ operation, key, options }) => {
      if (operation === 'put' && options?.onlyIfAbsent === true && /\/turn\/[^/]+\/\d+$/.test(key)) fenced = true;
      return fenced && operation === 'delete';
    });
    const cut = turnWorld(failing, model, { clock: () => new Date(clock.now), leaseMs: LEASE_MS });
    await expect(
      takeUnderPolicy(cut.services, 's', { input: [] }, {}, (busy, lapsed) =>
        runTurn(busy, 's', { input: [] }, lapsed),
      ),
    ).rejects.toThrow();
    expect(fenced).toBe(true);
    clock.now += LEASE_MS + 1;

    const { preview, sent } = await previewThenTurn({ ...world, services });
    expect(userTexts(sent)).toEqual(['hello']);
    expect(seen(sent)).toEqual(seen(preview.items));
  });
});

describe('previewPrompt behind the lapsed fence of a delete of the newest turn cut short', () => {
  it('shows the turn the delete left, as the next turn goes on after the fence', async () => {
    const world = busyWorld();
    const { sessions, inbox, services, model } = world;
    await sessions.create({ id: 's' });
    await runTurn(services, 's', { input: 'kept' });
    await inbox.post('s', { name: '0001-n', content: 'waiting' });
    // The delete's fence lands, then its store fails: the turn stays, fenced for the delete's lease.
    let fenced = false;
    const failing = new FaultyStore(world.store).failWhen(({ operation, key, options }) => {
      if (operation === 'put' && options?.onlyIfAbsent === true && /\/turn\/[^/]+\/\d+$/.test(key)) fenced = true;
      return fenced && operation === 'delete';
    });
    const cut = turnWorld(failing, model, { clock: () => new Date(clock.now), leaseMs: LEASE_MS });
    await expect(cut.sessions.deleteTurn('s', 1)).rejects.toThrow();
    expect(fenced).toBe(true);
    // While the fence's lease runs the next turn is refused; once it ran out, the turn goes on after it.
    await expect(runTurn(services, 's', { input: [] })).rejects.toMatchObject({ code: 'turn_in_progress' });
    clock.now += LEASE_MS + 1;

    const preview = await previewPrompt(services, 's', {});
    expect(userTexts(preview.items)).toEqual(['kept']);
    const before = model.prompts.length;
    const turn = await runTurn(services, 's', { input: [] });
    expect(turn.turn).toBe(2);
    expect(seen(model.prompts[before]!)).toEqual(seen(preview.items));
    expect(turn.context.notices_delivered).toEqual(preview.context.notices_pending);
  });
});

describe('previewPrompt with queued inputs the pickup passes over', () => {
  /** Session `s`: `hello`, a turn that died, `queued first` and `queued second` behind it, its lease run out. */
  async function queuedBehindDead(world: ReturnType<typeof busyWorld>, first: Item[] | string = 'queued first') {
    const { sessions, model } = world;
    await sessions.create({ id: 's' });
    await sessions.append('s', [{ type: 'message', role: 'user', content: 'hello' }]);
    await dies(world.store, model);
    await (typeof first === 'string' ? queue(sessions, first) : queueItems(sessions, first, 'first'));
    clock.now += 1000;
    await queue(sessions, 'queued second');
    clock.now += LEASE_MS + 1;
  }

  /** The next turn request as the preview shows it, and the prompt the model was sent first after it. */
  async function previewThenNext(world: ReturnType<typeof busyWorld>) {
    const { services, model } = world;
    const counting = new CountingStore(world.store);
    const preview = await previewPrompt(busyWorld(counting).services, 's', {});
    expect(counting.counts).toMatchObject({ put: 0, delete: 0 });
    const before = model.prompts.length;
    const outcome = await runTurn(services, 's', { input: [] }).then(
      () => 'ran',
      (error: { code?: string }) => error.code,
    );
    await world.settle();
    return { preview, outcome, sent: model.prompts[before]! };
  }

  it('passes over an input a pickup marked whose turn is stored, and shows the one after it', async () => {
    const world = busyWorld();
    await queuedBehindDead(world);
    // A pickup claims `queued first` and runs its turn, then its store fails as it removes the entry.
    const failing = busyWorld(
      new FaultyStore(world.store).failWhen(({ operation, key }) => operation === 'delete' && key.includes('/queue/')),
    );
    await expect(pickUp(failing.services, 's')).rejects.toThrow();
    await failing.settle();
    const listed = await world.sessions.queued((await world.sessions.getWithNewestTurn('s')).scope);
    expect(listed).toHaveLength(2);
    // Its turn stored (turn 2, after the dead one), its entry still there, marked.
    expect((await world.sessions.get('s')).counts.turns).toBe(2);

    const { preview, outcome, sent } = await previewThenNext(world);
    expect(userTexts(preview.items).at(-1)).toBe('queued second');
    expect(preview.context.queued_turn).toBe(sha256Hex('queued second'));
    expect(outcome).toBe('turn_in_progress');
    expect(seen(sent)).toEqual(seen(preview.items));
  });

  it('passes over an input its turn would refuse as invalid, as the pickup drops it', async () => {
    const world = busyWorld();
    // `queued first` answers a call no turn left open: the pickup drops it (the enqueue took it unchecked).
    const output: Item = { type: 'function_call_output', call_id: 'call_none', output: 'late' };
    await queuedBehindDead(world, [output]);
    const { preview, outcome, sent } = await previewThenNext(world);
    expect(userTexts(preview.items).at(-1)).toBe('queued second');
    expect(preview.context.queued_turn).toBe(sha256Hex('queued second'));
    expect(outcome).toBe('turn_in_progress');
    expect(seen(sent)).toEqual(seen(preview.items));
  });
});

/** Queues `input` under the key `key` as an enqueue does. */
async function queueItems(sessions: SessionLog, input: Item[], key: string): Promise<void> {
  await sessions.enqueue('s', { input, request: {}, key_sha256: sha256Hex(key) });
}
