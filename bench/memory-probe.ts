/**
 * Child process of the heap benchmark (run with --expose-gc): builds a session of `items`
 * stored items on a MemoryStore, then measures the heap of single turns. Prints one JSON
 * line (HeapProbeResult) on stdout.
 */
import type { Item } from '../lib/items.ts';
import { MemoryStore } from '../lib/store/memory.ts';
import type { Body, GetOptions, ListOptions, ObjectStore, PutOptions } from '../lib/store/object-store.ts';
import { agentItems } from './agent-session.ts';
import { MemoryTurnDriver } from './memory-driver.ts';
import { READ_FILE_TOOL } from './turn-driver.ts';

export interface HeapProbeOptions {
  items: number;
  seed: number;
  turns: number;
}

export interface HeapProbeResult {
  items: number;
  /** Per measured turn: highest heapUsed seen during the turn minus heapUsed after a full GC before it. */
  peakGrowthBytes: number[];
  /** heapUsed after a full GC before each turn (includes the MemoryStore's own objects). */
  baselineBytes: number[];
  /** heapUsed after a full GC after each turn minus the baseline before it. */
  retainedBytes: number[];
  samplesPerTurn: number[];
  promptCharacters: number[];
}

/** A store that samples the heap around every call (the probes' peak-heap method). */
export class SamplingStore implements ObjectStore {
  readonly inner: ObjectStore;
  readonly sample: () => void;

  constructor(inner: ObjectStore, sample: () => void) {
    this.inner = inner;
    this.sample = sample;
  }
  async get(key: string, options?: GetOptions) {
    this.sample();
    const result = await this.inner.get(key, options);
    this.sample();
    return result;
  }
  async head(key: string) {
    this.sample();
    return this.inner.head(key);
  }
  async put(key: string, body: Body, options?: PutOptions) {
    this.sample();
    return this.inner.put(key, body, options);
  }
  async list(prefix: string, options?: ListOptions) {
    this.sample();
    const result = await this.inner.list(prefix, options);
    this.sample();
    return result;
  }
  async delete(keys: string | string[]) {
    this.sample();
    return this.inner.delete(keys);
  }
}

export async function probeTurnHeap(options: HeapProbeOptions): Promise<HeapProbeResult> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with --expose-gc');
  let peak = 0;
  let samples = 0;
  let sampling = false;
  const sample = () => {
    if (!sampling) return;
    samples += 1;
    const used = process.memoryUsage().heapUsed;
    if (used > peak) peak = used;
  };
  const driver = new MemoryTurnDriver(new SamplingStore(new MemoryStore(), sample));
  const id = 'heap_probe';
  await driver.createSession(id, 'You are a coding agent.');
  const source = agentItems({ seed: options.seed });
  let stored = 0;
  let appends = 0;
  while (stored < options.items) {
    const batch: Item[] = [];
    while (batch.length < Math.min(250, options.items - stored) || batch.at(-1)?.type === 'function_call')
      batch.push(source.next().value as Item);
    stored = await driver.append(id, batch);
    if (++appends % 8 === 0) await driver.pack(id);
  }
  await driver.pack(id);
  const result: HeapProbeResult = {
    items: stored,
    peakGrowthBytes: [],
    baselineBytes: [],
    retainedBytes: [],
    samplesPerTurn: [],
    promptCharacters: [],
  };
  const warmup = 2;
  for (let index = 0; index < warmup + options.turns; index++) {
    gc();
    gc();
    const baseline = process.memoryUsage().heapUsed;
    peak = baseline;
    samples = 0;
    sampling = true;
    const timer = setInterval(sample, 1);
    const turn = await driver.turn(id, {
      input: `call read_file {"path":"src/heap-${index}.ts"}`,
      tools: [READ_FILE_TOOL],
    });
    sample();
    clearInterval(timer);
    sampling = false;
    gc();
    gc();
    const after = process.memoryUsage().heapUsed;
    if (index < warmup) continue;
    result.peakGrowthBytes.push(peak - baseline);
    result.baselineBytes.push(baseline);
    result.retainedBytes.push(after - baseline);
    result.samplesPerTurn.push(samples);
    result.promptCharacters.push(turn.response.context.prompt_chars);
  }
  return result;
}

const invokedDirectly = process.argv[1] !== undefined && import.meta.url.endsWith(process.argv[1].replace(/\\/g, '/'));
if (invokedDirectly) {
  const options = JSON.parse(process.argv[2] ?? '{}') as HeapProbeOptions;
  probeTurnHeap(options).then(
    (result) => {
      process.stdout.write(`${JSON.stringify(result)}\n`);
    },
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
