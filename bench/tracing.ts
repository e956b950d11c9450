import { createServices } from '../functions/services.ts';
import { tracingFor } from '../functions/tracing.ts';
import { parseServiceConfig, stringEnv } from '../lib/config.ts';
import { resolveModel } from '../lib/models/resolve-model.ts';
import { MemoryStore } from '../lib/store/memory.ts';
import { runTurn } from '../lib/turn/index.ts';
import { CountingStore } from '../test/support/counting-store.ts';
import { DepthStore } from '../test/support/depth-store.ts';
import { startOtlpReceiver } from '../test/support/otlp-receiver.ts';
import { agentItems } from './agent-session.ts';
import { MemoryTurnDriver } from './memory-driver.ts';
import { median, percentile } from './stats.ts';
import { loadHistory, operationsOf } from './turn-overhead.ts';
import { READ_FILE_TOOL } from './turn-driver.ts';

/**
 * What tracing costs a turn: two sessions with the same agent history on the memory store,
 * one turned with tracing off, one with it on (OTEL_EXPORTER_OTLP_ENDPOINT at a loopback OTLP
 * receiver, test/support/otlp-receiver.ts), a turn of each in turn (which first alternates)
 * so load on the machine falls on both alike. Each turn is timed from the call to its response,
 * in wall time and in the process's CPU time (process.cpuUsage: on a loaded machine the wall
 * time of a few milliseconds mostly measures waiting for a core, which falls on either side
 * by chance; the CPU time is what the turn itself spent); its storage operations and round
 * trips (the deepest chain of calls one after another, DepthStore) are counted until then. The
 * background work after it (packing, and with tracing the export of its spans) is timed apart.
 */

export interface TracingOptions {
  size: number;
  turns: number;
  warmupTurns: number;
  seed: number;
  log?: (line: string) => void;
}

export interface TracingSide {
  p50Ms: number;
  p95Ms: number;
  /** CPU time of the process (user and system) from the call to the response, median ms. */
  cpuP50Ms: number;
  /** Storage operations until the response: median and most. */
  operationsMedian: number;
  operationsMax: number;
  /** Sequential storage round trips until the response: median and most. */
  roundTripsMedian: number;
  roundTripsMax: number;
  /** The work a turn leaves for after its response (packing; the span export when on), median ms. */
  backgroundMs: number;
}

export interface TracingFigures {
  size: number;
  turns: number;
  off: TracingSide;
  on: TracingSide;
  /** Turn spans the receiver decoded, of the traced turns taken (warm-up included). */
  turnSpans: number;
  tracedTurns: number;
}

const SERVICE_NAME = 'tailgate-bench';

export async function measureTracing(options: TracingOptions): Promise<TracingFigures> {
  const memory = new MemoryStore();
  const loader = new MemoryTurnDriver(memory);
  for (const id of ['tracing_off', 'tracing_on']) {
    await loader.createSession(id, 'You are a helpful agent.');
    await loadHistory(loader, id, options.size, agentItems({ seed: options.seed }), {
      appendBatch: 100,
      turnEveryAppends: 8,
    });
  }
  options.log?.(`tracing: loaded two sessions of ${options.size} items`);
  const receiver = await startOtlpReceiver();
  try {
    const sides = {
      off: side(memory, {}),
      on: side(memory, { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, OTEL_SERVICE_NAME: SERVICE_NAME }),
    };
    const taken = options.warmupTurns + options.turns;
    for (let index = 0; index < taken; index++) {
      const measured = index >= options.warmupTurns;
      // Which goes first alternates every two turns, so neither side always finds the other's
      // leftovers. Each side's turns alternate between a tool call and its output, which cost
      // differently: alternating the order every turn would make one side take every call
      // second and every output first, and the other side the opposite, and that alone moved
      // a side's p50 by 20% to 40% with tracing off on both.
      const pair = Math.floor(index / 2) % 2 === 0 ? [sides.off, sides.on] : [sides.on, sides.off];
      for (const taker of pair) await taker.turn(taker === sides.off ? 'tracing_off' : 'tracing_on', index, measured);
    }
    const turnSpans = receiver
      .spans()
      .filter((span) => span.resource['service.name'] === SERVICE_NAME && span.parentSpanId === undefined).length;
    const figures = { size: options.size, turns: options.turns, off: sides.off.figures(), on: sides.on.figures() };
    options.log?.(`tracing: ${JSON.stringify(figures)}`);
    return { ...figures, turnSpans, tracedTurns: taken };
  } finally {
    await receiver.close();
  }
}

/** Turns through the services a request would have, with `environment`'s settings, counted. */
function side(memory: MemoryStore, settings: Record<string, string>) {
  const depth = new DepthStore(memory);
  const counting = new CountingStore(depth);
  const environment = { DEFAULT_MODEL: 'echo', ...settings };
  const config = parseServiceConfig(environment);
  const background: Promise<unknown>[] = [];
  const services = createServices({
    store: counting,
    config,
    env: stringEnv(environment),
    model: (id) => resolveModel(id, {}),
    background: (task) => void background.push(task.catch(() => undefined)),
    log: (message, details) => console.error(message, details),
    info: () => {},
    tracing: tracingFor(config.tracing),
  });
  const times: number[] = [];
  const cpuTimes: number[] = [];
  const operations: number[] = [];
  const roundTrips: number[] = [];
  const backgroundTimes: number[] = [];
  let pendingCall: string | undefined;
  return {
    async turn(id: string, index: number, measured: boolean) {
      depth.mark();
      counting.reset();
      const request = pendingCall
        ? { input: [{ type: 'function_call_output' as const, call_id: pendingCall, output: `file ${index}` }] }
        : { input: `call read_file {"path":"src/tracing-${index}.ts"}` };
      const cpu = process.cpuUsage();
      const start = performance.now();
      const response = await runTurn(services, id, { ...request, tools: [READ_FILE_TOOL] });
      const ms = performance.now() - start;
      const used = process.cpuUsage(cpu);
      // Read before the background work, which starts on a timer after the response.
      const turnOperations = operationsOf(counting.counts);
      const turnRoundTrips = depth.depth();
      const settled = performance.now();
      while (background.length > 0) await Promise.all(background.splice(0));
      const backgroundMs = performance.now() - settled;
      const call = response.output.find((item) => item.type === 'function_call');
      pendingCall = !pendingCall && call?.type === 'function_call' ? call.call_id : undefined;
      if (!measured) return;
      times.push(ms);
      cpuTimes.push((used.user + used.system) / 1000);
      operations.push(turnOperations);
      roundTrips.push(turnRoundTrips);
      backgroundTimes.push(backgroundMs);
    },
    figures: (): TracingSide => ({
      p50Ms: median(times),
      p95Ms: percentile(times, 95),
      cpuP50Ms: median(cpuTimes),
      operationsMedian: median(operations),
      operationsMax: Math.max(...operations),
      roundTripsMedian: median(roundTrips),
      roundTripsMax: Math.max(...roundTrips),
      backgroundMs: median(backgroundTimes),
    }),
  };
}

/** Whether tracing left a turn's storage alone: the same operations and round trips either way. */
export function storageUnchanged(figures: TracingFigures): boolean {
  const { off, on } = figures;
  return (
    off.operationsMedian === on.operationsMedian &&
    off.operationsMax === on.operationsMax &&
    off.roundTripsMedian === on.roundTripsMedian &&
    off.roundTripsMax === on.roundTripsMax
  );
}

/** The goal row: tracing adds no storage operation or round trip; the p50s side by side. */
export function tracingGoalRow(figures: TracingFigures) {
  const { off, on } = figures;
  return {
    goal: `Tracing on: storage operations and round trips per turn unchanged (turn p50 off / on)`,
    target: 'unchanged',
    measured:
      `${off.operationsMedian} / ${on.operationsMedian} ops, ${off.roundTripsMedian} / ${on.roundTripsMedian} ` +
      `rounds (p50 ${off.p50Ms.toFixed(2)} / ${on.p50Ms.toFixed(2)} ms)`,
    met: storageUnchanged(figures) ? 'yes' : '**no**',
  };
}

/** RESULTS.md's section. */
export function tracingSection(figures: TracingFigures | undefined, notMeasured: string): string[] {
  const title = '## 9. The cost of tracing';
  if (!figures) return [title, '', `${notMeasured}.`, ''];
  const row = (label: string, side: TracingSide) =>
    `| ${label} | ${side.p50Ms.toFixed(2)} | ${side.p95Ms.toFixed(2)} | ${side.cpuP50Ms.toFixed(2)} | ` +
    `${side.operationsMedian} (${side.operationsMax}) | ${side.roundTripsMedian} (${side.roundTripsMax}) | ` +
    `${side.backgroundMs.toFixed(2)} |`;
  const change = (on: number, off: number) => {
    const percent = off > 0 ? (on / off - 1) * 100 : Number.NaN;
    return Number.isNaN(percent) ? '-' : `${percent >= 0 ? '+' : ''}${percent.toFixed(0)}%`;
  };
  return [
    title,
    '',
    'Command: `npm run bench -- --only=tracing` (bench/tracing.ts). Two sessions of ' +
      `${figures.size.toLocaleString('en-US')} agent items on the memory store, ${figures.turns} measured turns ` +
      'each (echo model, a tool call and its output in turn), taken alternately: one without tracing, one with ' +
      'OTEL_EXPORTER_OTLP_ENDPOINT at a loopback OTLP receiver. Times are from the call to the response; ' +
      'so is the CPU time the process spent meanwhile (what the turn itself cost, where wall time on a loaded ' +
      'machine is mostly the wait for a core); operations and round trips (the longest chain of storage calls ' +
      'one after another) are counted until then; the background work (packing, and the span export when on) ' +
      'is timed apart.',
    '',
    '| tracing | p50 ms | p95 ms | CPU p50 ms | storage ops (most) | round trips (most) | background p50 ms |',
    '|---|---|---|---|---|---|---|',
    row('off', figures.off),
    row('on', figures.on),
    '',
    `Turn p50 with tracing on: ${change(figures.on.p50Ms, figures.off.p50Ms)} (CPU p50 ` +
      `${change(figures.on.cpuP50Ms, figures.off.cpuP50Ms)}); ` +
      `storage per turn ${storageUnchanged(figures) ? 'unchanged' : '**changed**'}; the receiver decoded ` +
      `${figures.turnSpans} turn spans of the ${figures.tracedTurns} traced turns (warm-up included).`,
    '',
  ];
}
