import { createServices } from '../functions/services.ts';
import { parseServiceConfig, stringEnv } from '../lib/config.ts';
import { echoModel } from '../lib/models/echo.ts';
import type { Model, ModelRequest, ModelStreamEvent } from '../lib/models/model.ts';
import { DepthStore } from '../test/support/depth-store.ts';
import { MemoryStore } from '../lib/store/memory.ts';
import type { ObjectStore } from '../lib/store/object-store.ts';
import { runTurn, streamTurn, type TurnRequest } from '../lib/turn/index.ts';
import { agentItems } from './agent-session.ts';
import { MemoryTurnDriver } from './memory-driver.ts';
import { median } from './stats.ts';
import { loadHistory } from './turn-overhead.ts';
import { READ_FILE_TOOL } from './turn-driver.ts';

/**
 * The latency a user feels from storage round trips: every storage call takes `delayMs` more
 * (a DepthStore over the memory store, as a remote R2 or S3 would), the model answers after
 * `modelMs` (echo, timestamped), and a turn is timed from the request to the model call,
 * from the model's last token to the response, and, streamed, to its `turn.started` event.
 * Depth is time / delayMs; the DepthStore also counts it exactly (calls done before the model
 * was called).
 */

export interface LatencyOptions {
  sizes: number[];
  turns: number;
  delayMs: number;
  modelMs: number;
  seed: number;
  log?: (line: string) => void;
}

export interface LatencyRow {
  size: number;
  turns: number;
  delayMs: number;
  modelMs: number;
  /** Medians, ms. */
  beforeModelMs: number;
  afterModelMs: number;
  /** beforeModelMs + afterModelMs of each turn, median: the time a turn adds to the model's. */
  overheadMs: number;
  /**
   * The process's CPU time (user and system, every thread) from the request to the response,
   * median ms: what the turn itself spent, which a loaded machine's wait for a core leaves out.
   */
  cpuMs: number;
  startedMs: number;
  /** The deepest storage call completed when the model was called (median). */
  depthBeforeModel: number;
  /** Sequential rounds among the calls started after the model's last token (median). */
  depthAfterModel: number;
  notices: { beforeModelMs: number; afterModelMs: number; depthBeforeModel: number; depthAfterModel: number };
}

/** Measures turns of sessions already stored in `memory`, through a DepthStore over it. */
export interface LatencyHarness {
  measure(id: string, size: number): Promise<LatencyRow>;
}

export function latencyHarness(
  memory: ObjectStore,
  options: Pick<LatencyOptions, 'delayMs' | 'modelMs' | 'turns'> & {
    /** VIEW_CACHE_BYTES (default: the service's); 0 fetches and parses every view, as a cold process does. */
    viewCacheBytes?: number;
  },
): LatencyHarness {
  const store = new DepthStore(memory, { delayMs: options.delayMs });
  const marks = { called: 0, ended: 0, depthAtCall: 0 };
  const wait = () => new Promise((resolve) => setTimeout(resolve, options.modelMs));
  const called = () => {
    marks.called = performance.now();
    marks.depthAtCall = store.depth((call) => call.endedAt !== undefined);
  };
  const timed: Model = {
    id: 'echo',
    async generate(request: ModelRequest) {
      called();
      await wait();
      const result = await echoModel.generate(request);
      marks.ended = performance.now();
      return result;
    },
    async *stream(request: ModelRequest): AsyncIterable<ModelStreamEvent> {
      called();
      await wait();
      for await (const event of echoModel.stream(request)) {
        if (event.type === 'done') marks.ended = performance.now();
        yield event;
      }
    },
  };
  const background: Promise<unknown>[] = [];
  const environment = {
    DEFAULT_MODEL: 'echo',
    ...(options.viewCacheBytes !== undefined ? { VIEW_CACHE_BYTES: String(options.viewCacheBytes) } : {}),
  };
  const services = createServices({
    store,
    config: parseServiceConfig(environment),
    env: stringEnv(environment),
    model: () => timed,
    background: (task) => void background.push(task.catch(() => undefined)),
    log: (message, details) => console.error(message, details),
    info: () => {},
  });
  const settle = async () => {
    while (background.length > 0) await Promise.all(background.splice(0));
  };
  const depthAfter = () => {
    const late = store.calls.filter((call) => call.startedAt >= marks.ended);
    if (late.length === 0) return 0;
    return Math.max(...late.map((call) => call.depth)) - Math.min(...late.map((call) => call.depth)) + 1;
  };
  const turn = async (id: string, request: TurnRequest, stream: boolean, started: number[]) => {
    store.mark();
    const cpu = process.cpuUsage();
    const start = performance.now();
    if (!stream) {
      await runTurn(services, id, request);
    } else {
      const { events, done } = streamTurn(services, id, request);
      for await (const event of events) if (event.event === 'turn.started') started.push(performance.now() - start);
      await done;
    }
    const end = performance.now();
    const used = process.cpuUsage(cpu);
    const figures = {
      before: marks.called - start,
      after: end - marks.ended,
      depth: marks.depthAtCall,
      cpu: (used.user + used.system) / 1000,
    };
    const after = depthAfter();
    await settle();
    return { ...figures, depthAfter: after };
  };
  return {
    async measure(id, size) {
      const plain = {
        before: [] as number[],
        after: [] as number[],
        depth: [] as number[],
        depthAfter: [] as number[],
      };
      const overhead: number[] = [];
      const cpu: number[] = [];
      const started: number[] = [];
      for (let index = 0; index < options.turns; index++) {
        const request: TurnRequest = { input: `turn ${index}`, tools: [READ_FILE_TOOL] };
        const figures = await turn(id, request, index % 2 === 1, started);
        plain.before.push(figures.before);
        plain.after.push(figures.after);
        overhead.push(figures.before + figures.after);
        cpu.push(figures.cpu);
        plain.depth.push(figures.depth);
        plain.depthAfter.push(figures.depthAfter);
      }
      for (let index = 0; index < 3; index++) await services.inbox.post(id, { content: `notice ${index}` });
      const noticed = await turn(id, { input: 'any news?' }, false, []);
      return {
        size,
        turns: options.turns,
        delayMs: options.delayMs,
        modelMs: options.modelMs,
        beforeModelMs: median(plain.before),
        afterModelMs: median(plain.after),
        overheadMs: median(overhead),
        cpuMs: median(cpu),
        startedMs: median(started),
        depthBeforeModel: median(plain.depth),
        depthAfterModel: median(plain.depthAfter),
        notices: {
          beforeModelMs: noticed.before,
          afterModelMs: noticed.after,
          depthBeforeModel: noticed.depth,
          depthAfterModel: noticed.depthAfter,
        },
      };
    },
  };
}

/** The bench's agent workload (bench/agent-session.ts) at each size, through the harness. */
export async function measureLatency(options: LatencyOptions): Promise<LatencyRow[]> {
  const memory = new MemoryStore();
  const loader = new MemoryTurnDriver(memory);
  const harness = latencyHarness(memory, options);
  const rows: LatencyRow[] = [];
  for (const size of options.sizes) {
    const id = `latency_${size}`;
    await loader.createSession(id, 'You are a helpful agent.');
    const source = agentItems({ seed: options.seed });
    await loadHistory(loader, id, size, source, { appendBatch: 100, turnEveryAppends: 8 });
    options.log?.(`latency ${size}: loaded`);
    rows.push(await harness.measure(id, size));
    options.log?.(`latency ${size}: ${JSON.stringify(rows.at(-1))}`);
  }
  await loader.close();
  return rows;
}
