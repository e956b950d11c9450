/**
 * Loading a long history through `POST /v1/sessions/:id/items` (`npm run bench --
 * --only=append-load`, size with `--append-items=<n>`): batches of 250 agent-like items sent
 * one after another to the app of functions/app.ts, its background packing running as it runs
 * on Node (after each response, untracked). One child process per store (this file, invoked
 * directly; its own RSS): memory, the file store in a temporary directory, and S3 through
 * fauxqs behind the conditional gateway of test/support/s3-store.ts, both in a process of their
 * own (bench/bucket-process.ts), so that the child's RSS is the server's and the bucket's is
 * measured apart (the memory store's stored bytes count in the child's RSS). Prints one JSON line
 * (AppendLoadFigures) on stdout. Invoked by hand, it runs with the flags and environment it is
 * given: to measure as the bench does, run the `command` its figures print (appendLoadCommand,
 * the server's memory settings); without them the file store's peak at 1,000,000 items is about
 * a fifth higher.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createApp } from '../functions/app.ts';
import type { Item } from '../lib/items.ts';
import { FileStore } from '../lib/store/file.ts';
import { MemoryStore } from '../lib/store/memory.ts';
import { type Body, listAll, type ObjectStore } from '../lib/store/object-store.ts';
import { CountingStore } from '../test/support/counting-store.ts';
import { agentItems, type AgentSessionOptions } from './agent-session.ts';
import { startBucketProcess } from './bucket-process.ts';
import { peakRssKiB, runChildProbe } from './child-probe.ts';
import { median } from './stats.ts';

export type LoadStore = 'memory' | 'file' | 's3';

export interface AppendLoadOptions {
  store: LoadStore;
  items: number;
  batch: number;
  seed: number;
}

export interface AppendLoadFigures extends AppendLoadOptions {
  command: string;
  seconds: number;
  itemsPerSecond: number;
  /** Items per second over each tenth of the load, in order (steady: about equal). */
  tenths: number[];
  /** Storage calls per append (the background packing's included) over each tenth of the load. */
  opsPerAppend: number[];
  /** Of them, over the last tenth: gets, puts and deletes of repeat-index shards per append. */
  shardOpsPerAppend: { get: number; put: number; delete: number };
  /** The child's peak resident set size: the server's (for S3 the bucket runs in a process of its own). */
  peakRssMiB: number;
  /** S3 only: the peak resident set size of the bucket's process (fauxqs and the gateway); null for the others. */
  bucketPeakRssMiB: number | null;
  /** The bytes the store holds after the last append (all of them in the child's memory for memory). */
  storedMiB: number;
  /**
   * Memory only: the largest RSS less the bytes the store held, sampled after each tenth of the
   * load (what the process holds beside the stored bytes; null for the other stores).
   */
  rssLessStoredMiB: number | null;
  /** Right after the last append's answer: records no segment covers, and records after the newest view. */
  debtRecords: number;
  recordsAfterView: number;
  records: number;
  segments: number;
  largestSegmentBytes: number;
}

/** Lighter items than the turn benches' (outputs of 100 B to 2 KB): 100,000 of them in about 70 MB. */
const ITEM_SIZES: Omit<AgentSessionOptions, 'seed'> = {
  outputBytes: [100, 2_000],
  argumentBytes: [20, 200],
  messageBytes: [50, 500],
};
/** The app's environment in the bench: the echo model, a bench token. */
export const ENVIRONMENT = { API_TOKEN: 'bench', DEFAULT_MODEL: 'echo' };

/**
 * How the Node server runs (package.json `start:node`), so that the child measures the memory the
 * server would hold (bench/FINDINGS.md, "Peak RSS of the POST /items load"):
 * - its old generation capped at 1 GiB: V8 then lets it grow to at most 1.6 times what the last
 *   full collection kept before the next one, where under the default cap (a quarter of the
 *   machine's memory, up to 4 GiB) it lets it grow 4 times, and a long history's load leaves 100
 *   to 200 MiB of dead large arrays and strings in it meanwhile;
 * - glibc's mmap threshold fixed at 128 KiB: a body built or read and freed (records, views,
 *   chunks of 1 to 40 MiB) goes back to the system at once, where glibc would raise the threshold
 *   to the largest such body freed and serve the next ones from its heap, which then keeps their
 *   pages (other C libraries ignore the variable).
 */
export const SERVER_NODE_FLAGS = ['--max-old-space-size=1024'];
export const SERVER_ENV = { MALLOC_MMAP_THRESHOLD_: '131072' };

export function appendLoadCommand(options: AppendLoadOptions): string {
  const env = Object.entries(SERVER_ENV).map(([name, value]) => `${name}=${value} `);
  const flags = SERVER_NODE_FLAGS.join(' ');
  return `${env.join('')}node ${flags} --import tsx bench/append-load.ts '${JSON.stringify(options)}'`;
}

/** Runs the probe for `options.store` in a child process and returns its figures. */
export function measureAppendLoad(options: AppendLoadOptions): Promise<AppendLoadFigures> {
  return runChildProbe(fileURLToPath(import.meta.url), SERVER_NODE_FLAGS, options, SERVER_ENV);
}

/** Markdown of the figures, one row per store (the same size each). */
export function appendLoadSection(rows: AppendLoadFigures[] | undefined, notMeasured: string): string[] {
  const title = '## 11. Loading a long history through POST /items';
  if (!rows || rows.length === 0) return [title, '', `${notMeasured}.`, ''];
  const number = (value: number) => Math.round(value).toLocaleString('en-US');
  return [
    title,
    '',
    `Command: \`npm run bench -- --only=append-load --append-items=${rows[0]!.items}\` (bench/append-load.ts; ` +
      `one child per store, each \`${rows[0]!.command.replace(/'.*'/, "'<options>'")}\`). Batches of ` +
      `${rows[0]!.batch} agent-like items (outputs of 100 B to 2 KB) sent one after another through the app, its ` +
      'background packing running as on Node. Debt: right after the last answer, records no segment covers, ' +
      "and records after the newest view. Peak RSS is the child's, the server's (the stored bytes included for " +
      'memory; for S3 fauxqs and the test gateway run in a process of their own, its peak in brackets); ' +
      'stored: the bytes the store holds at the end; for memory, beside it the largest RSS less the bytes stored ' +
      'then, sampled after each tenth of the load.',
    '',
    '| store | items | s | items/s | items/s by tenth of the load | storage calls per append by tenth | ' +
      'shard get / put / delete per append, last tenth | peak RSS | stored / RSS less stored | ' +
      'debt: records / after view | records / segments | largest segment |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows.map(
      ({ shardOpsPerAppend: shards, ...row }) =>
        `| ${row.store} | ${number(row.items)} | ${row.seconds.toFixed(1)} | ${number(row.itemsPerSecond)} | ` +
        `${row.tenths.map(number).join(', ')} | ${row.opsPerAppend.map((ops) => ops.toFixed(1)).join(', ')} | ` +
        `${[shards.get, shards.put, shards.delete].map((ops) => ops.toFixed(1)).join(' / ')} | ` +
        `${row.peakRssMiB.toFixed(0)} MiB` +
        `${row.bucketPeakRssMiB == null ? '' : ` (bucket ${row.bucketPeakRssMiB.toFixed(0)} MiB)`} | ` +
        `${row.storedMiB.toFixed(0)} MiB / ` +
        `${row.rssLessStoredMiB === null ? '-' : `${row.rssLessStoredMiB.toFixed(0)} MiB`} | ` +
        `${row.debtRecords} / ${row.recordsAfterView} | ${row.records} / ${row.segments} | ` +
        `${(row.largestSegmentBytes / 2 ** 20).toFixed(2)} MiB |`,
    ),
    '',
  ];
}

/** The goals of the load (issue: packing keeps up with any append rate). */
const ITEMS_PER_SECOND_GOAL = 20_000;
const PEAK_RSS_GOAL_MIB = 512;
const DEBT_GOAL_RECORDS = 32;
/** Steady: the last tenth of the load at least this share of the median tenth. */
const STEADY_SHARE = 0.8;

/** The rows of "Goals at a glance" the load measures (the rate's goal is for memory and the file store). */
export function appendLoadGoalRows(
  rows: AppendLoadFigures[] | undefined,
): { goal: string; target: string; measured: string; met: boolean }[] {
  if (!rows || rows.length === 0) return [];
  const number = (value: number) => Math.round(value).toLocaleString('en-US');
  const size = number(rows[0]!.items);
  const steadiness = (row: AppendLoadFigures) => row.tenths.at(-1)! / median(row.tenths);
  const rated = rows.filter((row) => row.store !== 's3');
  return [
    {
      goal:
        `Items/s through POST /items in batches of ${rows[0]!.batch} to ${size} items, memory and file store, ` +
        'steady as the history grows',
      target: `>= ${number(ITEMS_PER_SECOND_GOAL)}, last tenth >= ${STEADY_SHARE} x the median tenth`,
      measured: rows
        .map((row) => `${row.store} ${number(row.itemsPerSecond)} (last tenth ${steadiness(row).toFixed(2)} x)`)
        .join(', '),
      met: rated.every((row) => row.itemsPerSecond >= ITEMS_PER_SECOND_GOAL && steadiness(row) >= STEADY_SHARE),
    },
    {
      goal: `Peak RSS of the POST /items load to ${size} items (memory holds the stored bytes; S3's bucket runs apart)`,
      target: `< ${PEAK_RSS_GOAL_MIB} MiB`,
      measured: rows.map((row) => `${row.store} ${number(row.peakRssMiB)} MiB`).join(', '),
      met: rows.every((row) => row.peakRssMiB < PEAK_RSS_GOAL_MIB),
    },
    {
      goal: 'Pack debt right after the last append (records no segment covers)',
      target: `<= ${DEBT_GOAL_RECORDS}`,
      measured: rows.map((row) => `${row.store} ${row.debtRecords}`).join(', '),
      met: rows.every((row) => row.debtRecords <= DEBT_GOAL_RECORDS),
    },
  ];
}

interface OpenStore {
  store: ObjectStore;
  /** Removes what the store left; for S3 ends the bucket's process and gives its peak RSS in MiB. */
  close: () => Promise<number | null>;
}

async function openStore(kind: LoadStore): Promise<OpenStore> {
  if (kind === 'memory') return { store: new MemoryStore(), close: async () => null };
  if (kind === 'file') {
    const root = mkdtempSync(join(tmpdir(), 'tailgate-append-load-'));
    const close = async () => {
      rmSync(root, { recursive: true, force: true });
      return null;
    };
    return { store: new FileStore(root), close };
  }
  // Imported only here: the AWS SDK stays out of the memory and file stores' RSS.
  const { createTestS3Store } = await import('../test/support/s3-store.ts');
  const bucket = await startBucketProcess('bench');
  return { store: createTestS3Store(bucket.endpoint, bucket.bucket), close: bucket.stop };
}

/**
 * POSTs JSON to the app of functions/app.ts as the bench's client (its token), with the
 * Workers-style execution `context` when given; an answer that is not 2xx throws. Each call
 * returns on a later turn of the event loop, as a client's next request over a socket arrives:
 * the work an answer leaves on a timer (lib/turn/append.ts `afterResponse`: packing, the index
 * entry) runs between requests. Without it, on the memory store (whose calls settle as
 * microtasks) a loop of requests never reached a timer, and none of that work ran during a load.
 */
export function appPoster(app: ReturnType<typeof createApp>, context?: unknown) {
  return async (path: string, body: unknown): Promise<Response> => {
    const response = await app.request(
      path,
      {
        method: 'POST',
        headers: { authorization: `Bearer ${ENVIRONMENT.API_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      },
      ENVIRONMENT,
      context as never,
    );
    if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
    await new Promise((resolve) => setTimeout(resolve, 0));
    return response;
  };
}

/** Counts storage calls, and apart the repeat index's shards (`keys/`) among them. */
class LoadCounter extends CountingStore {
  shards = { get: 0, put: 0, delete: 0 };

  override get(key: string, options?: Parameters<ObjectStore['get']>[1]) {
    if (key.includes('/keys/')) this.shards.get += 1;
    return super.get(key, options);
  }

  override put(key: string, body: Body, options?: Parameters<ObjectStore['put']>[2]) {
    if (key.includes('/keys/')) this.shards.put += 1;
    return super.put(key, body, options);
  }

  override delete(keys: string | string[]) {
    if ([keys].flat().some((key) => key.includes('/keys/'))) this.shards.delete += 1;
    return super.delete(keys);
  }
}

async function probe(options: AppendLoadOptions): Promise<AppendLoadFigures> {
  const { store: inner, close } = await openStore(options.store);
  try {
    return await load(options, inner, close);
  } finally {
    // Again on failure (a second close is harmless): no bucket process outlives the probe.
    await close();
  }
}

async function load(
  options: AppendLoadOptions,
  inner: ObjectStore,
  close: OpenStore['close'],
): Promise<AppendLoadFigures> {
  const store = new LoadCounter(inner);
  const app = createApp({ store: () => store, readEnvironment: () => ENVIRONMENT, log: (line) => console.error(line) });
  const call = appPoster(app);
  await call('/v1/sessions', { id: 'load' });
  const source = agentItems({ seed: options.seed, ...ITEM_SIZES });
  const tenth = options.items / 10;
  const tenths: number[] = [];
  const opsPerAppend: number[] = [];
  let shardOpsPerAppend = { get: 0, put: 0, delete: 0 };
  let rssLessStored: number | null = null;
  const started = performance.now();
  let tenthStarted = started;
  let tenthItems = 0;
  let tenthAppends = 0;
  for (let stored = 0; stored < options.items; ) {
    const items: Item[] = [];
    while (items.length < Math.min(options.batch, options.items - stored) || items.at(-1)?.type === 'function_call')
      items.push(source.next().value as Item);
    await call('/v1/sessions/load/items', { items });
    stored += items.length;
    tenthItems += items.length;
    tenthAppends += 1;
    if (tenthItems >= tenth || stored >= options.items) {
      const now = performance.now();
      tenths.push(Math.round(tenthItems / ((now - tenthStarted) / 1000)));
      opsPerAppend.push(store.operations / tenthAppends);
      const { get, put, delete: deletes } = store.shards;
      shardOpsPerAppend = { get: get / tenthAppends, put: put / tenthAppends, delete: deletes / tenthAppends };
      store.reset();
      store.shards = { get: 0, put: 0, delete: 0 };
      if (options.store === 'memory') {
        const outside = process.memoryUsage().rss - (await storedBytes(inner));
        rssLessStored = Math.max(rssLessStored ?? 0, outside);
      }
      tenthStarted = performance.now();
      tenthItems = 0;
      tenthAppends = 0;
    }
  }
  const seconds = (performance.now() - started) / 1000;
  const debt = await debtOf(store);
  const stored = await storedBytes(inner);
  const bucketPeak = await close();
  return {
    ...options,
    command: appendLoadCommand(options),
    seconds,
    itemsPerSecond: Math.round(options.items / seconds),
    tenths,
    opsPerAppend,
    shardOpsPerAppend,
    peakRssMiB: peakRssKiB() / 1024,
    bucketPeakRssMiB: bucketPeak,
    storedMiB: stored / 2 ** 20,
    rssLessStoredMiB: rssLessStored === null ? null : rssLessStored / 2 ** 20,
    ...debt,
  };
}

/** The bytes of every object in `store`. */
async function storedBytes(store: ObjectStore): Promise<number> {
  return (await listAll(store, '')).reduce((sum, object) => sum + object.size, 0);
}

/** What packing owes, from a listing of the session's records. */
async function debtOf(store: ObjectStore) {
  const objects = await listAll(store, 'sessions/load/turn/');
  const numberOf = (key: string) => 1e12 - Number(/\/(\d{12})[^/]*$/.exec(key)?.[1] ?? 1e12);
  const records = objects.filter((object) => /\/\d{12}$/.test(object.key));
  const newest = Math.max(0, ...records.map((object) => numberOf(object.key)));
  const views = objects.filter((object) => object.key.endsWith('.view')).map((object) => numberOf(object.key));
  const segments = objects.filter((object) => object.key.endsWith('.seg'));
  return {
    debtRecords: records.filter((object) => object.size > 0).length,
    recordsAfterView: newest - Math.max(0, ...views),
    records: newest,
    segments: segments.length,
    largestSegmentBytes: Math.max(0, ...segments.map((object) => object.size)),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const figures = await probe(JSON.parse(process.argv[2] ?? '{}') as AppendLoadOptions);
  console.log(JSON.stringify(figures));
  process.exit(0);
}
