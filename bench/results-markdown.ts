import { DEFAULTS } from '../lib/defaults.ts';
import { smallPromptMarkdown, type SmallPromptRow } from './small-prompt.ts';
import type { CompactionReadFigure } from './compaction.ts';
import { inspectorSection, type InspectorFigures } from './inspector.ts';
import { transferCauses, transferGoalRow, transferSection, type TransferFigures } from './transfer.ts';
import { resumeSection, type ResumeFigures } from './resume.ts';
import { appendLoadGoalRows, appendLoadSection, type AppendLoadFigures } from './append-load.ts';
import { coldTurnCauses, coldTurnGoalRows, coldTurnSection, type ColdTurnRow } from './cold-turn.ts';
import { forkSection, type ForkFigures } from './fork.ts';
import { fileSmallPromptGoalRow, fileSmallPromptSection, type FileSmallPromptFigures } from './file-small-prompt.ts';
import { realisticWindowGoals, realisticWindowSection, type RealisticWindowRow } from './realistic-window.ts';
import type { StrategyBenchFigure } from './strategies.ts';
import type { ReliabilityFigures } from './reliability.ts';
import type { MachineInfo } from './machine.ts';
import type { HeapProbeResult } from './memory-probe.ts';
import { anthropicReadGoal, cacheCostsMarkdown, type CacheCosts } from './cache-costs.ts';
import { computerUseGoalRows, computerUseSection, type ComputerUseFigures } from './computer-use.ts';
import { cachedCost, CACHE_READ_MULTIPLIER, CACHE_WRITE_MULTIPLIER, type CacheRun } from './prompt-cache.ts';
import { formatBytes } from './prompt-cache-chart.ts';
import { median } from './stats.ts';
import type { TurnOverheadRow } from './turn-overhead.ts';
import type { LatencyRow } from './latency.ts';
import { tracingGoalRow, tracingSection, type TracingFigures } from './tracing.ts';
import { BUNDLE_GOAL_KIB, bundleGoalRow, bundleSection, type BundleFigures } from './bundle.ts';

/** Everything one `npm run bench` measured, for RESULTS.md. */
export interface BenchResults {
  startedAt: string;
  durationMs: number;
  machine: MachineInfo;
  commit: string;
  /** The command that produced each section. */
  commands: {
    overheadMemory: string;
    overheadFile?: string;
    overheadWorkerd: string;
    strategies: string;
    cache: string;
    heap: string;
    compaction: string;
    smallPrompt?: string;
  };
  overheadMemory?: TurnOverheadRow[];
  overheadFile?: TurnOverheadRow[];
  overheadWorkerd?: TurnOverheadRow[];
  workerdError?: string;
  strategies?: StrategyBenchFigure[];
  cache?: { runs: CacheRun[]; toolCalls: number; seed: number; chart: string; costs?: CacheCosts };
  computerUse?: ComputerUseFigures;
  heap?: { result: HeapProbeResult; command: string };
  compaction?: CompactionReadFigure[];
  latency?: { rows: LatencyRow[]; delayMs: number; modelMs: number };
  smallPrompt?: SmallPromptRow[];
  reliability?: ReliabilityFigures;
  inspector?: InspectorFigures;
  transfer?: TransferFigures;
  tracing?: TracingFigures;
  resume?: ResumeFigures;
  appendLoad?: AppendLoadFigures[];
  fileSmallPrompt?: FileSmallPromptFigures;
  coldTurn?: ColdTurnRow[];
  fork?: ForkFigures;
  realisticWindow?: { rows: RealisticWindowRow[]; contextLimit: number };
  bundle?: BundleFigures;
  /** os.loadavg() (1, 5, 15 minutes) when each section began and ended. */
  loadAverages?: { section: string; start: string; end: string }[];
  /** Why a section (strategies, cache, memory, heap, compaction, workerd, reliability, inspector) has no figures. */
  notMeasured?: Partial<Record<string, string>>;
}

/** `not measured (why)` for a section without figures. */
function notMeasured(results: BenchResults, section: string): string {
  return `not measured (${results.notMeasured?.[section] ?? 'not run'})`;
}

const OPERATIONS_GOAL = 8;
const RATIO_GOAL = 1.5;
const STRATEGY_GOAL_MS = 5;
const REUSABLE_GOAL = 0.9;
const HEAP_GOAL = 64 * 2 ** 20;

/** RESULTS.md: every figure next to the command that produced it, goals checked, misses explained. */
export function resultsMarkdown(results: BenchResults): string {
  const lines: string[] = [];
  const { machine } = results;
  lines.push('# tailgate benchmark results', '');
  lines.push(
    `Produced by \`npm run bench\` (bench/run.ts) on ${results.startedAt} at commit ${results.commit}, in ` +
      `${(results.durationMs / 1000).toFixed(0)} s. ` +
      'Each section names the command that reproduces it alone. This file is written whole by each full run; ' +
      'what a change measured side by side with the code before it, and why a missed goal is missed, are kept ' +
      'by hand in bench/FINDINGS.md.',
    '',
  );
  lines.push('## Machine', '');
  lines.push(
    `- \`nproc\`: ${machine.cores} cores; CPU (\`/proc/cpuinfo\`): ${machine.cpuModel}; ${machine.memoryGiB} GiB ` +
      `RAM; ${machine.platform}`,
  );
  lines.push(`- \`node --version\`: ${machine.node}; load average at start: ${machine.loadAverage}`);
  lines.push(
    '- A shared, noisy machine: 2 cores used by several processes at once. Absolute times wander from run to run; ' +
      'medians and ratios taken within the same run are the figures to read.',
    '',
  );
  if (results.loadAverages && results.loadAverages.length > 0) {
    lines.push(
      'Load average (`os.loadavg()`: 1, 5 and 15 minutes) when each section began and ended:',
      '',
      '| Section | At start | At end |',
      '|---|---|---|',
    );
    for (const entry of results.loadAverages) lines.push(`| ${entry.section} | ${entry.start} | ${entry.end || '-'} |`);
    lines.push('');
  }

  lines.push('## Goals at a glance', '');
  lines.push('| Goal | Target | Measured | Met |', '|---|---|---|---|');
  for (const row of goalRows(results)) lines.push(`| ${row.goal} | ${row.target} | ${row.measured} | ${row.met} |`);
  lines.push('');

  lines.push(...overheadSection(results));
  lines.push(...latencySection(results));
  lines.push(...strategySection(results));
  lines.push(...cacheSection(results));
  lines.push(...computerUseSection(results.computerUse, capitalized(notMeasured(results, 'computer-use'))));
  lines.push(...heapSection(results));
  lines.push(...compactionSection(results));
  lines.push(
    ...smallPromptMarkdown(
      results.smallPrompt,
      results.commands.smallPrompt ?? 'npm run bench -- --only=small-prompt',
      capitalized(notMeasured(results, 'small-prompt')),
    ),
  );
  lines.push(...reliabilitySection(results));
  lines.push(...inspectorSection(results.inspector, capitalized(notMeasured(results, 'inspector'))));
  lines.push(...transferSection(results.transfer, capitalized(notMeasured(results, 'transfer'))));
  lines.push(...tracingSection(results.tracing, capitalized(notMeasured(results, 'tracing'))));
  lines.push(...resumeSection(results.resume, capitalized(notMeasured(results, 'resume'))));
  lines.push(...appendLoadSection(results.appendLoad, capitalized(notMeasured(results, 'append-load'))));
  lines.push(
    ...fileSmallPromptSection(results.fileSmallPrompt, capitalized(notMeasured(results, 'file-small-prompt'))),
  );
  lines.push(...coldTurnSection(results.coldTurn, capitalized(notMeasured(results, 'cold-turn'))));
  lines.push(...forkSection(results.fork, capitalized(notMeasured(results, 'fork'))));
  lines.push(
    ...realisticWindowSection(
      results.realisticWindow?.rows,
      results.realisticWindow?.contextLimit ?? 200_000,
      results.loadAverages?.find((entry) => entry.section === 'realistic-window'),
      capitalized(notMeasured(results, 'realistic-window')),
    ),
  );
  lines.push(...bundleSection(results.bundle, capitalized(notMeasured(results, 'bundle'))));
  lines.push(...causesSection(results));
  return `${lines.join('\n')}\n`;
}

interface GoalRow {
  goal: string;
  target: string;
  measured: string;
  met: string;
}

/** Round trips on a turn's critical path, with every storage call made slower. */
function latencySection(results: BenchResults): string[] {
  const lines = [
    '## Storage round trips on the critical path',
    '',
    'Command: `npm run bench -- --only=latency` (bench/latency.ts)',
    '',
  ];
  const figures = results.latency;
  if (!figures) return [...lines, `${capitalized(notMeasured(results, 'latency'))}.`, ''];
  const { delayMs } = figures;
  lines.push(
    `Every storage call takes ${delayMs} ms more (a DepthStore over the memory store), ` +
      `the echo model answers after ${figures.modelMs} ms. ` +
      'Medians over the turns (every other one streamed); then one turn delivering 3 notices. ' +
      `Depth in time is ms / ${delayMs}; counted is the deepest storage call done when the model was called, ` +
      'and the rounds started after its last token. ' +
      'Goals: at most 2 before the model, 1 after.',
    '',
    '| items | turns | before model ms (depth) | counted | after last token ms (depth) | counted | ' +
      'to turn.started ms | notice turn: before ms / counted | after ms / counted |',
    '|---|---|---|---|---|---|---|---|---|',
  );
  const depth = (ms: number) => (ms / delayMs).toFixed(1);
  for (const row of figures.rows) {
    const n = row.notices;
    lines.push(
      `| ${row.size.toLocaleString('en-US')} | ${row.turns} | ` +
        `${row.beforeModelMs.toFixed(0)} (${depth(row.beforeModelMs)}) | ${row.depthBeforeModel} | ` +
        `${row.afterModelMs.toFixed(0)} (${depth(row.afterModelMs)}) | ${row.depthAfterModel} | ` +
        `${row.startedMs.toFixed(0)} | ` +
        `${n.beforeModelMs.toFixed(0)} / ${n.depthBeforeModel} | ${n.afterModelMs.toFixed(0)} / ${n.depthAfterModel} |`,
    );
  }
  lines.push('');
  return lines;
}

/** Section 6: what the crash and race simulation checked, and recovery after kill -9. */
function reliabilitySection(results: BenchResults): string[] {
  const figures = results.reliability;
  if (!figures)
    return [
      '## 6. Reliability: crashes, races and recovery',
      '',
      `${capitalized(notMeasured(results, 'reliability'))}.`,
      '',
    ];
  const { simulation, recovery, cancelled } = figures;
  const points = Object.values(simulation.crashPoints).reduce((sum, count) => sum + count, 0);
  const lines = [
    '## 6. Reliability: crashes, races and recovery',
    '',
    `Command: \`${figures.command}\` (bench/reliability.ts)`,
    '',
  ];
  lines.push(
    `The protocol simulation (test/session/protocol-simulation.test.ts, ${simulation.seconds.toFixed(0)} s) ` +
      `crashed each operation at every storage call it makes, ` +
      `once before the call and once after it landed with its answer lost: ${points} crash scenarios, each ` +
      `followed by a restart, the client's retry and a new turn.`,
    '',
    '| Operation | Crash scenarios |',
    '|---|---|',
  );
  for (const [operation, count] of Object.entries(simulation.crashPoints)) lines.push(`| ${operation} | ${count} |`);
  const actors = Object.entries(simulation.actors)
    .map(([count, runs]) => `${runs} with ${count} actors`)
    .join(', ');
  lines.push(
    '',
    `Random interleavings of concurrent actors: ${simulation.interleavings} (${actors}); ${simulation.withCrash} ` +
      `of them with one actor crashed at a random call; ` +
      `${simulation.storageCalls.toLocaleString('en-US')} storage calls released one at a time in a seeded order. ` +
      `Every run checked: seqs dense, every acknowledged input stored exactly once, ` +
      'one Idempotency-Key one input, every acknowledged notice delivered by exactly one stored turn, no 5xx, a ' +
      'turn taken after the lease.',
    '',
    '| kill -9 of a Node server mid-stream (S3 on loopback) | Time until a new turn is answered 200 | Server ' +
      'restart | Turns refused (409) meanwhile |',
    '|---|---|---|---|',
    `| ${recovery.leaseMs === DEFAULTS.turnLeaseMs ? 'default settings' : 'a shorter lease'}: wait for the ` +
      `lease (TURN_LEASE_MS ${recovery.leaseMs / 1000} s, renewed every ` +
      `${recovery.leaseMs / 3000} s while the turn ran) | ${(recovery.recoveryMs / 1000).toFixed(1)} s | ` +
      `${(recovery.restartMs / 1000).toFixed(1)} s | ${recovery.refused} |`,
    `| \`POST /v1/sessions/:id/turns/:turn/cancel\` right after the restart | ` +
      `${(cancelled.recoveryMs / 1000).toFixed(1)} s | ${(cancelled.restartMs / 1000).toFixed(1)} s | 0 |`,
    '',
    'The killed turn leaves its input stored and closed as failed; the words it had streamed are not stored.',
    '',
  );
  return lines;
}

function capitalized(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

function yes(condition: boolean): string {
  return condition ? 'yes' : '**no**';
}

function goalRows(results: BenchResults): GoalRow[] {
  const rows: GoalRow[] = [];
  for (const [runtime, overhead] of [
    ['memory', results.overheadMemory],
    ['workerd + local R2', results.overheadWorkerd],
  ] as const) {
    if (!overhead) continue;
    const measured = overhead.filter((row) => !row.skipped);
    const largest = measured.at(-1);
    if (largest) {
      rows.push({
        goal:
          `Per-turn p50 at ${largest.size.toLocaleString('en-US')} items / p50 at ${measured[0]!.size} items ` +
          `(${runtime})`,
        target: `<= ${RATIO_GOAL}`,
        measured: `${largest.ratio.toFixed(2)}`,
        met:
          yes(largest.ratio <= RATIO_GOAL) +
          (largest.size < overhead.at(-1)!.size
            ? ` (${overhead.at(-1)!.size.toLocaleString('en-US')} not measured)`
            : ''),
      });
    }
  }
  for (const [runtime, overhead] of [
    ['memory store', results.overheadMemory],
    ['workerd + local R2', results.overheadWorkerd],
  ] as const) {
    const counted = overhead?.filter((row) => row.storage && !row.skipped) ?? [];
    if (counted.length === 0) continue;
    const worst = counted.reduce((a, b) => (b.storage!.operationsMax > a.storage!.operationsMax ? b : a));
    rows.push({
      goal: `Storage operations per turn (${runtime}, counted)`,
      target: `<= ${OPERATIONS_GOAL}`,
      measured: counted
        .map((row) => {
          const { operationsMedian, operationsMax } = row.storage!;
          const max = operationsMax !== operationsMedian ? ` (max ${operationsMax})` : '';
          return `${operationsMedian}${max} at ${row.size.toLocaleString('en-US')}`;
        })
        .join(', '),
      met: yes(worst.storage!.operationsMax <= OPERATIONS_GOAL),
    });
    const notices = counted.filter((row) => row.notice?.operations !== undefined);
    if (notices.length > 0) {
      rows.push({
        goal: `Storage operations of a turn delivering notices (${runtime})`,
        target: `<= 8 + 4 per notice (${notices[0]!.notice!.operationsLimit} for ${notices[0]!.notice!.delivered})`,
        measured: notices.map((row) => `${row.notice!.operations} at ${row.size.toLocaleString('en-US')}`).join(', '),
        met: yes(notices.every((row) => row.notice!.operations! <= row.notice!.operationsLimit)),
      });
    }
    // Only where the driver knows the prompt (the memory store).
    const budgeted = counted.filter((row) => row.storage!.readBudgetWorst !== undefined);
    if (budgeted.length > 0) {
      rows.push({
        goal: `Bytes read per turn / (1.1 x prompt bytes + 64 KiB), worst turn (${runtime})`,
        target: '<= 1',
        measured: budgeted
          .map((row) => `${fixed(row.storage!.readBudgetWorst, 2)} at ${row.size.toLocaleString('en-US')}`)
          .join(', '),
        met: yes(budgeted.every((row) => row.storage!.readBudgetWorst! <= 1)),
      });
    }
  }
  rows.push(...smallPromptGoals(results));
  for (const row of coldTurnGoalRows(results.coldTurn ?? [])) rows.push({ ...row, met: yes(row.met) });
  for (const row of appendLoadGoalRows(results.appendLoad)) rows.push({ ...row, met: yes(row.met) });
  rows.push(...realisticWindowGoals(results.realisticWindow?.rows));
  if (results.strategies) {
    for (const figure of results.strategies.filter(
      (entry) => entry.input === 'tail' || entry.strategies.startsWith('shorten_tools_epoch_increment'),
    )) {
      rows.push({
        goal:
          `Strategy CPU, \`${figure.strategies}\`, 10,000-item history ` +
          `(${figure.input === 'tail' ? 'tail view with aggregates, as a turn runs it' : 'whole history'})`,
        target: `< ${STRATEGY_GOAL_MS} ms`,
        measured: `${figure.medianMs.toFixed(2)} ms median`,
        met: yes(figure.medianMs < STRATEGY_GOAL_MS),
      });
    }
  }
  if (results.cache) {
    const runs = results.cache.runs;
    if (results.cache.costs) {
      const row = anthropicReadGoal(results.cache.costs);
      rows.push({ ...row, met: yes(row.met) });
    }
    for (const run of runs.filter((entry) => entry.name.startsWith('shorten_tools_epoch'))) {
      rows.push({
        goal: `Reusable share, ${run.name}`,
        target: `>= ${REUSABLE_GOAL * 100}%`,
        measured: percent(run.totals.reusableShare),
        met: yes(run.totals.reusableShare >= REUSABLE_GOAL),
      });
      const others = runs.filter((entry) => entry !== run);
      const cheapestOther = others.reduce((a, b) => (b.totals.costCached < a.totals.costCached ? b : a));
      rows.push({
        goal: `Estimated cost, ${run.name}, below every other row`,
        target: `< ${formatBytes(cheapestOther.totals.costCached)} (${cheapestOther.name})`,
        measured:
          `${formatBytes(run.totals.costCached)} ` +
          `(${signedPercent(run.totals.costCached / cheapestOther.totals.costCached - 1)} vs ${cheapestOther.name})`,
        met: yes(run.totals.costCached < cheapestOther.totals.costCached),
      });
    }
  }
  if (results.computerUse)
    for (const row of computerUseGoalRows(results.computerUse)) rows.push({ ...row, met: yes(row.met) });
  if (results.heap) {
    const peak = Math.max(...results.heap.result.peakGrowthBytes);
    rows.push({
      goal: `Peak heap of a turn, ${results.heap.result.items.toLocaleString('en-US')}-item session`,
      target: '< 64 MiB',
      measured: `${mib(peak)} (worst of ${results.heap.result.peakGrowthBytes.length} turns)`,
      met: yes(peak < HEAP_GOAL),
    });
  }
  if (results.transfer) rows.push(transferGoalRow(results.transfer));
  if (results.tracing) rows.push(tracingGoalRow(results.tracing));
  if (results.fileSmallPrompt) rows.push(fileSmallPromptGoalRow(results.fileSmallPrompt));
  if (results.bundle) {
    const row = bundleGoalRow(results.bundle);
    rows.push({ ...row, met: yes(row.met) });
  }
  // Goals whose section has no figures stay in the table, saying why.
  const missing: [unknown, string, string, string][] = [
    [
      results.overheadMemory?.some((row) => !row.skipped),
      'memory',
      'Per-turn p50 ratio and storage operations per turn (memory store)',
      `<= ${RATIO_GOAL}; <= ${OPERATIONS_GOAL}`,
    ],
    [
      results.overheadWorkerd?.some((row) => !row.skipped),
      'workerd',
      'Per-turn p50 ratio and storage operations per turn (workerd + local R2)',
      `<= ${RATIO_GOAL}; <= ${OPERATIONS_GOAL}`,
    ],
    [results.strategies, 'strategies', 'Strategy CPU, 10,000-item history', `< ${STRATEGY_GOAL_MS} ms`],
    [
      results.cache,
      'cache',
      'Reusable share and estimated cost, epoch strategies',
      `>= ${REUSABLE_GOAL * 100}%; below every other row`,
    ],
    [results.heap, 'heap', 'Peak heap of a turn', '< 64 MiB'],
    [results.bundle, 'bundle', 'Worker bundle, gzipped (as wrangler measures its upload)', `< ${BUNDLE_GOAL_KIB} KiB`],
  ];
  for (const [present, section, goal, target] of missing) {
    if (present) continue;
    const overhead =
      section === 'memory' ? results.overheadMemory : section === 'workerd' ? results.overheadWorkerd : undefined;
    const why =
      overhead && overhead.length > 0
        ? `not measured (${overhead.map((row) => `${row.size.toLocaleString('en-US')}: ${row.skipped}`).join('; ')})`
        : notMeasured(results, section);
    rows.push({ goal, target, measured: why, met: '-' });
  }
  return rows;
}

/** The small-prompt workload's read budget and overhead ratio, and the rounds of every latency run. */
function smallPromptGoals(results: BenchResults): GoalRow[] {
  const rows: GoalRow[] = [];
  const small = results.smallPrompt ?? [];
  const at = (size: number) => size.toLocaleString('en-US');
  if (small.length > 0)
    rows.push({
      goal: 'Bytes read per turn / (1.1 x prompt bytes + 64 KiB), worst turn, small-prompt workload (no view cache)',
      target: '<= 1',
      measured: small.map((row) => `${row.readBudgetWorst.toFixed(2)} at ${at(row.itemsAtStart)}`).join(', '),
      met: yes(small.every((row) => row.readBudgetWorst <= 1)),
    });
  const timed = small.filter((row) => row.latency);
  const [first, last] = [timed[0]?.latency, timed.at(-1)?.latency];
  if (first && last && timed.length > 1) {
    const warm = last.warm.overheadMs / first.warm.overheadMs;
    const cold = last.cold.overheadMs / first.cold.overheadMs;
    rows.push({
      goal:
        `p50 turn overhead at ${at(timed.at(-1)!.itemsAtStart)} / ${at(timed[0]!.itemsAtStart)} items, ` +
        `small-prompt workload, every storage call ${first.warm.delayMs} ms slower`,
      target: `<= ${RATIO_GOAL}`,
      measured:
        `${warm.toFixed(2)} with the view cache (${last.warm.overheadMs.toFixed(0)} / ` +
        `${first.warm.overheadMs.toFixed(0)} ms); ${cold.toFixed(2)} without (a process new to the session)`,
      met: `${yes(warm <= RATIO_GOAL)} (cold: ${yes(cold <= RATIO_GOAL)})`,
    });
  }
  const latencies = [
    ...(results.latency?.rows ?? []),
    ...timed.flatMap((row) => [row.latency!.warm, row.latency!.cold]),
  ];
  if (latencies.length > 0) {
    const before = Math.max(...latencies.map((row) => Math.max(row.depthBeforeModel, row.notices.depthBeforeModel)));
    const after = Math.max(...latencies.map((row) => Math.max(row.depthAfterModel, row.notices.depthAfterModel)));
    rows.push({
      goal: 'Sequential storage round trips before the model call / after its last token (counted, every size)',
      target: '<= 2 / <= 1',
      measured: `${before} / ${after}`,
      met: yes(before <= 2 && after <= 1),
    });
  }
  return rows;
}

function overheadSection(results: BenchResults): string[] {
  const lines: string[] = ['## 1. Per-turn overhead (echo model)', ''];
  lines.push(
    'One session per size, loaded first (POST /items in batches of an agent-like mix: a user message, about 25 ' +
      'tool calls ' +
      'with outputs of 200 B to 20 KB log-normal and arguments of 50 B to 2 KB, 5% repeated calls, an assistant ' +
      'message; the log is ' +
      'packed every 8 appends, as turns do in the background). The measured turns, one turn of every size per ' +
      'round so that load on the machine falls on every size alike, alternate a user message `call read_file {...}` ' +
      "(echo answers with a function_call) and that call's 2 KB output (echo answers with text), with the default " +
      'strategies ' +
      '`shorten_tools_epoch_increment,shorten_images,inbox`. Then 2 notices are posted and one more turn ' +
      'delivers them. Times ' +
      'are medians and 95th ' +
      'percentiles of the measured turns after warm-up turns; the ratio is to the p50 at the smallest size of the ' +
      'same runtime, in the same run.',
    '',
  );
  if (!results.overheadMemory)
    lines.push(`### Memory store`, '', `${capitalized(notMeasured(results, 'memory'))}.`, '');
  if (results.overheadMemory) {
    lines.push(`### Memory store, lib/turn/ \`runTurn\` with the app's per-request services, counted`, '');
    lines.push(`Command: \`${results.commands.overheadMemory}\``, '');
    lines.push(...overheadTable(results.overheadMemory, 'memory'));
    lines.push(
      '',
      "Operations are the turn's own, from the request to the response; the background pack a turn starts is run " +
        'after it and counted apart ' +
        '("bg ops/turn"). Prompt bytes are the UTF-8 bytes of the JSON of the prompt handed to the model. "read ' +
        'budget" is the worst turn\'s ' +
        'bytes read / (1.1 x prompt bytes + 64 KiB): above 1 misses the goal. "newest page" is GET /items of the ' +
        'newest 100 items (SessionLog.listItems, ' +
        'payloads whole) after the measured turns.',
      '',
    );
    const loads = results.overheadMemory.filter((row) => row.append);
    if (loads.length > 0) {
      const blobs = loads.some((row) => row.append!.byKind.some((entry) => entry.label.startsWith('put blob')));
      lines.push(
        `Loading: one POST /items of ${loads[0]!.append!.items} items (SessionLog.append) took, median per append ` +
          `while loading each size: ` +
          loads
            .map(
              (row) =>
                `${row.append!.operations} operations at ${row.size.toLocaleString('en-US')} ` +
                `(${row.append!.byKind.map((entry) => `${entry.label} x${entry.count}`).join(', ')})`,
            )
            .join('; ') +
          (blobs
            ? '. Blobs are outputs over 8 KiB stored out of line.'
            : '. The record holds its outputs inline; packing (not counted here) moves large ones out of line ' +
              'into segments and views.'),
        '',
      );
    }
    lines.push(...whereTable(results.overheadMemory));
  }
  if (results.overheadFile) {
    lines.push('### File store (lib/store/file.ts), as the memory store above', '');
    lines.push(`Command: \`${results.commands.overheadFile}\``, '');
    lines.push(...overheadTable(results.overheadFile, 'memory'), '');
  }
  lines.push(
    `### workerd with a local R2 bucket (bench/counting-worker.ts: the app of functions/worker.ts with its R2 ` +
      `store counted, under \`wrangler dev\`'s runtime, HTTP on loopback)`,
    '',
  );
  lines.push(`Command: \`${results.commands.overheadWorkerd}\``, '');
  if (results.overheadWorkerd) {
    const workerd = results.overheadWorkerd;
    lines.push(...overheadTable(workerd, 'workerd'));
    lines.push('', "Times are the client's, request sent to body read, through wrangler's local proxy.");
    if (workerd.some((row) => row.storage)) {
      lines[lines.length - 1] +=
        ' Operations and bytes read are counted in the worker: bench/counting-worker.ts wraps the R2 store in a ' +
        'CountingStore and every response carries ' +
        "that request's counts, taken when the app returns it. Packing, handed to waitUntil, starts after that " +
        '(lib/turn/append.ts `afterResponse`) and is not counted ' +
        'here. R2Store makes one ' +
        'R2 call per port call (deletes in batches of up to 1,000 keys), so these are requests to the local R2 ' +
        'bucket. ' +
        'The prompt bytes are those of the prompt the worker handed its echo model (UTF-8 of its JSON, as ' +
        "the memory store's rows measure them: bench/counting-worker.ts wraps the app's models), and the read " +
        'budget is taken against them. The worker keeps that prompt and measures it only when the driver asks, ' +
        "in a request of its own after the turn's response was read, so the turn's time does not include " +
        'measuring it.' +
        sameAsMemory(workerd, results.overheadMemory);
    }
    lines.push('');
  }
  if (results.workerdError)
    lines.push(
      `Not measured: the workerd run failed: \`${results.workerdError.replace(/`/g, "'").slice(0, 600)}\``,
      '',
    );
  else if (!results.overheadWorkerd) lines.push(`${capitalized(notMeasured(results, 'workerd'))}.`, '');
  return lines;
}

/** How workerd's operation medians compare with the memory ' +
  'store's at the sizes both measured (empty when nothing to compare). */
function sameAsMemory(workerd: TurnOverheadRow[], memory: TurnOverheadRow[] | undefined): string {
  const pairs = workerd
    .filter((row) => row.storage)
    .map((row) => ({ row, other: memory?.find((candidate) => candidate.size === row.size && candidate.storage) }))
    .filter((pair): pair is { row: TurnOverheadRow; other: TurnOverheadRow } => pair.other !== undefined);
  if (pairs.length === 0) return '';
  const differing = pairs.filter(({ row, other }) => row.storage!.operationsMedian !== other.storage!.operationsMedian);
  if (differing.length === 0) return " The operation medians are the memory store's at every size measured on both.";
  return (
    ` The operation medians differ from the memory store's: ` +
    differing
      .map(
        ({ row, other }) =>
          `${row.storage!.operationsMedian} against ${other.storage!.operationsMedian} at ` +
          row.size.toLocaleString('en-US'),
      )
      .join(', ') +
    '. ' +
    'Here packing runs in waitUntil and the next turn may start before it has written a fresh view, and loading ' +
    'packs through short turns, ' +
    "while the memory driver packs directly and runs each turn's packing to completion before the next turn."
  );
}

interface OverheadColumn {
  header: string;
  cell: (row: TurnOverheadRow) => string;
}

const ITEMS_COLUMN: OverheadColumn = {
  header: 'items',
  cell: (row) => `${row.size.toLocaleString('en-US')} (${row.itemsAtStart.toLocaleString('en-US')})`,
};

function timeColumns(digits: number): OverheadColumn[] {
  return [
    { header: 'turns', cell: (row) => `${row.turns}` },
    { header: 'p50 ms', cell: (row) => row.p50Ms.toFixed(digits) },
    { header: 'p95 ms', cell: (row) => row.p95Ms.toFixed(digits) },
    { header: 'p50 ratio', cell: (row) => row.ratio.toFixed(2) },
    { header: 'prompt items', cell: (row) => `${row.itemsInPromptMedian}` },
  ];
}

const OPERATIONS_COLUMN: OverheadColumn = {
  header: 'ops/turn median (max)',
  cell: (row) => (row.storage ? `${row.storage.operationsMedian} (${row.storage.operationsMax})` : '-'),
};
const BYTES_READ_COLUMN: OverheadColumn = {
  header: 'bytes read median',
  cell: (row) => bytesOrDash(row.storage?.bytesReadMedian),
};
const NOTICE_OPERATIONS_COLUMN: OverheadColumn = {
  header: 'notice turn: ops (limit)',
  cell: (row) => `${row.notice?.operations ?? '-'} (${row.notice?.operationsLimit ?? '-'})`,
};

/**
 * The per-size table of one runtime. `memory`: prompt bytes and the full storage figures;
 * `workerd`: prompt characters and bytes, load and notice-turn times, and the storage columns the
 * worker reports when any row was counted.
 */
function overheadTable(rows: TurnOverheadRow[], layout: 'memory' | 'workerd'): string[] {
  const columns: OverheadColumn[] =
    layout === 'memory'
      ? [
          ITEMS_COLUMN,
          ...timeColumns(2),
          { header: 'prompt bytes', cell: (row) => bytesOrDash(row.storage?.promptBytesMedian) },
          OPERATIONS_COLUMN,
          {
            header: 'get / put / list',
            cell: (row) =>
              row.storage
                ? `${row.storage.breakdown.get} / ${row.storage.breakdown.put} / ${row.storage.breakdown.list}`
                : '-',
          },
          BYTES_READ_COLUMN,
          { header: 'read budget', cell: (row) => fixed(row.storage?.readBudgetWorst, 2) },
          { header: 'bg ops/turn', cell: (row) => fixed(row.storage?.backgroundOperationsPerTurn, 1) },
          NOTICE_OPERATIONS_COLUMN,
          {
            header: 'newest page: ops (bytes read)',
            cell: (row) =>
              row.newestPage ? `${row.newestPage.operations} (${formatBytes(row.newestPage.bytesRead)})` : '-',
          },
        ]
      : [
          ITEMS_COLUMN,
          ...timeColumns(1),
          { header: 'prompt chars', cell: (row) => formatBytes(row.promptCharactersMedian) },
          ...(rows.some((row) => row.storage)
            ? [
                { header: 'prompt bytes', cell: (row: TurnOverheadRow) => bytesOrDash(row.storage?.promptBytesMedian) },
                OPERATIONS_COLUMN,
                BYTES_READ_COLUMN,
                { header: 'read budget', cell: (row: TurnOverheadRow) => fixed(row.storage?.readBudgetWorst, 2) },
              ]
            : []),
          { header: 'load s', cell: (row) => (row.loadMs / 1000).toFixed(1) },
          { header: 'notice turn ms', cell: (row) => (row.notice ? row.notice.ms.toFixed(1) : '-') },
          ...(rows.some((row) => row.notice?.operations !== undefined) ? [NOTICE_OPERATIONS_COLUMN] : []),
        ];
  const lines = [
    `| ${columns.map((column) => column.header).join(' | ')} |`,
    `|${columns.map(() => '---').join('|')}|`,
  ];
  for (const row of rows) {
    if (row.skipped) lines.push(`| ${row.size.toLocaleString('en-US')} | ${row.skipped} |`);
    else lines.push(`| ${columns.map((column) => column.cell(row)).join(' | ')} |`);
  }
  lines.push('', 'items: the size measured at (stored items when the measured turns began).');
  return lines;
}

function whereTable(rows: TurnOverheadRow[]): string[] {
  const measured = rows.filter((row) => row.storage);
  if (measured.length === 0) return [];
  const labels = [...new Set(measured.flatMap((row) => row.storage!.byKind.map((entry) => entry.label)))].sort();
  const lines = ["Where a turn's operations and bytes go (median per turn: count, bytes read), memory store:", ''];
  lines.push(`| operation | ${measured.map((row) => row.size.toLocaleString('en-US')).join(' | ')} |`);
  lines.push(`|---|${measured.map(() => '---').join('|')}|`);
  for (const label of labels) {
    const cells = measured.map((row) => {
      const entry = row.storage!.byKind.find((candidate) => candidate.label === label);
      if (!entry || entry.count === 0) return '0';
      return entry.bytes > 0 ? `${entry.count} (${formatBytes(entry.bytes)})` : `${entry.count}`;
    });
    lines.push(`| ${label} | ${cells.join(' | ')} |`);
  }
  lines.push('');
  return lines;
}

function strategySection(results: BenchResults): string[] {
  const lines = [
    '## 2. Strategy CPU on 10,000 items',
    '',
    `Command: \`${results.commands.strategies}\` (bench/strategies.ts \`benchStrategies()\`)`,
    '',
  ];
  if (!results.strategies) return [...lines, `${capitalized(notMeasured(results, 'strategies'))}.`, ''];
  lines.push(
    '`preparePrompt` per strategy list on a 10,000-item history with 2,000 tool calls (bench/strategies.ts ' +
      '`benchHistory`): on the whole history, ' +
      'and on the tail view with stored aggregates, which is what a turn runs. Median and p90 of 41 runs after 5 ' +
      'warm-up runs.',
    '',
    '| strategies | input | items | median ms | p90 ms | goal < 5 ms |',
    '|---|---|---|---|---|---|',
  );
  for (const figure of results.strategies) {
    lines.push(
      `| \`${figure.strategies}\` | ${figure.input} | ${figure.items.toLocaleString('en-US')} | ` +
        `${figure.medianMs.toFixed(2)} | ${figure.p90Ms.toFixed(2)} | ${yes(figure.medianMs < STRATEGY_GOAL_MS)} |`,
    );
  }
  lines.push('');
  return lines;
}

function cacheSection(results: BenchResults): string[] {
  const lines = ['## 3. Prompt-cache stability', '', `Command: \`${results.commands.cache}\``, ''];
  if (!results.cache) return [...lines, `${capitalized(notMeasured(results, 'cache'))}.`, ''];
  const { runs, toolCalls, seed } = results.cache;
  const turns = runs[0]?.totals.turns ?? 0;
  lines.push(
    `A simulated agent session (bench/agent-session.ts, seed ${seed}): a 4,000-character system message, then ` +
      `${toolCalls.toLocaleString('en-US')} tool calls; ` +
      'outputs 200 B to 20 KB log-normal (1st/99th percentiles), arguments 50 B to 2 KB log-normal, a user ' +
      'message every 15 to 35 calls (25 on average) ' +
      `and an assistant message closing each run of calls, 5% of calls repeating an earlier call. The model is ` +
      `asked after every user message and every tool output: ${turns.toLocaleString('en-US')} prompts. ` +
      'Each prompt is built by `preparePrompt` from the whole history so far and serialized as the provider would ' +
      "see it: JSON of the items' wire fields only " +
      '(bench/prompt-cache.ts `serializePrompt`). "Reusable" is the longest common byte prefix with the previous ' +
      "prompt: what a provider's prompt cache " +
      'could serve, an upper bound (Anthropic matches at cache breakpoints and block boundaries, at least 1,024 ' +
      'tokens; tool definitions, identical every turn, are left out).',
    '',
    `Cost formula, per prompt, in bytes at the base input price: cost = ${CACHE_READ_MULTIPLIER} x reusable + ` +
      `${CACHE_WRITE_MULTIPLIER} x (size - reusable) ` +
      `(cache reads at ${CACHE_READ_MULTIPLIER}x, the rest written to the cache at ${CACHE_WRITE_MULTIPLIER}x, ` +
      `Anthropic's multipliers). "No cache" is 1.0 x size. At about 4 bytes a token ` +
      'and $3 per million input tokens, 1 GB of base-price bytes is about $750.',
    '',
    '| strategy | bytes sent | bytes reusable | reusable share | max prompt | cost, no cache | cost with cache ' +
      '(formula) | vs cheapest | strategy CPU, all prompts |',
    '|---|---|---|---|---|---|---|---|---|',
  );
  const cheapest = Math.min(...runs.map((run) => run.totals.costCached));
  for (const run of runs) {
    const totals = run.totals;
    lines.push(
      `| ${run.label} | ${formatBytes(totals.bytesSent)} | ${formatBytes(totals.bytesReusable)} | ` +
        `${percent(totals.reusableShare)} | ${formatBytes(totals.maxPromptBytes)} | ` +
        `${formatBytes(totals.costUncached)} | ${formatBytes(totals.costCached)} | ` +
        `${signedPercent(totals.costCached / cheapest - 1)} | ${(totals.prepareMs / 1000).toFixed(1)} s |`,
    );
  }
  lines.push('', `![prompt size and reusable share per model call](${results.cache.chart})`, '');
  lines.push(
    'Per-turn figures behind the chart (median over the prompts; p10 of the reusable share shows how often the ' +
      'prefix breaks):',
    '',
  );
  lines.push(
    '| strategy | median prompt | median reusable share | p10 reusable share | prompts with < 50% reusable |',
    '|---|---|---|---|---|',
  );
  for (const run of runs) {
    const shares = run.turns.map((turn) => (turn.size === 0 ? 0 : turn.reusable / turn.size));
    const sorted = [...shares].sort((a, b) => a - b);
    lines.push(
      `| ${run.name} | ${formatBytes(median(run.turns.map((turn) => turn.size)))} | ${percent(median(shares))} | ` +
        `${percent(sorted[Math.floor(sorted.length * 0.1)] ?? 0)} | ${shares.filter((share) => share < 0.5).length} |`,
    );
  }
  lines.push('');
  if (results.cache.costs) lines.push(...cacheCostsMarkdown(runs, results.cache.costs));
  void cachedCost;
  return lines;
}

function heapSection(results: BenchResults): string[] {
  const lines = ['## 4. Memory: peak heap of a turn', ''];
  if (!results.heap) return [...lines, `${capitalized(notMeasured(results, 'heap'))}.`, ''];
  const { result, command } = results.heap;
  lines.push(`Command: \`${command}\` (run by \`npm run bench\` as a child process)`, '');
  lines.push(
    `Method: a ${result.items.toLocaleString('en-US')}-item session (the same agent mix) is loaded into a ` +
      `MemoryStore and packed, then after two warm-up turns, ` +
      `for each of ${result.peakGrowthBytes.length} turns: two full GCs (\`gc()\`, --expose-gc), heapUsed as the ` +
      `baseline, then heapUsed sampled every millisecond ` +
      'and around every storage call during the turn; the figure is the highest sample minus the baseline. The ' +
      "store's own objects are in the baseline " +
      '(in a Worker they live in R2, not in the isolate). Garbage collected mid-turn is not counted, so this is ' +
      'the live peak as sampled, not total allocation. The view cache is off (VIEW_CACHE_BYTES=0), so each turn ' +
      'fetches and parses its view, the most a turn holds; with the default cache a process also keeps up to ' +
      `${mib(DEFAULTS.viewCacheBytes)} of views as JSON (about as much heap), one per session, between turns.`,
    '',
    '| turn | peak heap growth | heapUsed baseline | retained after GC | samples | prompt chars |',
    '|---|---|---|---|---|---|',
  );
  result.peakGrowthBytes.forEach((peak, index) => {
    lines.push(
      `| ${index + 1} | ${mib(peak)} | ${mib(result.baselineBytes[index]!)} | ` +
        `${mib(result.retainedBytes[index]!)} | ${result.samplesPerTurn[index]} | ` +
        `${result.promptCharacters[index]!.toLocaleString('en-US')} |`,
    );
  });
  lines.push(
    '',
    `Worst: ${mib(Math.max(...result.peakGrowthBytes))}, median ${mib(median(result.peakGrowthBytes))}; goal < 64 ` +
      `MiB (a Worker has 128 MB).`,
    '',
  );
  return lines;
}

function compactionSection(results: BenchResults): string[] {
  const lines = [
    '## 5. Reads per turn after compaction',
    '',
    `Command: \`${results.commands.compaction}\` (bench/compaction.ts \`measureCompactionReads()\`, also \`npx ` +
      `tsx bench/compaction.ts\`)`,
    '',
  ];
  if (!results.compaction) return [...lines, `${capitalized(notMeasured(results, 'compaction'))}.`, ''];
  lines.push(
    'With `compact` in the strategy list (`shorten_tools_epoch_increment,compact,inbox`), a session of N turns ' +
      'with tool traffic is compacted ' +
      '(keeping the newest 2,000 tokens), three turns run in the new context, then one turn is measured on the ' +
      'memory store (echo). ' +
      "The figure counts the measured turn's gets and lists and the bytes they read (puts are not in it). Compare " +
      'with section 1, where the default list never compacts.',
    '',
    '| history turns | history items | gets | lists | bytes read | prompt chars | read budget (1.1 x prompt chars ' +
      '+ 64 KiB) |',
    '|---|---|---|---|---|---|---|',
  );
  for (const figure of results.compaction) {
    const budget = 1.1 * figure.promptChars + 64 * 1024;
    lines.push(
      `| ${figure.historyTurns.toLocaleString('en-US')} | ${figure.historyItems.toLocaleString('en-US')} | ` +
        `${figure.getRequests} | ${figure.listRequests} | ${formatBytes(figure.bytesRead)} | ` +
        `${figure.promptChars.toLocaleString('en-US')} | ${(figure.bytesRead / budget).toFixed(2)} |`,
    );
  }
  const first = results.compaction[0];
  const last = results.compaction.at(-1);
  if (first && last && first !== last)
    lines.push('', `Bytes read, longest / shortest history: ${(last.bytesRead / first.bytesRead).toFixed(3)}.`);
  lines.push('');
  return lines;
}

/** What a turn reads and writes by design, one each: 8 operations (RecordingStore labels). */
const TURN_OPERATIONS = [
  'get session config',
  'list records listing',
  'get turn record',
  'get turn completion',
  'get view',
  'put turn record',
  'list inbox',
  'put turn completion',
];

/** A row's median operations beyond the 8 a turn makes by design, by label. */
function extraOperations(row: TurnOverheadRow): { label: string; count: number; bytes: number }[] {
  return row
    .storage!.byKind.map((entry) => ({
      ...entry,
      count: entry.count - (TURN_OPERATIONS.includes(entry.label) ? 1 : 0),
    }))
    .filter((entry) => entry.count > 0);
}

/**
 * Why a turn makes operations of these kinds (only the kinds that need explaining), as
 * sentences; a note already in `given` is not repeated, and is added to it.
 */
function kindNotes(labels: string[], given: Set<string>): string[] {
  const notes: string[] = [];
  if (labels.some((label) => label.startsWith('get segment')) || labels.includes('get turn record')) {
    notes.push(
      "Segment gets and further record gets are reads past the view: when the view's window starts after the cut " +
        'the strategies need, lacks a required call, ' +
        'or holds compacted an item they would now show whole, the read walks the records and segments newest ' +
        'first, and the turn asks `pack` for a fresh view.',
    );
  }
  if (labels.some((label) => label.startsWith('get blob'))) {
    notes.push(
      'Blob gets are outputs stored out of line (over 8 KiB) that the strategies show whole, fetched by ' +
        '`hydrate`, one get each; the strategies keep the newest ' +
        'instance of every repeated call whole, and with 5% repeated calls drawn from all earlier calls their ' +
        'number grows with the history.',
    );
  }
  if (
    labels.some((label) =>
      ['get session config', 'list records listing', 'get turn completion', 'get view', 'list inbox'].includes(label),
    )
  ) {
    notes.push('A kind the turn makes once by design appearing here was read more than once.');
  }
  const fresh = notes.filter((note) => !given.has(note));
  for (const note of fresh) given.add(note);
  return fresh;
}

/** Sentences joined with single spaces, empty ones left out. */
function sentences(...parts: (string | string[])[]): string {
  return parts
    .flat()
    .filter((part) => part.length > 0)
    .join(' ');
}

function causesSection(results: BenchResults): string[] {
  const lines = ['## Goals missed: by how much, and why', ''];
  const memory = results.overheadMemory?.filter((row) => row.storage) ?? [];
  const smallest = memory[0];
  const largest = memory.at(-1);
  const given = new Set<string>();
  if (smallest && largest) {
    const over = memory.find((row) => row.storage!.operationsMax > OPERATIONS_GOAL);
    if (over) {
      const extra = extraOperations(over);
      lines.push(
        sentences(
          `- **Storage operations.** At ${over.size.toLocaleString('en-US')} items a turn takes ` +
            `${over.storage!.operationsMedian} operations, median (max ${over.storage!.operationsMax}; ` +
            `goal ${OPERATIONS_GOAL}, ${signedPercent(over.storage!.operationsMedian / OPERATIONS_GOAL - 1)}).`,
          'By design a turn gets the session config, lists the records, gets the newest record, its completion ' +
            'and the view, puts the new record, lists the inbox ' +
            'and puts the completion: 8.',
          extra.length > 0
            ? `Beyond them, median: ${extra.map((entry) => `${entry.label} +${entry.count}`).join(', ')}.`
            : 'The median turn makes only these; the turns above the median are not broken down here (the table ' +
                'holds medians).',
          kindNotes(
            extra.map((entry) => entry.label),
            given,
          ),
        ),
      );
    }
    const noticeRows = memory.filter((row) => row.notice?.operations !== undefined && row.notice.delivered > 0);
    if (noticeRows.some((row) => row.notice!.operations! > row.notice!.operationsLimit)) {
      const overMedian = (row: TurnOverheadRow) => row.notice!.operations! - row.storage!.operationsMedian;
      lines.push(
        `- **Notice turns.** Delivering ${noticeRows[0]!.notice!.delivered} notices took ` +
          noticeRows
            .map(
              (row) =>
                `${row.notice!.operations} operations at ${row.size.toLocaleString('en-US')} (limit ` +
                `${row.notice!.operationsLimit}; ${overMedian(row)} over the median turn)`,
            )
            .join(', ') +
          ' (budget: 4 per notice: read, check, copy, delete)' +
          (noticeRows.every((row) => overMedian(row) <= 4 * row.notice!.delivered)
            ? '; the miss is the base turn above, not the delivery.'
            : '; delivery itself costs more than budgeted.'),
      );
    }
    const grown = largest
      .storage!.byKind.map((entry) => ({
        ...entry,
        base: smallest.storage!.byKind.find((candidate) => candidate.label === entry.label)?.count ?? 0,
      }))
      .filter((entry) => entry.count - entry.base >= 2)
      .sort((a, b) => b.count - b.base - (a.count - a.base));
    if (grown.length > 0) {
      const prompt = (row: TurnOverheadRow) =>
        `${row.itemsInPromptMedian.toLocaleString('en-US')} items, ${bytesOrDash(row.storage!.promptBytesMedian)}`;
      lines.push(
        sentences(
          `- **Operations grow with the history.** At ${largest.size.toLocaleString('en-US')} items a turn takes ` +
            `${largest.storage!.operationsMedian} operations ` +
            `(${(largest.storage!.operationsMedian / OPERATIONS_GOAL).toFixed(1)}x the goal). The growth: ` +
            grown
              .map((entry) => `${entry.label} ${entry.base} -> ${entry.count} (${formatBytes(entry.bytes)})`)
              .join('; ') +
            '.',
          largest.itemsInPromptMedian > smallest.itemsInPromptMedian
            ? `The prompt grows with the history too (median ${prompt(largest)} at ` +
                `${largest.size.toLocaleString('en-US')} items against ${prompt(smallest)} at ${smallest.size}): ` +
                'every message of the history stays in the prompt, and the newest instance of every repeated call ' +
                '(same name and arguments) is never dropped and is ' +
                'kept whole with its output (lib/strategies epoch selection).'
            : '',
          'The view stores the calls the strategies may show whole as they are, so those cost bytes of the view, ' +
            'not operations, unless the read goes past the view ' +
            'or their outputs are out of line.',
          kindNotes(
            grown.map((entry) => entry.label),
            given,
          ),
        ),
      );
    }
    const budgeted = memory.filter((row) => row.storage!.readBudgetWorst !== undefined);
    const worst = budgeted.reduce<TurnOverheadRow | undefined>(
      (a, b) => (a === undefined || b.storage!.readBudgetWorst! > a.storage!.readBudgetWorst! ? b : a),
      undefined,
    );
    if (worst && worst.storage!.readBudgetWorst! > 1) {
      const reads = worst.storage!.byKind.filter((entry) => entry.bytes > 0).sort((a, b) => b.bytes - a.bytes);
      const viewBytes = kindBytes(worst, 'get view');
      lines.push(
        sentences(
          `- **Read amplification.** Worst: ${fixed(worst.storage!.readBudgetWorst, 2)}x the budget at ` +
            `${worst.size.toLocaleString('en-US')} items ` +
            `(${formatBytes(worst.storage!.bytesReadMedian)} read for a ` +
            `${bytesOrDash(worst.storage!.promptBytesMedian)} prompt, medians).`,
          reads.length > 0
            ? `The bytes, median per turn: ` +
                `${reads.map((entry) => `${entry.label} ${formatBytes(entry.bytes)}`).join(', ')}.`
            : '',
          viewBytes > 0 && reads[0]?.label === 'get view'
            ? 'The view is the largest read. It holds the tail the strategies need plus a margin of 8 calls (tool ' +
                'items older than those the strategies may show whole ' +
                'stored as they compact them), the aggregates (one bit per call, one entry per repeated call) and ' +
                'the call keys (12 hex characters per distinct call), ' +
                'so it can be larger than the prompt: by the margin, and by the aggregates and call keys, which ' +
                'grow with the history. ' +
                `View bytes / prompt bytes, medians: ${budgeted
                  .filter((row) => kindBytes(row, 'get view') > 0)
                  .map(
                    (row) =>
                      `${(kindBytes(row, 'get view') / row.storage!.promptBytesMedian!).toFixed(2)} at ` +
                      `${row.size.toLocaleString('en-US')}`,
                  )
                  .join(', ')}.`
            : '',
          kindNotes(
            reads.map((entry) => entry.label).filter((label) => !TURN_OPERATIONS.includes(label)),
            given,
          ),
        ),
      );
    }
    const ratioRow = memory.filter((row) => row.ratio > RATIO_GOAL);
    if (ratioRow.length > 0) {
      const constant = memory.every((row) => row.storage!.operationsMax <= OPERATIONS_GOAL);
      lines.push(
        sentences(
          `- **Time ratio.** Memory store p50 ratios: ` +
            `${memory.map((row) => `${row.ratio.toFixed(2)} at ${row.size.toLocaleString('en-US')}`).join(', ')} ` +
            `(goal <= ${RATIO_GOAL}).`,
          constant
            ? `The operations do not grow (at most ${OPERATIONS_GOAL} per turn at every size); the time follows ` +
                `the bytes read (median ${formatBytes(smallest.storage!.bytesReadMedian)} at ` +
                `${smallest.size} items, ${formatBytes(largest.storage!.bytesReadMedian)} at ` +
                `${largest.size.toLocaleString('en-US')}) and the prompt: the turn parses, validates and ` +
                'hashes what it reads, and builds a prompt that grows with the history.'
            : 'The time follows the prompt and the operations above: the turn parses, validates and hashes what ' +
                'it reads, and builds a prompt that grows with the history.',
          'No constant-time tail read can meet the ratio while the prompt grows; the strategy semantics (every ' +
            'message, and repeated calls kept whole) would have to bound it first.',
        ),
      );
    }
  }
  const workerd = results.overheadWorkerd?.filter((row) => !row.skipped) ?? [];
  const workerdCounted = workerd.filter((row) => row.storage);
  const workerdOver = workerdCounted.filter(
    (row) =>
      row.storage!.operationsMax > OPERATIONS_GOAL ||
      (row.notice?.operations !== undefined && row.notice.operations > row.notice.operationsLimit),
  );
  if (workerdOver.length > 0) {
    lines.push(
      sentences(
        `- **Storage operations, workerd + local R2.** ${workerdCounted
          .map(
            (row) =>
              `${row.storage!.operationsMedian} per turn, max ${row.storage!.operationsMax}, notice turn ` +
              `${row.notice?.operations ?? '-'} (limit ${row.notice?.operationsLimit ?? '-'}) at ` +
              `${row.size.toLocaleString('en-US')} items`,
          )
          .join('; ')}.`,
        memory.length > 0
          ? "How they compare with the memory store's is in section 1; its breakdown by kind shows what a turn " +
              'reads, and the causes above apply to both.'
          : '',
      ),
    );
  }
  if (workerd.length > 0 && workerd.some((row) => row.ratio > RATIO_GOAL)) {
    lines.push(
      `- **workerd ratios**: ` +
        `${workerd.map((row) => `${row.ratio.toFixed(2)} at ${row.size.toLocaleString('en-US')}`).join(', ')}; ` +
        `same causes, each storage call being a local R2 request.`,
    );
  }
  for (const row of results.overheadWorkerd?.filter((entry) => entry.skipped) ?? []) {
    lines.push(`- **workerd at ${row.size.toLocaleString('en-US')} items**: ${row.skipped}.`);
  }
  if (results.cache) {
    const runs = results.cache.runs;
    for (const run of runs.filter((entry) => entry.name.startsWith('shorten_tools_epoch'))) {
      const others = runs.filter((entry) => entry !== run);
      const cheaper = others.filter((entry) => entry.totals.costCached <= run.totals.costCached);
      if (cheaper.length > 0) {
        lines.push(
          `- **Cost of ${run.name}.** ${formatBytes(run.totals.costCached)}, above ` +
            cheaper
              .map((entry) => {
                const more = signedPercent(run.totals.costCached / entry.totals.costCached - 1);
                return `${entry.name} (${formatBytes(entry.totals.costCached)}, ${more})`;
              })
              .join(', ') +
            '. ' +
            `Its reusable share is high (${percent(run.totals.reusableShare)}), but its prompts are larger ` +
            `(median ${formatBytes(median(run.turns.map((turn) => turn.size)))}, max ` +
            `${formatBytes(run.totals.maxPromptBytes)}): ` +
            'the epoch grows (up to 60 calls) and the compacted window with it (up to 160), and every call of the ' +
            'new part plus the 20 newest stay whole, so with outputs ' +
            'of about 3 KB on average the whole part alone reaches several hundred kB. At every epoch boundary ' +
            'the prompt changes from the pinned point on, and everything after it is a cache write.',
        );
      }
      if (run.totals.reusableShare < REUSABLE_GOAL)
        lines.push(
          `- **Reusable share of ${run.name}**: ${percent(run.totals.reusableShare)}, ` +
            `${((REUSABLE_GOAL - run.totals.reusableShare) * 100).toFixed(1)} points under the goal.`,
        );
    }
  }
  if (results.strategies) {
    const over = results.strategies.filter((entry) => entry.medianMs >= STRATEGY_GOAL_MS);
    for (const figure of over) {
      lines.push(
        `- **Strategy CPU, \`${figure.strategies}\` ` +
          `(${figure.input === 'full' ? 'whole history' : 'tail view'})**: ${figure.medianMs.toFixed(2)} ms ` +
          `median, ${(figure.medianMs - STRATEGY_GOAL_MS).toFixed(2)} ms over 5 ms.`,
      );
    }
    if (over.some((entry) => entry.input === 'full')) {
      lines.push(
        '- The whole-history rows are not what a turn runs: a turn prepares the tail view with stored aggregates ' +
          '(the "tail" rows). On the whole history the dispatcher ' +
          'also finds repeated calls itself (fingerprinting the arguments of every call), which the stored ' +
          'aggregates spare a turn.',
      );
    }
  }
  if (results.heap) {
    const peak = Math.max(...results.heap.result.peakGrowthBytes);
    const largestRead = results.overheadMemory?.filter((row) => row.storage).at(-1);
    if (peak >= HEAP_GOAL) {
      lines.push(
        `- **Heap.** ${mib(peak)} at ${results.heap.result.items.toLocaleString('en-US')} items, ` +
          `${mib(peak - HEAP_GOAL)} over the goal. The turn builds a prompt of ` +
          `${results.heap.result.promptCharacters[0]!.toLocaleString('en-US')} characters (see the prompt growth ` +
          `above), and what it reads is decoded and parsed into strings and objects ` +
          (largestRead
            ? `(${formatBytes(largestRead.storage!.bytesReadMedian)} read per turn at ` +
              `${largestRead.size.toLocaleString('en-US')} items on the memory store` +
              (kindBytes(largestRead, 'get view') > 0
                ? `, ${formatBytes(kindBytes(largestRead, 'get view'))} of it the view`
                : '') +
              ') '
            : '') +
          'which are live together during the turn. Bounding the prompt would shrink both.',
      );
    }
  }
  lines.push(...transferCauses(results.transfer));
  lines.push(...coldTurnCauses(results.coldTurn ?? []));
  // Every goal the table marks as missed is named here, explained above or not.
  const missed = goalRows(results).filter((row) => row.met.includes(yes(false)));
  if (missed.length > 0)
    lines.push(
      '- **Missed in this run** (the why of each, and what was tried: bench/FINDINGS.md, "Goals missed"): ' +
        `${missed.map((row) => `${row.goal} (target ${row.target}${partly(row)})`).join('; ')}.`,
    );
  if (lines.length === 2) lines.push('None.');
  lines.push('');
  return lines;
}

/** What a row marked partly met says of it ("; yes (cold: **no**)"), or nothing. */
function partly(row: GoalRow): string {
  return row.met === yes(false) ? '' : `; ${row.met}`;
}

function kindBytes(row: TurnOverheadRow, label: string): number {
  return row.storage?.byKind.find((entry) => entry.label === label)?.bytes ?? 0;
}

function percent(share: number): string {
  return `${(share * 100).toFixed(1)}%`;
}

function signedPercent(change: number): string {
  return `${change >= 0 ? '+' : ''}${(change * 100).toFixed(1)}%`;
}

/** A figure to `digits` decimals, or `-` where it was not measured. */
function fixed(value: number | undefined, digits: number): string {
  return value === undefined || Number.isNaN(value) ? '-' : value.toFixed(digits);
}

/** Bytes, or `-` where they were not measured. */
function bytesOrDash(value: number | undefined): string {
  return value === undefined || Number.isNaN(value) ? '-' : formatBytes(value);
}

function mib(bytes: number): string {
  return `${(bytes / 2 ** 20).toFixed(1)} MiB`;
}
