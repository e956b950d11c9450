/**
 * `npm run bench`: every benchmark of the project in one run, written to bench/RESULTS.md and
 * bench/prompt-cache.svg (the cache section, unless --quick, also writes bench/epoch-sweep.svg).
 * Its options (--only=<sections>, --quick, the sizes of some sections, workerd's settings) are
 * bench/options.ts `USAGE`, which `npm run bench -- --help` prints; an argument it does not
 * know prints what is wrong and the usage, and exits 2, before anything runs.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileStore } from '../lib/store/file.ts';
import { fileURLToPath } from 'node:url';
import { machineInfo } from './machine.ts';
import { MemoryTurnDriver } from './memory-driver.ts';
import { measureCacheCosts } from './cache-costs.ts';
import { measureComputerUseStorage, simulateComputerUse } from './computer-use.ts';
import { epochSweepChart } from './epoch-sweep-chart.ts';
import { simulatePromptCache } from './prompt-cache.ts';
import { promptCacheChart } from './prompt-cache-chart.ts';
import { quickCheckFailures } from './quick-check.ts';
import { resultsMarkdown, type BenchResults } from './results-markdown.ts';
import { measureCompactionReads } from './compaction.ts';
import { measureInspector } from './inspector.ts';
import { measureReliability } from './reliability.ts';
import { benchStrategies } from './strategies.ts';
import { heapProbeCommand, measureTurnHeap } from './turn-heap.ts';
import { benchSmallPrompt } from './small-prompt.ts';
import { benchTurnOverhead, type TurnOverheadOptions } from './turn-overhead.ts';
import { measureLatency } from './latency.ts';
import { WorkerdTurnDriver } from './workerd-driver.ts';
import { measureTransfer } from './transfer.ts';
import { measureTracing } from './tracing.ts';
import { measureResume } from './resume.ts';
import { measureAppendLoad, type LoadStore } from './append-load.ts';
import { measureColdTurns } from './cold-turn.ts';
import { measureForks } from './fork.ts';
import { measureFileSmallPrompt } from './file-small-prompt.ts';
import type { Section } from './sections.ts';
import { benchArgumentsExit } from './options.ts';
import { measureRealisticWindow } from './realistic-window.ts';
import { measureWorkerBundle } from './bundle.ts';

const argv = process.argv.slice(2);
const stop = benchArgumentsExit(argv);
if (stop) {
  (stop.code === 0 ? process.stdout : process.stderr).write(stop.text);
  process.exit(stop.code);
}
const onlyArgument = argv.find((argument) => argument.startsWith('--only='));
const only = onlyArgument ? new Set(onlyArgument.slice('--only='.length).split(',')) : undefined;
const quick = argv.includes('--quick');
const budgetArgument = argv.find((argument) => argument.startsWith('--workerd-load-budget='));
const workerdLoadBudgetMs = budgetArgument
  ? Number(budgetArgument.slice('--workerd-load-budget='.length)) * 1000
  : quick
    ? 60_000
    : 240_000;
const full = !only && !quick;
/** Whether a section runs; one that does not is reported as not measured, with why. */
const runs = (section: Section) => {
  const running = !only || only.has(section);
  if (!running) results.notMeasured[section] = `not run: the run had ${onlyArgument}`;
  else results.loadAverages.push({ section, start: loadAverage(), end: '' });
  return running;
};
/** The load average when a section ends, next to the one when it began. */
const ended = (section: Section) => {
  const entry = results.loadAverages.find((candidate) => candidate.section === section);
  if (entry) entry.end = loadAverage();
};
const loadAverage = () =>
  loadavg()
    .map((value) => value.toFixed(2))
    .join(' ');

const log = (line: string) => console.log(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}`);
const sizes = quick ? [100, 1_000] : [100, 1_000, 10_000, 100_000];
const heapItems = quick ? 2_000 : 100_000;
const cacheToolCalls = quick ? 200 : 1_000;
const cacheSeed = 20_261_129;

const overheadCommon: Omit<TurnOverheadOptions, 'measuredTurns' | 'appendBatch' | 'turnEveryAppends'> = {
  sizes,
  warmupTurns: 3,
  seed: 7,
  notices: 2,
  log,
};

/** The memory and file store sections: the turn in this process, loaded in appends of 100. */
const inProcessOverhead: TurnOverheadOptions = {
  ...overheadCommon,
  measuredTurns: (size) => (quick ? 5 : size >= 100_000 ? 15 : 30),
  appendBatch: 100,
  turnEveryAppends: 8,
};

const started = performance.now();
const results: BenchResults & Required<Pick<BenchResults, 'loadAverages' | 'notMeasured'>> = {
  startedAt: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
  durationMs: 0,
  machine: machineInfo(),
  commit: gitCommit(),
  commands: {
    overheadMemory: 'npm run bench -- --only=memory',
    overheadFile: 'npm run bench -- --only=file',
    overheadWorkerd: 'npm run bench -- --only=workerd',
    strategies: 'npm run bench -- --only=strategies',
    cache: 'npm run bench -- --only=cache',
    heap: '',
    compaction: 'npm run bench -- --only=compaction',
    smallPrompt: 'npm run bench -- --only=small-prompt',
  },
  loadAverages: [],
  notMeasured: {},
};
log(`machine: ${JSON.stringify(results.machine)}`);

if (runs('strategies')) {
  log('strategy CPU (bench/strategies.ts)');
  results.strategies = benchStrategies(quick ? { iterations: 5 } : {});
  ended('strategies');
}

if (runs('cache')) {
  log(`prompt-cache simulation: ${cacheToolCalls} tool calls`);
  const cacheRuns = simulatePromptCache({ toolCalls: cacheToolCalls, seed: cacheSeed });
  for (const run of cacheRuns)
    log(
      `  ${run.name}: ${(run.totals.reusableShare * 100).toFixed(1)}% reusable, cost ` +
        `${Math.round(run.totals.costCached)}`,
    );
  const chart = 'prompt-cache.svg';
  if (full)
    writeFileSync(
      new URL(`./${chart}`, import.meta.url),
      promptCacheChart(
        cacheRuns,
        `Prompt-cache stability: ${cacheToolCalls.toLocaleString('en-US')}-tool-call simulated agent session ` +
          `(seed ${cacheSeed})`,
      ),
    );
  const costs = measureCacheCosts({
    toolCalls: cacheToolCalls,
    sweepToolCalls: quick ? 150 : 500,
    seed: cacheSeed,
    log,
  });
  const sweepChart = 'epoch-sweep.svg';
  if (!quick)
    writeFileSync(
      new URL(`./${sweepChart}`, import.meta.url),
      epochSweepChart(
        costs.sweep,
        `Epoch settings: input cost against prompt size, ${costs.sweep.toolCalls} tool calls`,
      ),
    );
  results.cache = {
    runs: cacheRuns,
    toolCalls: cacheToolCalls,
    seed: cacheSeed,
    chart,
    costs: { ...costs, sweepChart },
  };
  ended('cache');
}

if (runs('computer-use')) {
  // The billing runs all 1,000 steps in both modes (CPU only, seconds); the storage run, with
  // its 100-300 KB screenshots, is shorter with --quick.
  const steps = 1_000;
  const storageSteps = quick ? 40 : 1_000;
  const measureEvery = quick ? 10 : 50;
  const seed = 20_261_201;
  log(`computer use: ${steps} steps billed, ${storageSteps} through turns (bench/computer-use.ts)`);
  const billing = simulateComputerUse(steps, seed);
  for (const figure of billing)
    log(`  ${figure.name}: Anthropic reads ${(figure.readShare * 100).toFixed(1)}%, ${figure.cost.toFixed(0)} cost`);
  results.computerUse = {
    steps,
    storageSteps,
    seed,
    measureEvery,
    command: 'npm run bench -- --only=computer-use',
    billing,
    storage: await measureComputerUseStorage(storageSteps, seed, measureEvery, log),
  };
  ended('computer-use');
}

if (runs('memory')) {
  log('per-turn overhead, memory store');
  const driver = new MemoryTurnDriver();
  results.overheadMemory = await benchTurnOverhead(driver, inProcessOverhead);
  await driver.close();
  ended('memory');
}

if (runs('file')) {
  log('per-turn overhead, file store (lib/store/file.ts in a temporary directory)');
  const root = mkdtempSync(join(tmpdir(), 'tailgate-bench-'));
  const driver = new MemoryTurnDriver(new FileStore(root));
  results.overheadFile = await benchTurnOverhead(driver, inProcessOverhead);
  await driver.close();
  rmSync(root, { recursive: true, force: true });
  ended('file');
}

if (runs('latency')) {
  const options = { delayMs: 25, modelMs: 200 };
  log(`round trips: every storage call ${options.delayMs} ms slower (bench/latency.ts)`);
  const rows = await measureLatency({
    ...options,
    sizes: quick ? [100, 1_000] : [100, 10_000, 100_000],
    turns: quick ? 4 : 10,
    seed: 11,
    log,
  });
  results.latency = { rows, ...options };
  ended('latency');
}

if (runs('small-prompt')) {
  log('bytes read per turn against the prompt, small prompt and long history (bench/small-prompt.ts)');
  results.smallPrompt = await benchSmallPrompt({
    sizes: quick ? [100, 10_000] : [100, 10_000, 100_000, 1_000_000],
    measuredTurns: quick ? 3 : 8,
    warmupTurns: 2,
    seed: 11,
    packEvery: 4,
    latency: { delayMs: 25, modelMs: 200, turns: quick ? 4 : 10 },
    log,
  });
  ended('small-prompt');
}

if (runs('heap')) {
  const options = { items: heapItems, seed: 7, turns: quick ? 2 : 5 };
  results.commands.heap = heapProbeCommand(options);
  log(`peak heap of a turn, ${heapItems} items (child process)`);
  results.heap = { result: await measureTurnHeap(options), command: results.commands.heap };
  ended('heap');
}

if (runs('compaction')) {
  log('bytes read per turn after compaction (bench/compaction.ts)');
  results.compaction = await measureCompactionReads(quick ? [50, 200] : [200, 2_000]);
  ended('compaction');
}

if (runs('workerd')) {
  log('per-turn overhead, workerd + local R2');
  let driver: WorkerdTurnDriver | undefined;
  try {
    const logArgument = argv.find((argument) => argument.startsWith('--workerd-log='));
    driver = await WorkerdTurnDriver.start(
      logArgument ? { logLevel: logArgument.slice('--workerd-log='.length) as 'debug' } : {},
    );
    results.overheadWorkerd = await benchTurnOverhead(driver, {
      ...overheadCommon,
      measuredTurns: (size) => (quick ? 5 : size >= 100_000 ? 8 : size >= 10_000 ? 12 : 20),
      appendBatch: 250,
      turnEveryAppends: 8,
      loadBudgetMs: workerdLoadBudgetMs,
    });
  } catch (error) {
    results.workerdError = error instanceof Error ? error.message : String(error);
    results.notMeasured.workerd = `the workerd run failed: ${results.workerdError.slice(0, 300)}`;
    log(`workerd failed: ${results.workerdError}`);
  } finally {
    await driver?.close();
  }
  ended('workerd');
}

if (runs('reliability')) {
  log('reliability: crash and race simulation, kill -9 recovery (bench/reliability.ts)');
  // --quick waits out a 6 s lease (test/runtimes/crash-recovery.test.ts's) instead of the default 30 s.
  results.reliability = await measureReliability({
    interleavings: quick ? 100 : 2_000,
    ...(quick ? { leaseMs: 6000 } : {}),
    log,
  });
  ended('reliability');
}

if (runs('inspector')) {
  log('inspector reads against the length of the history (bench/inspector.ts)');
  results.inspector = await measureInspector({
    sizes: quick ? [100, 2_000] : [100, 100_000],
    sessions: quick ? 100 : 1_000,
    repetitions: quick ? 5 : 21,
    log,
  });
  ended('inspector');
}

if (runs('transfer')) {
  log('export and import of a long session (bench/transfer.ts, child process)');
  results.transfer = await measureTransfer(
    quick ? { items: 5_000, loadItems: 2_000, seed: 5 } : { items: 1_000_000, loadItems: 100_000, seed: 5 },
  );
  ended('transfer');
}

if (runs('tracing')) {
  log('turns with tracing off and on (bench/tracing.ts)');
  results.tracing = await measureTracing({
    size: quick ? 1_000 : 10_000,
    turns: quick ? 10 : 60,
    warmupTurns: 3,
    seed: 13,
    log,
  });
  ended('tracing');
}

if (runs('resume')) {
  log('resumed streams: reader lag and journal writes (bench/resume.ts)');
  results.resume = await measureResume({
    ...(quick ? { seconds: 2, readers: 4 } : { seconds: 10, readers: 20 }),
    gapMs: 50,
    delayMs: 25,
    seed: 13,
    log,
  });
  ended('resume');
}

if (runs('append-load')) {
  const itemsArgument = argv.find((argument) => argument.startsWith('--append-items='));
  const items = itemsArgument ? Number(itemsArgument.slice('--append-items='.length)) : quick ? 5_000 : 100_000;
  results.appendLoad = [];
  // S3 runs fauxqs, which needs node:sqlite (Node 22.5 and later).
  const available: LoadStore[] = [
    'memory',
    'file',
    ...(process.getBuiltinModule?.('node:sqlite') ? ['s3' as const] : []),
  ];
  // `--append-stores=file` (or a comma-separated list): those stores alone, to compare one store's rate.
  const storesArgument = argv.find((argument) => argument.startsWith('--append-stores='));
  const chosen = storesArgument?.slice('--append-stores='.length).split(',');
  const stores = chosen ? available.filter((store) => chosen.includes(store)) : available;
  for (const store of stores) {
    log(`append load: ${items} items through POST /items, ${store} store (bench/append-load.ts, child process)`);
    results.appendLoad.push(await measureAppendLoad({ store, items, batch: 250, seed: 3 }));
  }
  ended('append-load');
}

if (runs('fork')) {
  log('forks of a long session at its end and at a packed point (bench/fork.ts)');
  results.fork = await measureForks({ items: quick ? 2_000 : 10_000, seed: 9, log });
  ended('fork');
}

if (runs('file-small-prompt')) {
  log('the small-prompt turn on the file store and the memory store (bench/file-small-prompt.ts)');
  results.fileSmallPrompt = await measureFileSmallPrompt({
    sizes: quick ? [100, 1_000] : [100, 10_000, 100_000],
    rounds: quick ? 1 : 12,
    turnsPerRound: quick ? 2 : 4,
    seed: 11,
    log,
  });
  ended('file-small-prompt');
}

if (runs('cold-turn')) {
  const sizesArgument = argv.find((argument) => argument.startsWith('--cold-sizes='));
  const sizes = sizesArgument
    ? sizesArgument.slice('--cold-sizes='.length).split(',').map(Number)
    : quick
      ? [100, 2_000]
      : [100, 10_000, 100_000];
  log(`cold first turns after a fast load at ${sizes.join(', ')} items (bench/cold-turn.ts)`);
  results.coldTurn = await measureColdTurns({ sizes, coldTurns: 5, warmupTurns: 4, warmTurns: 9, seed: 3, log });
  ended('cold-turn');
}

if (runs('realistic-window')) {
  const contextLimit = 200_000;
  const windowItems = argv.find((argument) => argument.startsWith('--window-items='))?.slice('--window-items='.length);
  log(`realistic window: context_limit ${contextLimit} on long sessions (bench/realistic-window.ts)`);
  const rows = await measureRealisticWindow({
    sizes: windowItems ? windowItems.split(',').map(Number) : quick ? [100, 5_000] : [100, 100_000, 1_000_000],
    contextLimit,
    warmupTurns: 2,
    measuredTurns: quick ? 4 : 12,
    seed: 17,
    loadBudgetMs: quick ? 60_000 : 900_000,
    log,
  });
  results.realisticWindow = { rows, contextLimit };
  ended('realistic-window');
}

if (runs('bundle')) {
  log('the Worker bundle, built as CI builds it (bench/bundle.ts)');
  results.bundle = measureWorkerBundle(log);
  log(`  ${(results.bundle.gzippedBytes / 1024).toFixed(1)} KiB gzipped`);
  ended('bundle');
}

results.durationMs = performance.now() - started;
const markdown = resultsMarkdown(results);
if (full) {
  writeFileSync(new URL('./RESULTS.md', import.meta.url), markdown);
  log(`wrote bench/RESULTS.md and bench/prompt-cache.svg in ${(results.durationMs / 1000).toFixed(0)} s`);
} else {
  console.log(markdown);
}
if (quick) {
  const failures = quickCheckFailures(results);
  for (const failure of failures) console.error(`bench --quick FAILED: ${failure}`);
  if (failures.length > 0) process.exitCode = 1;
  else log('bench --quick: every section that ran has sound figures');
}

/** HEAD, and whether the code it measures (lib/, functions/, wrangler.toml, bench/) differed from it. */
function gitCommit(): string {
  try {
    const root = fileURLToPath(new URL('..', import.meta.url));
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
    const paths = ['lib/', 'functions/', 'wrangler.toml', 'bench/'];
    const changed = execFileSync('git', ['status', '--porcelain', '--', ...paths], { cwd: root, encoding: 'utf8' })
      .split('\n')
      .filter(
        (line) =>
          line.trim() !== '' &&
          !line.endsWith('bench/RESULTS.md') &&
          !line.endsWith('bench/prompt-cache.svg') &&
          !line.endsWith('bench/epoch-sweep.svg'),
      );
    const where = paths.filter((path) => changed.some((line) => line.slice(3).startsWith(path)));
    return where.length > 0
      ? `${commit} (HEAD, with uncommitted changes in ${where.join(', ')})`
      : `${commit} (HEAD, no uncommitted changes in ${paths.join(', ')})`;
  } catch {
    return 'unknown';
  }
}
