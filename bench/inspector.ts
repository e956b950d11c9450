import { createApp } from '../functions/app.ts';
import { createServices } from '../functions/services.ts';
import { parseServiceConfig, stringEnv } from '../lib/config.ts';
import type { Item } from '../lib/items.ts';
import { resolveModel } from '../lib/models/resolve-model.ts';
import { CountingStore } from '../test/support/counting-store.ts';
import { MemoryStore } from '../lib/store/memory.ts';
import { packOptions, runTurn, sessionStrategyPlan } from '../lib/turn/index.ts';
import { agentItems } from './agent-session.ts';
import { formatBytes } from './prompt-cache-chart.ts';
import { RecordingStore, summarize } from './recording-store.ts';
import { median } from './stats.ts';
import { READ_FILE_TOOL } from './turn-driver.ts';

/**
 * What the /ui inspector's reads cost as a session grows: each request through the real app
 * (functions/app.ts) on a MemoryStore wrapped in a CountingStore, on a session of `small` items
 * and one of `large`, with `sessions` sessions in the store. The goal: storage calls, bytes
 * read and latency do not grow with the history (the ratio large / small stays near 1).
 *
 * Sessions are loaded directly (no HTTP): the bulk as appends of 250 items, packed every 8
 * appends, then the same tail on every session: 12 rounds of two model turns (the echo model
 * calls a tool, then gets its output) through the turn pipeline with their background work, so
 * the first page of turns and the newest turn look alike at every size.
 */

export interface InspectorOptions {
  sizes: [number, number];
  sessions: number;
  repetitions: number;
  log?: (line: string) => void;
}

export interface InspectorRow {
  request: string;
  /** Per size, in the order of `sizes`. */
  calls: number[];
  lists: number[];
  gets: number[];
  bytesRead: number[];
  medianMs: number[];
  /** Per size: the reads by kind of key (bench/recording-store.ts), most bytes first. */
  reads: { label: string; count: number; bytes: number }[][];
}

export interface InspectorFigures {
  sizes: [number, number];
  sessions: number;
  repetitions: number;
  loadMs: number[];
  rows: InspectorRow[];
  command: string;
}

const TOKEN = 'bench';
/** Items per append, and appends between packs, while loading the bulk of a session. */
const APPEND_BATCH = 250;
const PACK_EVERY_APPENDS = 8;
/** Every session ends with this many rounds of two turns (a call, then its output): 4 items a round. */
const TAIL_ROUNDS = 12;
const TAIL_ITEMS = 4 * TAIL_ROUNDS;

export async function measureInspector(options: InspectorOptions): Promise<InspectorFigures> {
  const log = options.log ?? (() => undefined);
  const memory = new MemoryStore();
  const environment = { DEFAULT_MODEL: 'echo', API_TOKEN: TOKEN };
  const tasks: Promise<unknown>[] = [];
  const services = createServices({
    store: memory,
    config: parseServiceConfig(environment),
    env: stringEnv(environment),
    model: (id) => resolveModel(id, {}),
    background: (task) => {
      tasks.push(task);
    },
    log: (message, details) => console.error(message, details),
    info: () => {},
  });
  const settle = async () => {
    while (tasks.length > 0) await tasks.shift();
  };
  const defaultPack = packOptions(sessionStrategyPlan(services.env, { strategies: null, strategy_config: {} }));
  for (let index = 0; index < options.sessions - options.sizes.length; index++)
    await services.sessions.create({ id: `other_${index}`, metadata: { name: `session ${index}` } });

  const ids: string[] = [];
  const loadMs: number[] = [];
  for (const size of options.sizes) {
    const id = `inspect_${size}`;
    ids.push(id);
    const started = performance.now();
    await services.sessions.create({ id, metadata: { name: `${size} items` } });
    const source = agentItems({ seed: 11, outputBytes: [100, 2_000], argumentBytes: [30, 300] });
    let stored = 0;
    // The bulk: appends, packed as a turn's background work would.
    for (let appends = 1; stored < size - TAIL_ITEMS; appends++) {
      const batch: Item[] = [];
      while (
        batch.length < Math.min(APPEND_BATCH, size - TAIL_ITEMS - stored) ||
        batch.at(-1)?.type === 'function_call'
      )
        batch.push(source.next().value as Item);
      stored = (await services.sessions.append(id, batch)).last_seq;
      if (appends % PACK_EVERY_APPENDS === 0) await services.sessions.pack(id, defaultPack);
    }
    // The same tail on every session: model turns, each round a call and its output.
    for (let round = 0; round < TAIL_ROUNDS; round++) {
      const asked = await runTurn(services, id, {
        input: `call read_file {"path":"src/${round}.ts"}`,
        tools: [READ_FILE_TOOL],
      });
      const call = asked.output.find((item) => item.type === 'function_call');
      if (call?.type !== 'function_call') throw new Error('the echo model did not call the tool');
      const answered = await runTurn(services, id, {
        input: [{ type: 'function_call_output', call_id: call.call_id, output: `line\n`.repeat(100) }],
        tools: [READ_FILE_TOOL],
      });
      stored = answered.output.at(-1)?.seq ?? stored;
      await settle();
    }
    loadMs.push(performance.now() - started);
    log(`inspector: ${id} loaded, ${stored} items in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  }

  const recording = new RecordingStore(memory);
  const counting = new CountingStore(recording);
  const app = createApp({ store: () => counting, readEnvironment: () => environment, log: () => undefined });
  const get = async (path: string) => {
    const response = await app.request(path, { headers: { authorization: `Bearer ${TOKEN}` } });
    if (response.status !== 200) throw new Error(`${path}: ${response.status} ${await response.text()}`);
    return response.json() as Promise<Record<string, unknown>>;
  };
  // The first request of the process probes the store's conditional writes.
  await get('/v1/sessions?limit=1');
  const newestTurn = await Promise.all(
    ids.map(async (id) => ((await get(`/v1/sessions/${id}/turns?limit=1`)).turns as { turn: number }[])[0]!.turn),
  );
  const requests: { request: string; path: (index: number) => string }[] = [
    { request: `GET /v1/sessions (limit 100, ${options.sessions} sessions)`, path: () => '/v1/sessions?limit=100' },
    { request: 'GET /v1/sessions/:id/turns (first page)', path: (index) => `/v1/sessions/${ids[index]}/turns` },
    {
      request: 'GET /v1/sessions/:id/turns/:turn (newest)',
      path: (index) => `/v1/sessions/${ids[index]}/turns/${newestTurn[index]}`,
    },
    {
      request: 'GET /v1/sessions/:id/turns/:turn/items (newest turn, first page)',
      path: (index) => `/v1/sessions/${ids[index]}/turns/${newestTurn[index]}/items`,
    },
    {
      request: 'GET /v1/sessions/:id/items (newest 100)',
      path: (index) => `/v1/sessions/${ids[index]}/items?limit=100`,
    },
  ];
  const rows: InspectorRow[] = [];
  for (const { request, path } of requests) {
    const row: InspectorRow = { request, calls: [], lists: [], gets: [], bytesRead: [], medianMs: [], reads: [] };
    for (let index = 0; index < ids.length; index++) {
      const times: number[] = [];
      for (let repetition = 0; repetition < options.repetitions; repetition++) {
        counting.reset();
        recording.reset();
        const started = performance.now();
        await get(path(index));
        times.push(performance.now() - started);
      }
      const counts = counting.counts;
      row.calls.push(counts.get + counts.head + counts.put + counts.list + counts.delete);
      row.lists.push(counts.list);
      row.gets.push(counts.get + counts.head);
      row.bytesRead.push(counts.bytesRead);
      row.medianMs.push(median(times));
      row.reads.push(
        [...summarize(recording.reset())]
          .map(([label, figures]) => ({ label, ...figures }))
          .sort((a, b) => b.bytes - a.bytes || b.count - a.count),
      );
    }
    rows.push(row);
    const medians = row.medianMs.map((ms) => ms.toFixed(2)).join(' / ');
    log(`inspector: ${request}: ${row.calls.join(' / ')} calls, ${medians} ms`);
  }
  return {
    sizes: options.sizes,
    sessions: options.sessions,
    repetitions: options.repetitions,
    loadMs,
    rows,
    command: 'npm run bench -- --only=inspector',
  };
}

/** The RESULTS.md section. */
export function inspectorSection(figures: InspectorFigures | undefined, notMeasured: string): string[] {
  const title = '## 7. Inspector reads: cost against the length of the history';
  if (!figures) return [title, '', `${notMeasured}.`, ''];
  const [small, large] = figures.sizes.map((size) => size.toLocaleString('en-US'));
  const lines = [
    title,
    '',
    `Command: \`${figures.command}\` (bench/inspector.ts). Each request through the app on the memory store, ` +
      `${figures.repetitions} times; sessions of ${small} and ${large} items ` +
      '(appends, then the same 24 model turns), ' +
      `${figures.sessions} sessions in the store. ` +
      `Storage calls and bytes read are per request; the ratio is ${large} / ${small}.`,
    '',
    `| Request | Calls (lists + gets) ${small} | Calls ${large} | Bytes read ${small} | Bytes read ${large} | ` +
      `Median ms ${small} | Median ms ${large} | Time ratio |`,
    '|---|---|---|---|---|---|---|---|',
  ];
  for (const row of figures.rows) {
    const calls = (index: number) => `${row.calls[index]} (${row.lists[index]} + ${row.gets[index]})`;
    const ratio = (row.medianMs[1]! / row.medianMs[0]!).toFixed(2);
    lines.push(
      `| ${row.request} | ${calls(0)} | ${calls(1)} | ` +
        `${formatBytes(row.bytesRead[0]!)} | ${formatBytes(row.bytesRead[1]!)} | ` +
        `${row.medianMs[0]!.toFixed(2)} | ${row.medianMs[1]!.toFixed(2)} | ${ratio} |`,
    );
  }
  lines.push(
    '',
    `Where the calls and bytes go at ${large} items (bench/recording-store.ts kinds, most bytes first):`,
    '',
  );
  for (const row of figures.rows) {
    const reads = row.reads[1] ?? [];
    const listed = reads.map((entry) => `${entry.label} x${entry.count} ${formatBytes(entry.bytes)}`).join(', ');
    lines.push(`- ${row.request}: ${listed || 'nothing'}`);
  }
  lines.push('');
  return lines;
}
