import { writeFileSync } from 'node:fs';
import fc from 'fast-check';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { doneSchema, parseStored, stoppedSpendSchema } from '../../lib/session/records.ts';
import { inboxRemovedPrefix, parseRecordsEntry, recordsPrefix } from '../../lib/session/keys.ts';
import { parseView } from '../support/stored-view.ts';
import { computeAggregates } from '../../lib/strategies/aggregates.ts';
import type { StoredItem } from '../../lib/items.ts';
import { SegmentReader } from '../../lib/session/segment.ts';
import type { TurnResponse } from '../../lib/turn/index.ts';
import { addToLedger, EMPTY_LEDGER, sessionUsage, type Ledger } from '../../lib/ledger/usage.ts';
import { idGeneration } from '../../lib/session/log/rewind.ts';
import {
  attempt,
  billedLedger,
  history,
  LEASE_MS,
  ops,
  seeded,
  type Actor,
  type ActorStore,
  type Outcome,
  type World,
} from '../support/simulation.ts';

/**
 * The session protocol under crashes and races (test/support/simulation.ts): every operation
 * is crashed at every storage call it makes, before the call and after it landed; then random
 * interleavings of 2 to 4 concurrent actors, one of which may crash. After a restart (the
 * clock past the lease) the invariants must hold:
 * - seqs are dense, and every acknowledged input is stored exactly once (an unacknowledged one
 *   at most once, and one Idempotency-Key stores at most one input), and a queued input whose
 *   withdraw was answered 200 is not stored at all;
 * - every acknowledged notice is delivered by exactly one stored turn once a turn succeeds;
 * - no request gets a 5xx (a crashed process's own requests aside);
 * - the session takes a turn again within the lease;
 * - every prompt the model is sent holds each call with its output, and each stored item once,
 *   in order (promptFault in test/support/simulation.ts);
 * - acknowledged inputs are stored in the order they were acknowledged (expectInOrder), and each
 *   acknowledged fork holds the session's history up to its point and takes a turn.
 * The actors also take background turns whose run is delivered twice (to two processes), sweep
 * the queues, fork the session, and stall past the lease (the clock moves on a lease while their
 * turns run). A third property races a delete of the session with its turns, queued inputs,
 * background runs, notices and sweeps: the id created again holds nothing of the old session.
 * It runs on the memory store (test/session/protocol-simulation.test.ts) and on the file store
 * with one FileStore per actor (test/session/protocol-simulation-files.test.ts).
 */

const S = 's';

/** What was checked, written to SIMULATION_REPORT (JSON) for bench/RESULTS.md. */
interface Report {
  crashPoints: Record<string, number>;
  interleavings: number;
  withCrash: number;
  actors: Record<number, number>;
  storageCalls: number;
}

export interface SimulationOptions {
  /** The store's name in the test titles. */
  name: string;
  /** A new world on a fresh store, with the scheduler's choices from `pick`. */
  makeWorld: (pick?: (choices: number) => number) => Promise<World>;
  /** Interleavings checked. A failure prints its seed and path: SIMULATION_SEED and SIMULATION_PATH replay it. */
  runs: number;
  /** Write what was checked to SIMULATION_REPORT. */
  report: boolean;
  /** How long one operation's crash cases may take (the file store's real I/O takes longer). */
  crashTimeoutMs?: number;
}

function must<T>(outcome: Outcome<T>): T {
  if (!outcome.ok) throw new Error(`expected success, got ${outcome.status} ${outcome.code}`);
  return outcome.value;
}

/** A session with history, a view and a segment, and two pending notices. */
async function setup(world: World): Promise<void> {
  const admin = world.actor();
  await world.run(
    (async () => {
      await admin.services.sessions.create({ id: S });
      for (let index = 0; index < 5; index++) must(await ops.turn(admin, S, `setup ${index}`));
      must(await ops.append(admin, S, 'setup append'));
      must(await ops.pack(admin, S));
      must(await ops.post(admin, S, 'n1'));
      must(await ops.post(admin, S, 'n2'));
    })(),
    [admin],
  );
}

/** How many times each user message content is stored. */
function contents(items: { type: string; role?: string; content?: string }[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const item of items)
    if (item.type === 'message' && item.role === 'user')
      counts.set(item.content!, (counts.get(item.content!) ?? 0) + 1);
  return counts;
}

/**
 * What the stored completed turns say: how many delivered each notice, and the sum of their
 * usage in turn order. A turn is counted once, from its completion or from a segment (a packer
 * that crashed before deleting what its segment replaced leaves both, and segments that overlap).
 */
async function storedTurns(
  world: World,
  id: string,
): Promise<{ deliveries: Map<string, number>; everDelivered: Set<string>; sum: Ledger }> {
  const turns = await completedTurns(world, id);
  const deliveries = new Map<string, number>();
  const everDelivered = new Set<string>();
  let sum = EMPTY_LEDGER;
  for (const { response, held } of turns.values()) {
    for (const delivered of response.context.notices_delivered) {
      const name = await postedName(world, id, delivered);
      everDelivered.add(name);
      if (held) deliveries.set(name, (deliveries.get(name) ?? 0) + 1);
    }
    sum = addToLedger(sum, response.usage);
  }
  return { deliveries, everDelivered, sum };
}

/** A name a give-back posts a notice back under when its own is taken (lib/inbox/give-back.ts `fallbackName`). */
const GIVE_BACK_NAME = /^\d{15}-0000-[0-9a-f]{8}$/;

/**
 * The name the notice a turn delivered as `delivered` was posted under. A turn closed by someone
 * else gives back the notices it took; when a notice's name is still taken by its original (the
 * run that moved it has not deleted it yet), the give-back posts it under a generated name, and
 * the turn that takes it from there names that one (docs/STORAGE.md, "Give-backs"): the same
 * notice, delivered once. Its delivery record holds its content, `notice <name>` as `ops.post`
 * wrote it, which tells the name it was posted under.
 */
async function postedName(world: World, id: string, delivered: string): Promise<string> {
  if (!GIVE_BACK_NAME.test(delivered)) return delivered;
  const record = await world.store.get(`${inboxRemovedPrefix('', id)}${delivered}`);
  const content = record ? new TextDecoder().decode(record.body) : '';
  return content.startsWith('notice ') ? content.slice('notice '.length) : delivered;
}

/**
 * The session's usage totals equal the sum of its completed turns' usage, whatever crashed
 * or raced (the totals travel in records and completions).
 */
async function expectExactLedger(world: World, id: string, sum: Ledger, where: string): Promise<void> {
  const session = await world.run(world.actor().services.sessions.get(id));
  expect(sum.turns, where).toBeGreaterThan(0);
  expect(session.usage, where).toEqual(sessionUsage(await withStoppedSpend(world, id, sum)));
}

const TOKENS = [
  'input_tokens',
  'cached_input_tokens',
  'cache_write_tokens',
  'output_tokens',
  'reasoning_tokens',
] as const;

/**
 * The session's usage totals count each model call the provider billed (World.billed) once,
 * whoever closed or took over the turn that made it: the completed turns' calls in their
 * completions, a stopped run's in its `spent/` object or in a charge (lib/session/log/charges.ts,
 * deleted once a write counted it). Calls of `crashed`, whose process may have died before it
 * stored what it spent, count at most once. A call that did not answer (aborted, failed) is
 * counted as an estimate, if at all: with one, the totals count at least every answered call of
 * the others. The totals count the stored completed turns (`sum`), and at least what they and
 * the `spent/` objects name (withStoppedSpend).
 */
async function expectBilledLedger(
  world: World,
  id: string,
  sum: Ledger,
  crashed: ActorStore | undefined,
  where: string,
): Promise<void> {
  const session = (await world.run(world.actor().services.sessions.get(id))).usage;
  expect(sum.turns, where).toBeGreaterThan(0);
  expect(session.turns, where).toBe(sum.turns);
  const stored = await withStoppedSpend(world, id, sum);
  const all = billedLedger(world.billed);
  const answered = world.billed.every((call) => call.usage !== undefined);
  const sure = billedLedger(world.billed.filter((call) => call.by !== crashed));
  const pick = (ledger: Ledger | typeof session) => Object.fromEntries(TOKENS.map((name) => [name, ledger[name]]));
  if (answered && !world.billed.some((call) => call.by === crashed)) {
    expect(pick(session), `${where}: the calls billed`).toEqual(pick(all));
    expect(session.priced_cost_usd, `${where}: the cost billed`).toBeCloseTo(all.cost_usd, 9);
    return;
  }
  for (const name of TOKENS) {
    if (answered) expect(session[name], `${where}: ${name} of the calls billed at most`).toBeLessThanOrEqual(all[name]);
    expect(session[name], `${where}: ${name} of the calls surely counted`).toBeGreaterThanOrEqual(sure[name]);
    expect(session[name], `${where}: ${name} of the stored turns and spends`).toBeGreaterThanOrEqual(stored[name]);
  }
}

/**
 * `sum` with what turns closed by someone else stored spent (`spent/`, lib/session/log/unbilled.ts):
 * those the chain counted, and those its newest object still names unbilled, which a read of the
 * session shows as the next write will count them (an empty object: nothing known, counted as 0).
 */
async function withStoppedSpend(world: World, id: string, sum: Ledger): Promise<Ledger> {
  const prefix = `sessions/${id}/spent/`;
  let total = sum;
  for (const object of (await world.store.list(prefix, { limit: 1000 })).objects) {
    if (object.size === 0) continue;
    const spent = parseStored(object.key, (await world.store.get(object.key))!.body, stoppedSpendSchema);
    if (spent.usage) total = addToLedger(total, spent.usage, 0);
    if (spent.summary_usage) total = addToLedger(total, spent.summary_usage, 0);
  }
  return total;
}

/**
 * The responses of the stored completed turns by generation and record (from completions or
 * segments), of every generation: a delete of the newest turn leaves the turn (spent is spent)
 * in the generation before. `held`: the session's history still holds the turn.
 */
/**
 * The views of the session's current incarnation hold the aggregates of the items up to their
 * end, as the whole history gives them: the repeat index they were built with, its delta and
 * shards through any crash, was exact.
 */
async function expectExactViews(world: World, id: string, items: readonly StoredItem[], where: string) {
  const scope = await world.run(world.actor().services.sessions.scope(id));
  const listed = await world.store.list(recordsPrefix(scope), { limit: 1000 });
  for (const object of listed.objects.filter((listedObject) => listedObject.key.endsWith('.view'))) {
    const view = parseView(object.key, (await world.store.get(object.key))!.body);
    expect(view.aggregates, `${where}: ${object.key}`).toEqual(
      computeAggregates(items.filter((item) => item.seq <= view.last_seq)),
    );
  }
}

async function completedTurns(
  world: World,
  id: string,
): Promise<Map<string, { response: TurnResponse; held: boolean }>> {
  const turns = new Map<string, { response: TurnResponse; held: boolean }>();
  const scope = await world.run(world.actor().services.sessions.scope(id));
  const reach = new Map<string, number>([[scope.generation, Number.POSITIVE_INFINITY]]);
  for (const point of scope.ancestors ?? []) if (point.id === id) reach.set(point.generation, point.record);
  const prefix = `sessions/${id}/turn/`;
  const listed = await world.store.list(prefix, { limit: 1000 });
  for (const object of listed.objects) {
    const [generation = '', rest = ''] = object.key.slice(prefix.length).split(/\/(.*)/s);
    const entry = parseRecordsEntry(rest);
    const add = (record: number, response: TurnResponse) =>
      turns.set(`${generation} ${record}`, { response, held: record <= (reach.get(generation) ?? 0) });
    // Packed completions are empty (tombstones): their turns are read from the segment.
    if (entry?.kind === 'done' && object.size > 0) {
      const done = parseStored(object.key, (await world.store.get(object.key))!.body, doneSchema);
      if (done.status === 'completed') add(entry.record, done.response as TurnResponse);
    } else if (entry?.kind === 'segment' && entry.firstSeq <= entry.lastSeq) {
      // (A segment of no items, such as one of a delete's fence alone, holds no turn.)
      const content = await new SegmentReader(world.store, object.key, entry).content();
      for (const turn of content.turns)
        if (turn.status === 'completed') add(turn.record, turn.response as TurnResponse);
    }
  }
  return turns;
}

/**
 * Deletes the session's newest turn as a facade id names it (its first input seq and the
 * generation holding it, read before the turn), and answers the label of the turn it took
 * out. `targeted` gets the label before the delete is sent, so a crashed delete that
 * committed is accounted for too.
 */
function deleteNewest(actor: Actor, id: string, targeted: Set<string>): Promise<Outcome<string>> {
  return attempt(async () => {
    const { sessions } = actor.services;
    const scope = await sessions.scope(id);
    const turn = (await sessions.get(id)).counts.turns;
    const seq = (await sessions.getTurn(id, turn)).input?.first_seq ?? 0;
    const page = await sessions.listItems(id, { before: seq + 1, limit: 1 });
    const label = String((page.items[0] as { content?: unknown } | undefined)?.content);
    targeted.add(label);
    await sessions.deleteTurn(id, turn, { names: { seq, generation: idGeneration(scope, seq) } });
    return label;
  });
}

/** The id of the fork a request labelled `label` takes. */
const childId = (label: string) => label.replace(/[ .]/g, '-');

interface Request {
  step: Step;
  label: string;
  outcome: Outcome<unknown>;
  /** When the request started and ended, in the order of all starts and ends. */
  start: number;
  end: number;
}

/**
 * Acknowledged inputs are stored in the order they were acknowledged: one whose request ended
 * before another's began holds the lower seq, among the inputs a request stores before its
 * answer (a turn, an append, a background turn's claim), and among queued inputs (a queue runs
 * its inputs oldest first).
 */
function expectInOrder(requests: readonly Request[], items: readonly { seq: number; content?: string }[]): void {
  const seqs = new Map(items.map((item) => [item.content, item.seq]));
  const queued = (request: Request) =>
    request.outcome.ok && (request.outcome.value as { kind?: string } | null)?.kind === 'queued';
  const classes = [
    requests.filter(
      (request) => request.outcome.ok && ['turn', 'stream', 'append', 'background'].includes(request.step.kind),
    ),
    requests.filter(queued),
  ];
  for (const acknowledged of classes)
    for (const first of acknowledged)
      for (const then of acknowledged) {
        const [a, b] = [seqs.get(first.label), seqs.get(then.label)];
        if (first.end < then.start && a !== undefined && b !== undefined)
          expect(a, `${first.label} acknowledged before ${then.label} began`).toBeLessThan(b);
      }
}

/**
 * Each acknowledged fork holds a dense history, each input at most once, the session's own up
 * to its point when no turn of the session was deleted since (a rewind changes what came
 * before), and takes a turn.
 */
async function expectForks(
  world: World,
  survivor: Actor,
  requests: readonly Request[],
  parent: readonly { seq: number; type: string; content?: string }[],
): Promise<void> {
  const rewound = requests.some((request) => request.step.kind === 'rewind');
  for (const request of requests) {
    if (request.step.kind !== 'fork' || !request.outcome.ok) continue;
    const id = childId(request.label);
    const items = await world.run(history(survivor, id));
    expectDense(items);
    for (const [content, times] of contents(items)) expect(times, `${id}: ${content}`).toBe(1);
    if (!rewound) expect(items, id).toEqual(parent.slice(0, items.length));
    const turn = await world.run(ops.turn(survivor, id, 'G'), [survivor]);
    expect(turn.ok, `${id}: ${turn.ok ? '' : turn.code}`).toBe(true);
  }
}

/** Seqs 1..n in order. */
function expectDense(items: { seq: number }[]): void {
  expect(items.map((item) => item.seq)).toEqual(items.map((_, index) => index + 1));
}

type Operation = {
  run: (actor: Actor) => Promise<Outcome<unknown>>;
  retry: (actor: Actor) => Promise<Outcome<unknown>>;
};

const OPERATIONS: Record<string, Operation> = {
  turn: { run: (actor) => ops.turn(actor, S, 'T crashed'), retry: (actor) => ops.turn(actor, S, 'T retried') },
  'keyed turn': {
    run: (actor) => ops.turn(actor, S, 'K', 'key-1'),
    retry: (actor) => ops.turn(actor, S, 'K', 'key-1'),
  },
  'streamed turn': {
    run: (actor) => ops.streamTurn(actor, S, 'T crashed'),
    retry: (actor) => ops.streamTurn(actor, S, 'T retried'),
  },
  append: { run: (actor) => ops.append(actor, S, 'A crashed'), retry: (actor) => ops.append(actor, S, 'A retried') },
  'inbox post': { run: (actor) => ops.post(actor, S, 'n3'), retry: (actor) => ops.post(actor, S, 'n3') },
  pack: { run: (actor) => ops.pack(actor, S), retry: (actor) => ops.pack(actor, S) },
  compact: { run: (actor) => ops.compact(actor, S), retry: (actor) => ops.compact(actor, S) },
  delete: { run: (actor) => ops.delete(actor, S), retry: (actor) => ops.delete(actor, S) },
  'enqueue and pickup': {
    run: (actor) => ops.enqueueBehind(actor, S, 'Q crashed'),
    // The survivor's turns take up what the crashed process left queued.
    retry: (actor) => ops.turn(actor, S, 'T retried'),
  },
};

/**
 * Storage calls of each operation without a crash (the crash points to try), and how many of
 * them came before its answer (the rest are its work after the response: the session index).
 */
async function callsOf(
  operation: Operation,
  setUpWorld: () => Promise<World>,
): Promise<{ calls: number; answered: number }> {
  const world = await setUpWorld();
  const actor = world.actor();
  let answered = 0;
  const work = operation.run(actor).then((outcome) => {
    answered = actor.store.calls;
    return outcome;
  });
  must(await world.run(work, [actor]));
  return { calls: actor.store.calls, answered };
}

type Step =
  | {
      kind:
        | 'turn'
        | 'stream'
        | 'append'
        | 'pack'
        | 'compact'
        | 'cancel'
        | 'enqueue'
        | 'interrupt'
        | 'behind'
        | 'rewind'
        | 'withdraw'
        | 'background'
        | 'sweep'
        | 'fork'
        | 'stall';
    }
  | { kind: 'keyed'; key: number }
  | { kind: 'post' };

const stepArbitrary: fc.Arbitrary<Step> = fc.oneof(
  fc.constantFrom<Step>(
    { kind: 'turn' },
    { kind: 'stream' },
    { kind: 'append' },
    { kind: 'pack' },
    { kind: 'compact' },
    { kind: 'cancel' },
    { kind: 'post' },
    { kind: 'enqueue' },
    { kind: 'interrupt' },
    { kind: 'behind' },
    { kind: 'rewind' },
    { kind: 'withdraw' },
    { kind: 'background' },
    { kind: 'sweep' },
    { kind: 'fork' },
    { kind: 'stall' },
  ),
  fc.record({ kind: fc.constant('keyed' as const), key: fc.nat(1) }),
);

/** An actor's steps; one in five queues an input behind its own turn and withdraws it while that turn runs. */
const programArbitrary: fc.Arbitrary<Step[]> = fc.oneof(
  { weight: 4, arbitrary: fc.array(stepArbitrary, { minLength: 1, maxLength: 3 }) },
  {
    weight: 1,
    arbitrary: fc
      .array(stepArbitrary, { maxLength: 1 })
      .map((steps): Step[] => [{ kind: 'behind' }, { kind: 'withdraw' }, ...steps]),
  },
);

interface Scenario {
  actors: Step[][];
  crash: { actor: number; at: number; after: boolean } | undefined;
  seed: number;
  /**
   * Set the session up under the seed's scheduler, as every interleaving once did, instead of
   * copying the state set up once (an example found that way replays the same choices).
   */
  setupUnderSeed?: true;
}

const scenarioArbitrary: fc.Arbitrary<Scenario> = fc.record({
  actors: fc.array(programArbitrary, { minLength: 2, maxLength: 4 }),
  crash: fc.option(fc.record({ actor: fc.nat(3), at: fc.integer({ min: 1, max: 40 }), after: fc.boolean() }), {
    nil: undefined,
    freq: 2,
  }),
  seed: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
});

const keyed = (key: number): Step => ({ kind: 'keyed', key });

/** Interleavings that once broke an invariant, run every time before the random ones. */
const PROTOCOL_EXAMPLES: [Scenario][] = [
  // A notice delivered twice: a turn read it, another moved it, was closed (a stall past the
  // lease) and gave it back; the first moved the post back (same bytes, same etag) as the notice
  // it read, while the turn that took the post over delivered it too.
  [
    {
      actors: [
        [keyed(0), keyed(0), { kind: 'stall' }],
        [keyed(0), keyed(1), keyed(0)],
        [{ kind: 'compact' }, { kind: 'rewind' }, keyed(0)],
        [{ kind: 'behind' }, { kind: 'interrupt' }, keyed(0)],
      ],
      crash: undefined,
      seed: 6,
      setupUnderSeed: true,
    },
  ],
  // A notice delivered under another name: a background turn's second run took the lease over
  // (a stall past it) and moved the notices; the first run closed the turn and gave them back,
  // one while the second run's delete of its original had not landed, so under a generated name.
  [
    {
      actors: [
        [{ kind: 'pack' }, { kind: 'stall' }, keyed(0)],
        [keyed(0), { kind: 'turn' }],
        [{ kind: 'background' }],
        [{ kind: 'pack' }],
      ],
      crash: undefined,
      seed: 434981164,
    },
  ],
];

type DeleteStep = 'delete' | 'turn' | 'behind' | 'enqueue' | 'background' | 'post' | 'compact' | 'sweep';

/** Actors of which the first deletes the session at some point of its steps; one may crash. */
const deleteScenarioArbitrary = fc.record({
  actors: fc
    .tuple(
      fc.array(fc.constantFrom<DeleteStep>('turn', 'behind', 'background', 'post', 'sweep'), { maxLength: 2 }),
      fc.array(
        fc.array(fc.constantFrom<DeleteStep>('turn', 'behind', 'enqueue', 'background', 'post', 'compact', 'sweep'), {
          minLength: 1,
          maxLength: 3,
        }),
        { minLength: 1, maxLength: 3 },
      ),
      fc.nat(2),
    )
    .map(([deleter, others, at]): DeleteStep[][] => [
      [...deleter.slice(0, at), 'delete', ...deleter.slice(at)],
      ...others,
    ]),
  crash: fc.option(fc.record({ actor: fc.nat(3), at: fc.integer({ min: 1, max: 40 }), after: fc.boolean() }), {
    nil: undefined,
    freq: 2,
  }),
  seed: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
});

export function defineProtocolSimulation(options: SimulationOptions): void {
  const report: Report = { crashPoints: {}, interleavings: 0, withCrash: 0, actors: {}, storageCalls: 0 };
  afterAll(() => {
    if (options.report && process.env.SIMULATION_REPORT)
      writeFileSync(process.env.SIMULATION_REPORT, JSON.stringify(report));
  });
  // One call at a time: a crash point names the same call in every run.
  const serialWorld = async () => {
    const world = await options.makeWorld();
    world.scheduler.serial = true;
    return world;
  };
  /**
   * The session set up once (one actor, one call at a time), then a world for each run on a copy
   * of it, its choices from `pick`. A setup's state is the same whatever its scheduler picks (its
   * own calls in the order it makes them: the same objects, up to the random ids a setup draws
   * anew), so each run starts where its own setup would have left it, and the seed's choices all
   * go to its actors. `underSeed`: the setup run again under `pick`, its choices taken first.
   */
  const setUpOnce = async () => {
    const template = await serialWorld();
    await setup(template);
    return async (pick: (choices: number) => number, underSeed?: boolean) => {
      const world = await options.makeWorld(pick);
      if (underSeed) await setup(world);
      else await template.copyTo(world);
      return world;
    };
  };
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  describe(`the session protocol survives a crash at every storage call: ${options.name}`, () => {
    for (const [name, operation] of Object.entries(OPERATIONS)) {
      it(
        `${name}: crashed at each call, before it and after it landed, then retried`,
        async () => {
          // The session set up once (one actor, one call at a time: the same state every time),
          // then copied for each run.
          const template = await serialWorld();
          await setup(template);
          const setUpWorld = async () => {
            const world = await serialWorld();
            await template.copyTo(world);
            return world;
          };
          const { calls, answered } = await callsOf(operation, setUpWorld);
          expect(answered).toBeGreaterThan(0);
          for (let at = 1; at <= calls; at++) {
            for (const after of [false, true]) {
              const world = await setUpWorld();
              const crashed = world.actor({ at, after });
              const lost = await world.run(operation.run(crashed), [crashed]);
              expect(crashed.store.dead, `crash at call ${at}`).toBe(true);
              report.crashPoints[name] = (report.crashPoints[name] ?? 0) + 1;
              // A crash after the answer (in the work that follows it) leaves the answer standing. An
              // enqueue whose entry landed before the crash is answered 202 all the same (its
              // withdraw failed too, so the entry stands): below, its input runs once.
              if (name !== 'enqueue and pickup' || at > answered) expect(lost.ok).toBe(at > answered);

              // Restart: the dead process's lease runs out; the client retries, then takes a turn.
              world.now += LEASE_MS + 1;
              const survivor = world.actor();
              const retried = await world.run(operation.retry(survivor), [survivor]);
              if (!retried.ok) expect(retried.status, `${name} at ${at}/${after}: ${retried.code}`).toBeLessThan(500);
              if (name === 'delete')
                must(
                  await world.run(
                    survivor.services.sessions.create({ id: S }).then((value) => ({ ok: true as const, value })),
                  ),
                );
              const final = await world.run(ops.turn(survivor, S, 'F'), [survivor]);
              expect(
                final.ok,
                `${name} crashed at call ${at} (${after ? 'after' : 'before'} it): ${final.ok ? '' : final.code}`,
              ).toBe(true);

              const items = await world.run(history(survivor, S));
              expectDense(items);
              const stored = contents(items);
              const { deliveries, sum } = await storedTurns(world, S);
              const where = `${name}, crash at call ${at} ${after ? 'after' : 'before'}`;
              if (name === 'delete') {
                // A re-created id starts empty: only the final turn, nothing of the old session.
                expect([...stored.keys()], where).toEqual(['F']);
                expect(deliveries.size, where).toBe(0);
                continue;
              }
              await expectExactViews(world, S, items as StoredItem[], where);
              for (let index = 0; index < 5; index++) expect(stored.get(`setup ${index}`), where).toBe(1);
              expect(stored.get('setup append'), where).toBe(1);
              expect(stored.get('F'), where).toBe(1);
              expect(stored.get('T crashed') ?? 0, where).toBeLessThanOrEqual(1);
              expect(stored.get('A crashed') ?? 0, where).toBeLessThanOrEqual(1);
              if (name === 'turn' || name === 'streamed turn' || name === 'enqueue and pickup')
                expect(stored.get('T retried'), where).toBe(1);
              if (name === 'append') expect(stored.get('A retried'), where).toBe(1);
              // A queued input acknowledged is stored once, taken up by whoever closed the turn before it.
              if (name === 'enqueue and pickup') {
                const queued = stored.get('Q crashed') ?? 0;
                if (lost.ok) expect(queued, where).toBe(1);
                else expect(queued, where).toBeLessThanOrEqual(1);
              }
              // One key, one stored input, whether the retry replayed or ran it.
              if (name === 'keyed turn')
                expect(stored.get('K'), where).toBe(
                  retried.ok ? 1 : (stored.get('K') ?? 0) <= 1 ? stored.get('K') : -1,
                );
              // Every acknowledged notice reached exactly one stored turn; n3 too, once it exists.
              expect(deliveries.get('n1'), where).toBe(1);
              expect(deliveries.get('n2'), where).toBe(1);
              if (name === 'inbox post') expect(deliveries.get('n3'), where).toBe(1);
              await expectExactLedger(world, S, sum, where);
              expect(world.promptFaults, where).toEqual([]);
            }
          }
        },
        options.crashTimeoutMs,
      );
    }
  });

  describe(`the session protocol under concurrent actors: ${options.name}`, () => {
    it(`keeps its invariants over ${options.runs} random interleavings of 2 to 4 actors, one of which may ` +
      'crash', async () => {
      let interleavings = 0;
      const setUpWorld = await setUpOnce();
      await fc.assert(
        fc.asyncProperty(scenarioArbitrary, async ({ actors: programs, crash, seed, setupUnderSeed }) => {
          const world = await setUpWorld(seeded(seed), setupUnderSeed);
          // A turn cancelled and then crashed after taking notices is a double fault the
          // protocol does not cover: runs with a crash have no cancel (nor interrupt, nor a stall
          // past the lease, which has the turns running then closed by the next writer).
          const crashFree = crash
            ? programs.map((steps) => steps.filter((step) => !['cancel', 'interrupt', 'stall'].includes(step.kind)))
            : programs;
          const plans = crashFree;
          const crashedActor = crash ? crash.actor % plans.length : -1;
          const actors = plans.map((_, index) =>
            world.actor(index === crashedActor ? { at: crash!.at, after: crash!.after } : undefined),
          );
          const requests: (Request & { actor: number })[] = [];
          let unique = 0;
          // Orders the requests' starts and ends.
          let clock = 0;
          // The labels of the turns a delete of the newest turn went for, and those it took out.
          const targeted = new Set<string>();
          // The queued inputs a withdraw went for (the newest acknowledged one not gone for yet), by label.
          const withdrawals = new Map<string, { by: number; outcome: Outcome<unknown> | null }>();
          const withdrawNewest = async (actor: Actor, by: number): Promise<Outcome<unknown>> => {
            const target = requests.findLast(
              (request) =>
                request.outcome.ok &&
                (request.outcome.value as { kind?: string } | null)?.kind === 'queued' &&
                !withdrawals.has(request.label),
            );
            if (!target?.outcome.ok) return { ok: true, value: null };
            const name = (target.outcome.value as { queued_turn: string }).queued_turn;
            withdrawals.set(target.label, { by, outcome: null });
            const outcome = await attempt(() => actor.services.sessions.withdrawQueued(S, name));
            withdrawals.set(target.label, { by, outcome });
            return outcome;
          };
          // A process stalled past its lease: the clock moves on a lease while the others' work runs.
          const stall = (): Outcome<unknown> => {
            world.now += LEASE_MS + 1;
            return { ok: true, value: null };
          };
          const program = async (index: number) => {
            for (const step of plans[index]!) {
              const actor = actors[index]!;
              const label = step.kind === 'keyed' ? `keyed ${step.key}` : `${step.kind} ${index}.${unique++}`;
              const start = clock++;
              const outcome =
                step.kind === 'turn'
                  ? await ops.turn(actor, S, label)
                  : step.kind === 'stream'
                    ? await ops.streamTurn(actor, S, label)
                    : step.kind === 'keyed'
                      ? await ops.turn(actor, S, label, `key-${step.key}`)
                      : step.kind === 'append'
                        ? await ops.append(actor, S, label)
                        : step.kind === 'post'
                          ? await ops.post(actor, S, label.replace(' ', '-'))
                          : step.kind === 'pack'
                            ? await ops.pack(actor, S)
                            : step.kind === 'compact'
                              ? await ops.compact(actor, S)
                              : step.kind === 'enqueue' || step.kind === 'interrupt'
                                ? await ops.policyTurn(actor, S, label, step.kind)
                                : step.kind === 'behind'
                                  ? await ops.enqueueBehind(actor, S, label)
                                  : step.kind === 'rewind'
                                    ? await deleteNewest(actor, S, targeted)
                                    : step.kind === 'withdraw'
                                      ? await withdrawNewest(actor, index)
                                      : step.kind === 'background'
                                        ? await ops.background(actor, S, label, [
                                            actor,
                                            actors[(index + 1) % actors.length]!,
                                          ])
                                        : step.kind === 'sweep'
                                          ? await ops.sweep(actor)
                                          : step.kind === 'fork'
                                            ? await ops.fork(actor, S, childId(label))
                                            : step.kind === 'stall'
                                              ? stall()
                                              : await ops.cancelNewest(actor, S);
              requests.push({ actor: index, step, label, outcome, start, end: clock++ });
            }
          };
          await world.run(Promise.all(plans.map((_, index) => program(index))), actors);
          interleavings += 1;
          report.interleavings += 1;
          report.withCrash += crash ? 1 : 0;
          report.actors[plans.length] = (report.actors[plans.length] ?? 0) + 1;
          report.storageCalls += actors.reduce((sum, actor) => sum + actor.store.calls, 0);

          world.now += LEASE_MS + 1;
          const survivor = world.actor();
          const final = await world.run(ops.turn(survivor, S, 'F'), [survivor]);
          expect(final.ok, final.ok ? '' : final.code).toBe(true);
          for (const request of requests) {
            // A fork a stall overlapped took longer than half a lease: refused (503), to be retried.
            const stalled = requests.some(
              (other) => other.step.kind === 'stall' && other.start > request.start && other.end < request.end,
            );
            if (request.step.kind === 'fork' && stalled && !request.outcome.ok && request.outcome.status === 503)
              continue;
            if (request.actor !== crashedActor && !request.outcome.ok)
              expect(
                request.outcome.status,
                `${request.label}: ${request.outcome.code} ${String(request.outcome.error)} ` +
                  `${(request.outcome.error as any)?.key} ${(request.outcome.error as any)?.reason}`,
              ).toBeLessThan(500);
          }
          const items = await world.run(history(survivor, S));
          expectDense(items);
          const stored = contents(items);
          expect(stored.get('F')).toBe(1);
          for (const request of requests) {
            if (
              !['turn', 'stream', 'append', 'keyed', 'enqueue', 'interrupt', 'behind', 'background'].includes(
                request.step.kind,
              )
            )
              continue;
            const acknowledged = requests.some((other) => other.label === request.label && other.outcome.ok);
            const count = stored.get(request.label) ?? 0;
            // Not lost: taken out by a delete of the newest turn that was acknowledged, or that
            // crashed (it may have committed).
            const deleted = requests.some(
              (other) =>
                other.step.kind === 'rewind' &&
                (other.outcome.ok ? other.outcome.value === request.label : other.actor === crashedActor),
            );
            // Withdrawn: never run; a withdraw that crashed may have withdrawn it. One refused (409, 404) ran, or runs.
            const withdrawal = withdrawals.get(request.label);
            if (withdrawal?.outcome?.ok) expect(count, `${request.label} withdrawn`).toBe(0);
            else if (withdrawal && (withdrawal.by === crashedActor || !withdrawal.outcome))
              expect(count, request.label).toBeLessThanOrEqual(1);
            else if (deleted && targeted.has(request.label)) expect(count, request.label).toBeLessThanOrEqual(1);
            else if (acknowledged) expect(count, request.label).toBe(1);
            else expect(count, request.label).toBeLessThanOrEqual(1);
          }
          const { deliveries, everDelivered, sum } = await storedTurns(world, S);
          for (const [name, times] of deliveries) expect(times, name).toBe(1);
          const posted = [
            'n1',
            'n2',
            ...requests
              .filter((request) => request.step.kind === 'post' && request.outcome.ok)
              .map((request) => request.label.replace(' ', '-')),
          ];
          // Delivered once in the history, or to a turn a delete of the newest turn took out.
          for (const name of posted)
            if (!everDelivered.has(name) || deliveries.has(name))
              expect(deliveries.get(name), `notice ${name}`).toBe(1);
          await expectBilledLedger(world, S, sum, actors[crashedActor]?.store, 'after the interleaving');
          expect(world.promptFaults).toEqual([]);
          expectInOrder(requests, items);
          await expectForks(world, survivor, requests, items);
        }),
        {
          numRuns: options.runs,
          examples: PROTOCOL_EXAMPLES,
          ...(process.env.SIMULATION_SEED ? { seed: Number(process.env.SIMULATION_SEED) } : {}),
          ...(process.env.SIMULATION_PATH ? { path: process.env.SIMULATION_PATH } : {}),
        },
      );
      if (!process.env.SIMULATION_PATH) expect(interleavings).toBeGreaterThanOrEqual(options.runs);
    }, 600_000);
  });
  describe(`a session delete racing its turns, queued inputs and notices: ${options.name}`, () => {
    const runs = Math.ceil(options.runs / 10);
    it(`leaves nothing of the session to its next incarnation over ${runs} random interleavings`, async () => {
      const setUpWorld = await setUpOnce();
      await fc.assert(
        fc.asyncProperty(deleteScenarioArbitrary, async ({ actors: programs, crash, seed }) => {
          const world = await setUpWorld(seeded(seed));
          const crashedActor = crash ? crash.actor % programs.length : -1;
          const actors = programs.map((_, index) =>
            world.actor(index === crashedActor ? { at: crash!.at, after: crash!.after } : undefined),
          );
          const requests: (Request & { actor: number })[] = [];
          let clock = 0;
          const program = async (index: number) => {
            for (const [position, kind] of programs[index]!.entries()) {
              const actor = actors[index]!;
              const label = `${kind} ${index}.${position}`;
              const start = clock++;
              const outcome =
                kind === 'delete'
                  ? await ops.delete(actor, S)
                  : kind === 'turn'
                    ? await ops.turn(actor, S, label)
                    : kind === 'behind'
                      ? await ops.enqueueBehind(actor, S, label)
                      : kind === 'enqueue'
                        ? await ops.policyTurn(actor, S, label, 'enqueue')
                        : kind === 'background'
                          ? await ops.background(actor, S, label, [actor, actors[(index + 1) % actors.length]!])
                          : kind === 'post'
                            ? await ops.post(actor, S, label.replace(/[ .]/g, '-'))
                            : kind === 'compact'
                              ? await ops.compact(actor, S)
                              : await ops.sweep(actor);
              requests.push({ actor: index, step: { kind: 'turn' }, label, outcome, start, end: clock++ });
            }
          };
          await world.run(Promise.all(programs.map((_, index) => program(index))), actors);
          for (const request of requests)
            if (request.actor !== crashedActor && !request.outcome.ok)
              expect(
                request.outcome.status,
                `${request.label}: ${request.outcome.code} ${String(request.outcome.error)}`,
              ).toBeLessThan(500);

          // A lease later, the sweep of queues finds nothing it fails on; the id is created again
          // where the delete went through, and takes a turn.
          world.now += LEASE_MS + 1;
          const survivor = world.actor();
          const swept = await world.run(ops.sweep(survivor), [survivor]);
          expect(swept.ok, swept.ok ? '' : `${swept.code} ${String(swept.error)}`).toBe(true);
          const exists = await world.run(attempt(() => survivor.services.sessions.get(S)));
          const deleted = requests.some((request) => request.label.startsWith('delete') && request.outcome.ok);
          if (deleted) expect(exists.ok).toBe(false);
          if (!exists.ok) await world.run(survivor.services.sessions.create({ id: S }));
          const final = await world.run(ops.turn(survivor, S, 'F'), [survivor]);
          expect(final.ok, final.ok ? '' : final.code).toBe(true);
          const items = await world.run(history(survivor, S));
          expectDense(items);
          const stored = contents(items);
          for (const [content, times] of stored) expect(times, content).toBe(1);
          const { deliveries } = await storedTurns(world, S);
          for (const [name, times] of deliveries) expect(times, name).toBe(1);
          if (!exists.ok) {
            // The new incarnation holds its own turn alone, and no notice posted to the old one.
            expect([...stored.keys()]).toEqual(['F']);
            expect([...deliveries.keys()]).toEqual([]);
          }
          expect(world.promptFaults).toEqual([]);
          // Nothing stays queued or marked once the sweep has run again.
          const again = await world.run(ops.sweep(survivor), [survivor]);
          expect(again.ok).toBe(true);
          expect(await world.run(survivor.services.sessions.markedQueues())).toEqual([]);
        }),
        {
          numRuns: runs,
          ...(process.env.SIMULATION_SEED ? { seed: Number(process.env.SIMULATION_SEED) } : {}),
          ...(process.env.SIMULATION_PATH ? { path: process.env.SIMULATION_PATH } : {}),
        },
      );
    }, 600_000);
  });
}
