import { createApp } from '../functions/app.ts';
import { createServices } from '../functions/services.ts';
import { parseServiceConfig, stringEnv } from '../lib/config.ts';
import type { Item } from '../lib/items.ts';
import { resolveModel } from '../lib/models/resolve-model.ts';
import { CountingStore } from '../lib/store/counting-store.ts';
import { MemoryStore } from '../lib/store/memory.ts';
import { runTurn } from '../lib/turn.ts';
import { agentItems } from './agent-session.ts';
import { formatBytes } from './prompt-cache-chart.ts';
import { median } from './stats.ts';

/**
 * What the /ui inspector's reads cost as a session grows: each request through the real app
 * (functions/app.ts) on a MemoryStore wrapped in a CountingStore, on a session of `small` items
 * and one of `large`, with `sessions` sessions in the store. The goal: storage calls, bytes
 * read and latency do not grow with the history (the ratio large / small stays near 1).
 *
 * Sessions are loaded through the session log and the turn pipeline directly (no HTTP): appends
 * of 100 items, a model turn (the echo model) every 4 appends, and the background work they
 * start (packing, the index).
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
/** Items per append, and appends per model turn, while loading. */
const APPEND_BATCH = 100;
const APPENDS_PER_TURN = 4;

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
  });
  const settle = async () => {
    while (tasks.length > 0) await tasks.shift();
  };
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
    for (let appends = 1; stored < size; appends++) {
      const batch: Item[] = [];
      while (batch.length < Math.min(APPEND_BATCH, size - stored - 2) || batch.at(-1)?.type === 'function_call')
        batch.push(source.next().value as Item);
      stored = (await services.sessions.append(id, batch)).last_seq;
      if (appends % APPENDS_PER_TURN === 0 || stored >= size - 2) {
        const response = await runTurn(services, id, { input: 'continue' });
        stored = response.output.at(-1)?.seq ?? stored;
      }
      await settle();
    }
    loadMs.push(performance.now() - started);
    log(`inspector: ${id} loaded, ${stored} items in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  }

  const counting = new CountingStore(memory);
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
    const row: InspectorRow = { request, calls: [], lists: [], gets: [], bytesRead: [], medianMs: [] };
    for (let index = 0; index < ids.length; index++) {
      const times: number[] = [];
      for (let repetition = 0; repetition < options.repetitions; repetition++) {
        counting.reset();
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
    }
    rows.push(row);
    log(
      `inspector: ${request}: ${row.calls.join(' / ')} calls, ${row.medianMs.map((ms) => ms.toFixed(2)).join(' / ')} ms`,
    );
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
      `${figures.repetitions} times; sessions of ${small} and ${large} items (appends of 100 items, a turn every 4 appends), ` +
      `${figures.sessions} sessions in the store. Storage calls and bytes read are per request; the ratio is ${large} / ${small}.`,
    '',
    `| Request | Calls (lists + gets) ${small} | Calls ${large} | Bytes read ${small} | Bytes read ${large} | Median ms ${small} | Median ms ${large} | Time ratio |`,
    '|---|---|---|---|---|---|---|---|',
  ];
  for (const row of figures.rows) {
    const calls = (index: number) => `${row.calls[index]} (${row.lists[index]} + ${row.gets[index]})`;
    lines.push(
      `| ${row.request} | ${calls(0)} | ${calls(1)} | ${formatBytes(row.bytesRead[0]!)} | ${formatBytes(row.bytesRead[1]!)} | ` +
        `${row.medianMs[0]!.toFixed(2)} | ${row.medianMs[1]!.toFixed(2)} | ${(row.medianMs[1]! / row.medianMs[0]!).toFixed(2)} |`,
    );
  }
  lines.push('');
  return lines;
}
