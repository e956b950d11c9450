import { describe, expect, it } from 'vitest';
import { createTurnRunner, type AppOptions } from '../../functions/app.ts';
import { StorageError } from '../../lib/errors.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { listAll } from '../../lib/store/object-store.ts';
import type { Body, GetOptions, PutOptions } from '../../lib/store/object-store.ts';
import type { BackgroundTurn } from '../../lib/turn/index.ts';
import { appHarness } from '../support/app-harness.ts';
import { FaultyStore, type FaultOptions, type StoreCall } from '../support/faulty-store.ts';
import { createClient, TOKEN } from './http-suite.ts';

// An enqueue whose entry landed and whose queue signal or listing then failed (docs/API.md, "Busy
// sessions"): its client is answered 202 and the input runs once, or 503 and it never runs, so
// a retry after a 503 queues it once.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: '3000' };

/** A FaultyStore that runs `beforeGet` (`beforePut`) once, before the first get (put) its hook `matches`. */
class HookedStore extends FaultyStore {
  beforeGet: { matches: (key: string) => boolean; run: () => Promise<unknown> } | null = null;
  beforePut: { matches: (key: string, options?: PutOptions) => boolean; run: () => Promise<unknown> } | null = null;
  override async put(key: string, body: Body, options?: PutOptions) {
    const before = this.beforePut;
    if (before?.matches(key, options)) {
      this.beforePut = null;
      await before.run();
    }
    return super.put(key, body, options);
  }
  override async get(key: string, options?: GetOptions) {
    const before = this.beforeGet;
    if (before?.matches(key)) {
      this.beforeGet = null;
      await before.run();
    }
    return super.get(key, options);
  }
}

/** A process on a FaultyStore whose background turns wait in `sent` until run (`runNext`, `runAll`). */
function setup() {
  const store = new HookedStore(new MemoryStore());
  const sent: BackgroundTurn[] = [];
  const tasks: Promise<unknown>[] = [];
  const options: AppOptions = {
    store: () => store,
    readEnvironment: (c) => c.env ?? environment,
    afterResponse: (task) => void tasks.push(task),
    queueTurn: () => async (run) => void sent.push(run),
  };
  const harness = appHarness(store, environment, options);
  const api = createClient(harness);
  const runner = createTurnRunner(options);
  const drain = async () => {
    while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
  };
  let ran = 0;
  const runNext = async () => {
    expect(await runner(sent[ran++]!, environment, (task) => void tasks.push(task))).toBe('done');
    await drain();
  };
  const runAll = async () => {
    while (ran < sent.length) await runNext();
  };
  return { store, api, drain, runNext, runAll, logged: harness.logged };
}

const signalPut = ({ operation, key }: StoreCall) => operation === 'put' && key.endsWith('/-queued');
const queueListing = ({ operation, key }: StoreCall) => operation === 'list' && key.includes('/queue/');
/** A withdraw's tombstone: the entry put empty, if-match. */
const tombstonePut = ({ operation, key, options }: StoreCall) =>
  operation === 'put' && key.includes('/queue/') && options?.ifMatch !== undefined && options.contentType === undefined;

/**
 * Enqueues 'queued' behind a running turn with `faults` set for that request only, then runs
 * every turn with the store healed: the answer, and how many times 'queued' ran.
 */
async function enqueueUnder(
  faults: [(call: StoreCall) => boolean, FaultOptions?][],
  before?: (world: ReturnType<typeof setup>) => void,
) {
  const world = setup();
  const { store, api, drain, runAll } = world;
  const id = await api.session({ on_busy: 'enqueue' });
  expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
  for (const [when, options] of faults) store.failWhen(when, options);
  before?.(world);
  const answer = await api.post(`/v1/sessions/${id}/turns`, { input: 'queued' });
  store.heal();
  await drain();
  await runAll();
  const items = (await api.get(`/v1/sessions/${id}/items?limit=100`)).body.items;
  const runs = items.filter((item: any) => item.role === 'user' && JSON.stringify(item.content).includes('queued'));
  const left = (await listAll(store.inner, '')).filter((object) => object.key.includes('/queue/'));
  return { ...world, id, answer, runs: runs.length, left };
}

/** Exactly one of the two: 202 and one run, or 503 and none. */
function exact(result: Awaited<ReturnType<typeof enqueueUnder>>, status: 202 | 503) {
  expect(result.answer.status, JSON.stringify(result.answer.body)).toBe(status);
  expect(result.runs).toBe(status === 202 ? 1 : 0);
  expect(result.left).toEqual([]);
}

describe('an enqueue whose entry landed and whose signal or listing failed', () => {
  it('tries the signal again: one failure is answered 202, and the input runs once', async () => {
    const result = await enqueueUnder([[signalPut, { times: 1 }]]);
    exact(result, 202);
    expect(result.answer.body.position).toBe(1);
  });

  it('tries the listing again: one failure is answered 202, and the input runs once', async () => {
    const result = await enqueueUnder([[queueListing, { times: 1 }]]);
    exact(result, 202);
    expect(result.answer.body.position).toBe(1);
  });

  it('withdraws the entry when the signal keeps failing: 503, and the input never runs', async () => {
    exact(await enqueueUnder([[signalPut]]), 503);
  });

  it('withdraws the entry when the listing keeps failing: 503, and the input never runs', async () => {
    exact(await enqueueUnder([[queueListing]]), 503);
  });

  it('answers 503 when the withdraw landed but its answer was lost: the input never runs', async () => {
    exact(await enqueueUnder([[signalPut], [tombstonePut, { times: 1, after: true }]]), 503);
  });

  it('withdraws the entry when its store throws one error value for every failure: 503, it never runs', async () => {
    // The withdraw's first read fails with the very error the signal's put failed with: a try that
    // failed, tried again (the next one withdraws), not the enqueue's own failure answered as is.
    const shared = new StorageError('the store is unavailable');
    const error = () => shared;
    const entryGet = ({ operation, key }: StoreCall) =>
      operation === 'get' && key.includes('/queue/') && !key.endsWith('/-queued');
    exact(
      await enqueueUnder([
        [signalPut, { error }],
        [entryGet, { times: 1, error }],
      ]),
      503,
    );
  });

  it('answers 202 at position 0 when a pickup took the input up before its withdraw: it runs once', async () => {
    // Turn 1 ends, and its close's pickup takes the input up, right before the withdraw reads the entry.
    const result = await enqueueUnder([[signalPut]], ({ store, runNext }) => {
      store.beforeGet = { matches: (key) => key.includes('/queue/'), run: runNext };
    });
    exact(result, 202);
    expect(result.answer.body.position).toBe(0);
  });

  it('answers 202 at position 0 when a pickup took it up but failed to index its key: it runs once', async () => {
    // As above, and the claim's put of the key's turn (`idem/`) fails: its completion writes it.
    const keyIndex = ({ operation, key }: StoreCall) => operation === 'put' && key.includes('/idem/');
    const result = await enqueueUnder([[signalPut], [keyIndex, { times: 1 }]], ({ store, runNext }) => {
      store.beforeGet = { matches: (key) => key.includes('/queue/'), run: runNext };
    });
    exact(result, 202);
    expect(result.answer.body.position).toBe(0);
  });

  it('withdraws an entry whose put landed unanswered, its read failing: 503, and it never runs', async () => {
    const entryPut = ({ operation, key, options }: StoreCall) =>
      operation === 'put' && key.includes('/queue/') && options?.onlyIfAbsent === true;
    const entryGet = ({ operation, key }: StoreCall) => operation === 'get' && key.includes('/queue/');
    exact(
      await enqueueUnder([
        [entryPut, { times: 1, after: true }],
        [entryGet, { times: 1 }],
      ]),
      503,
    );
  });

  it('answers 202 when its put landed unanswered and its withdraw, which read it, fails: it runs once', async () => {
    // The put lands, its answer lost, and its read-back fails: the withdraw reads the entry, so it
    // stands; its tombstone's put fails every try, so it runs, and a 503 would have it sent again.
    const entryPut = ({ operation, key, options }: StoreCall) =>
      operation === 'put' && key.includes('/queue/') && options?.onlyIfAbsent === true;
    const entryGet = ({ operation, key }: StoreCall) => operation === 'get' && key.includes('/queue/');
    const result = await enqueueUnder([
      [entryPut, { times: 1, after: true }],
      [entryGet, { times: 1 }],
      [tombstonePut],
    ]);
    exact(result, 202);
    expect(result.answer.body.position).toBeNull();
    expect(result.logged.some((line) => line.includes('could not be withdrawn'))).toBe(true);
  });

  it('answers 202 when no withdraw could read whether its put landed, once its put again makes it stand', async () => {
    // Every read of the entry fails (the read-back, each withdraw's): its put again, create-only
    // under its writer, lands (or finds it landed), so it stands and runs once.
    const entryGet = ({ operation, key }: StoreCall) => operation === 'get' && key.includes('/queue/');
    for (const landed of [true, false]) {
      const entryPut = ({ operation, key, options }: StoreCall) =>
        operation === 'put' && key.includes('/queue/') && options?.onlyIfAbsent === true;
      const result = await enqueueUnder([[entryPut, { times: 1, after: landed }], [entryGet]]);
      exact(result, 202);
      expect(result.answer.body.position).toBeNull();
    }
  });

  it('answers 202 when its put again lands after a pickup ran and removed the first copy: it runs once', async () => {
    // The put lands, its answer lost; right then turn 1 ends and its close's pickup takes the
    // input up (its claim indexes the input's random key under `idem/`) and removes the entry.
    // Every read of the entry by the enqueue fails, so its put again lands a second copy, which
    // the next pickup's claim replays: the unkeyed input runs once.
    let picking = false;
    const entryPut = ({ operation, key, options }: StoreCall) =>
      operation === 'put' && key.includes('/queue/') && options?.onlyIfAbsent === true;
    const entryGet = ({ operation, key }: StoreCall) => !picking && operation === 'get' && key.includes('/queue/');
    const result = await enqueueUnder([[entryPut, { times: 1, after: true }], [entryGet]], ({ store, runNext }) => {
      store.beforeGet = {
        matches: (key) => key.includes('/queue/'),
        run: async () => {
          picking = true;
          await runNext();
          picking = false;
        },
      };
    });
    exact(result, 202);
    expect(result.answer.body.position).toBeNull();
    const keyed = await listAll(result.store.inner, '');
    const indexed = keyed.filter(({ key }) => key.includes('/idem/') && key.endsWith(result.answer.body.queued_turn));
    expect(indexed).toHaveLength(1);
    expect(result.logged.some((line) => line.includes('could not be withdrawn: it runs'))).toBe(true);
  });

  it('answers 503 (logged) when every put and read of the entry fails: nothing tells it was stored', async () => {
    // A 202 must not answer an input stored nowhere; the put that failed did not land here.
    const entryCall = ({ operation, key }: StoreCall) => ['get', 'put'].includes(operation) && key.includes('/queue/');
    const result = await enqueueUnder([[entryCall]]);
    exact(result, 503);
    expect(result.logged.some((line) => line.includes('answered 503, it runs if its put landed'))).toBe(true);
  });

  it.each([
    ['its answer lost, every later read of the entry failing', 'get', true],
    ["its answer lost, every later read of its key's turn failing", 'head', true],
    ['and its delete failing, every later read of the entry failing', 'get', false],
  ] as const)("answers 503 when its withdraw's tombstone landed, %s: the input never runs", async (_, read, lost) => {
    // The tombstone stands (no pickup runs an emptied entry), so a 202 would answer an input lost.
    let tombstoned = false;
    const tombstone = (call: StoreCall) => {
      if (!tombstonePut(call)) return false;
      tombstoned = true;
      return lost;
    };
    const after = ({ operation, key }: StoreCall) =>
      tombstoned &&
      ((read === 'get' && operation === 'get' && key.includes('/queue/')) ||
        (read === 'head' && operation === 'head' && key.includes('/idem/')) ||
        (!lost && operation === 'delete' && key.includes('/queue/')));
    const result = await enqueueUnder([[tombstone, { times: 1, after: true }], [signalPut], [after]]);
    expect(result.answer.status, JSON.stringify(result.answer.body)).toBe(503);
    expect(result.runs).toBe(0);
    // What is left under the key is its tombstone, passed over by every pickup until it goes stale.
    expect(result.left.every((object) => object.size === 0)).toBe(true);
  });

  it('answers 202 at position 0 when its last tombstone put failed and a pickup took it up since', async () => {
    // Every tombstone put fails; the read of what stands after the last one finds nothing: a
    // pickup took the input up (none takes an emptied entry up), so it runs once.
    let reads = 0;
    const result = await enqueueUnder([[signalPut], [tombstonePut]], ({ store, runNext }) => {
      store.beforeGet = { matches: (key) => key.includes('/queue/') && ++reads === 4, run: runNext };
    });
    exact(result, 202);
    expect(result.answer.body.position).toBe(0);
  });

  it('answers 202 when the withdraw fails too (the entry stands), and the input runs once', async () => {
    const signalFailed = await enqueueUnder([[signalPut], [tombstonePut]]);
    exact(signalFailed, 202);
    expect(signalFailed.answer.body.position).toBe(1);
    expect(signalFailed.logged.some((line) => line.includes('could not be withdrawn'))).toBe(true);
    const listingFailed = await enqueueUnder([[queueListing], [tombstonePut]]);
    exact(listingFailed, 202);
    expect(listingFailed.answer.body.position).toBeNull();
  });

  it('answers a keyed input 503 without withdrawing it: its retry under the key queues nothing new', async () => {
    const headers = { 'Idempotency-Key': 'enqueue-failure' };
    const world = setup();
    const { store, api, drain, runAll } = world;
    const id = await api.session({ on_busy: 'enqueue' });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
    store.failWhen(signalPut);
    const failed = await api.post(`/v1/sessions/${id}/turns`, { input: 'queued' }, headers);
    expect(failed.status, JSON.stringify(failed.body)).toBe(503);
    store.heal();
    const retried = await api.post(`/v1/sessions/${id}/turns`, { input: 'queued' }, headers);
    expect(retried.status, JSON.stringify(retried.body)).toBe(202);
    expect(retried.body.position).toBe(1);
    await drain();
    await runAll();
    const items = (await api.get(`/v1/sessions/${id}/items?limit=100`)).body.items;
    expect(
      items.filter((item: any) => item.role === 'user' && JSON.stringify(item.content).includes('queued')),
    ).toHaveLength(1);
  });
});

describe('the position an enqueue answers', () => {
  it('leaves out an input whose turn runs though its pickup could not index its key', async () => {
    const { store, api, drain, runNext, runAll } = setup();
    const id = await api.session({ on_busy: 'enqueue' });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
    const taken = await api.post(`/v1/sessions/${id}/turns`, { input: 'taken up' });
    expect(taken.body.position).toBe(1);
    // Turn 1 ends; its close's pickup claims 'taken up' as turn 2, whose put of `idem/` fails:
    // its entry stays listed, marked, while turn 2 runs (its completion indexes the key).
    store.failWhen(({ operation, key }) => operation === 'put' && key.includes('/idem/'));
    await runNext();
    store.heal();
    expect((await api.get(`/v1/sessions/${id}/turns/2`)).body.status).toBe('queued');
    const next = await api.post(`/v1/sessions/${id}/turns`, { input: 'waits' });
    expect(next.status, JSON.stringify(next.body)).toBe(202);
    expect(next.body.position).toBe(1);
    await drain();
    await runAll();
    const items = (await api.get(`/v1/sessions/${id}/items?limit=100`)).body.items.reverse();
    const inputs = items.filter((item: any) => item.role === 'user').map((item: any) => item.content);
    expect(inputs).toEqual(['first', 'taken up', 'waits']);
    expect((await api.get(`/v1/sessions/${id}/queue`)).body.total).toBe(0);
  });
});

describe('the position an enqueue answers, behind a withdrawn input', () => {
  it('leaves out an input whose withdraw left its tombstone standing', async () => {
    const { store, api, drain, runAll } = setup();
    const id = await api.session({ on_busy: 'enqueue' });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
    const withdrawn = await api.post(`/v1/sessions/${id}/turns`, { input: 'withdrawn' });
    expect(withdrawn.body.position).toBe(1);
    // The withdraw's tombstone lands; its delete fails, so the tombstone stands (until it is stale).
    store.failWhen(({ operation, key }) => operation === 'delete' && key.includes('/queue/'), { times: 1 });
    await api.delete(`/v1/sessions/${id}/queue/${withdrawn.body.queued_turn}`);
    store.heal();
    const tombstones = (await listAll(store.inner, '')).filter((object) => object.key.includes('/queue/'));
    expect(tombstones.map((object) => object.size)).toEqual([0]);
    const next = await api.post(`/v1/sessions/${id}/turns`, { input: 'waits' });
    expect(next.status, JSON.stringify(next.body)).toBe(202);
    expect(next.body.position).toBe(1);
    // The listing shows it next too; its total counts the inputs that run, not the tombstone.
    const listed = (await api.get(`/v1/sessions/${id}/queue`)).body;
    expect(listed).toMatchObject({ queued: [{ queued_turn: next.body.queued_turn, position: 1 }], total: 1 });
    await drain();
    await runAll();
    const items = (await api.get(`/v1/sessions/${id}/items?limit=100`)).body.items.reverse();
    expect(items.filter((item: any) => item.role === 'user').map((item: any) => item.content)).toEqual([
      'first',
      'waits',
    ]);
  });
});

describe('an unkeyed enqueue whose put answer was lost, against the turns around it', () => {
  const entryPut = ({ operation, key, options }: StoreCall) =>
    operation === 'put' && key.includes('/queue/') && options?.onlyIfAbsent === true;

  async function userInputs(api: ReturnType<typeof createClient>, id: string) {
    const items = (await api.get(`/v1/sessions/${id}/items?limit=100`)).body.items.reverse();
    return items.filter((item: any) => item.role === 'user').map((item: any) => item.content);
  }

  it.each([
    ['another turn ran after its turn', 'other'],
    ['a delete took its turn out', 'delete'],
  ] as const)('runs once when its put again lands after a pickup ran it and %s', async (_, then) => {
    // Every read of the entry by the enqueue fails; before the first, turn 1 ends, its close's
    // pickup takes the input up as turn 2, which runs; then another turn runs (or a delete of
    // turn 2 moves the session to a new generation, the old one left in `queued_in`). The put
    // again lands a copy, which a pickup replays under its key's `idem/` (or passes over as
    // taken up before): it does not run again.
    const { store, api, drain, runNext, runAll, logged } = setup();
    const id = await api.session({ on_busy: 'enqueue' });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
    let picking = false;
    store.failWhen(entryPut, { times: 1, after: true });
    store.failWhen(({ operation, key }) => !picking && operation === 'get' && key.includes('/queue/'));
    store.beforeGet = {
      matches: (key) => key.includes('/queue/'),
      run: async () => {
        picking = true;
        await runNext();
        await runNext();
        const between =
          then === 'other'
            ? await api.post(`/v1/sessions/${id}/turns`, { input: 'other' })
            : await api.delete(`/v1/sessions/${id}/turns/2`);
        expect(between.status, JSON.stringify(between.body)).toBe(200);
        picking = false;
      },
    };
    const answer = await api.post(`/v1/sessions/${id}/turns`, { input: 'queued' });
    store.heal();
    expect(answer.status, JSON.stringify(answer.body)).toBe(202);
    expect(answer.body.position).toBeNull();
    expect(logged.some((line) => line.includes('could not be withdrawn: it runs'))).toBe(true);
    await drain();
    await runAll();
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'last' })).status).toBe(200);
    await drain();
    await runAll();
    expect(await userInputs(api, id)).toEqual(
      then === 'other' ? ['first', 'queued', 'other', 'last'] : ['first', 'last'],
    );
    expect((await listAll(store.inner, '')).filter((object) => object.key.includes('/queue/'))).toEqual([]);
  });

  it('answers 202 at position 0 when a pickup marks it between its withdraw read and its tombstone', async () => {
    // The signal keeps failing, so the enqueue withdraws its entry; right before the tombstone's
    // put, turn 1 ends and its close's pickup marks the entry, its claim's record put then
    // failing (it stores nothing). The tombstone is refused; the withdraw reads the mark: the
    // input runs, taken up by the next pickup.
    const { store, api, drain, runNext, runAll } = setup();
    const id = await api.session({ on_busy: 'enqueue' });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
    store.failWhen(signalPut);
    let claiming = false;
    const recordPut = ({ operation, key, options }: StoreCall) =>
      claiming && operation === 'put' && /\/turn\/[^/]+\/\d{12}$/.test(key) && options?.onlyIfAbsent === true;
    store.failWhen(recordPut, { times: 1 });
    store.beforePut = {
      matches: (key, options) => tombstonePut({ operation: 'put', key, index: 0, ...(options ? { options } : {}) }),
      run: async () => {
        claiming = true;
        await runNext();
        claiming = false;
      },
    };
    const answer = await api.post(`/v1/sessions/${id}/turns`, { input: 'queued' });
    store.heal();
    expect(store.beforePut).toBeNull();
    expect(answer.status, JSON.stringify(answer.body)).toBe(202);
    expect(answer.body.position).toBe(0);
    await drain();
    await runAll();
    expect(await userInputs(api, id)).toEqual(['first', 'queued']);
    expect((await listAll(store.inner, '')).filter((object) => object.key.includes('/queue/'))).toEqual([]);
  });
});
