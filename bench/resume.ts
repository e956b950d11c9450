import type { Model, ModelStreamEvent } from '../lib/models/model.ts';
import { MemoryStore } from '../lib/store/memory.ts';
import { journalEvents, runTurn, streamTurn, type TurnServices } from '../lib/turn/index.ts';
import { CountingStore } from '../test/support/counting-store.ts';
import { DepthStore } from '../test/support/depth-store.ts';
import { turnWorld } from '../test/support/turn-world.ts';
import { SeededRandom } from './random.ts';
import { percentile } from './stats.ts';

/**
 * Resumed streams: a streamed turn whose model sends a delta every `gapMs` for `seconds`, on a
 * store whose every call takes `delayMs` more (as R2 or S3 would). Readers come in at random
 * points of the stream with `Last-Event-ID` set to the events sent so far and follow it through
 * the journal (lib/turn/journal.ts `journalEvents`, what GET .../turns/{turn}/events and the
 * facade's GET /v1/responses/{id}?stream=true read): the lag is when an event reaches a reader
 * minus when the turn emitted it. The storage operations the stream adds are those of the
 * streamed turn minus those of the same turn unstreamed (as long, so the lease renewals are the
 * same), the readers' own reads left out.
 */

export interface ResumeOptions {
  seconds: number;
  gapMs: number;
  delayMs: number;
  readers: number;
  seed: number;
  log?: (line: string) => void;
}

export interface ResumeFigures {
  seconds: number;
  gapMs: number;
  delayMs: number;
  readers: number;
  /** Lags of every event the readers received live, ms. */
  lagP50Ms: number;
  lagP95Ms: number;
  lagMaxMs: number;
  events: number;
  /** Journal batches written (one key each). */
  journalWrites: number;
  /** How long the streamed turn took here (longer than `seconds` on a loaded machine). */
  streamedSeconds: number;
  operationsStreamed: number;
  operationsPlain: number;
}

export const RESUME_LAG_GOAL_MS = 1000;

/** A model streaming `count` words, one every `gapMs`; unstreamed, it answers after the same time. */
function slowModel(count: number, gapMs: number): Model {
  const model: Model = {
    id: 'slow',
    async generate(request) {
      for await (const event of model.stream(request)) if (event.type === 'done') return event.result;
      throw new Error('the stream ended without its result');
    },
    async *stream(): AsyncIterable<ModelStreamEvent> {
      const words = Array.from({ length: count }, (_, index) => `w${index} `);
      for (const delta of words) {
        await new Promise((resolve) => setTimeout(resolve, gapMs));
        yield { type: 'text_delta', delta };
      }
      const text = words.join('');
      const item = { type: 'message' as const, role: 'assistant' as const, content: text };
      yield { type: 'item_done', item };
      yield { type: 'done', result: { output: [item], usage: { input_tokens: 1, output_tokens: count } } };
    },
  };
  return model;
}

function world(inner: DepthStore, model: Model) {
  const store = new CountingStore(inner);
  const { sessions, services } = turnWorld(store, model);
  const background: Promise<unknown>[] = [];
  const counted: TurnServices = { ...services, background: (task) => void background.push(task) };
  return { store, sessions, services: counted, settle: () => Promise.all(background) };
}

export async function measureResume(options: ResumeOptions): Promise<ResumeFigures> {
  const inner = new DepthStore(new MemoryStore(), { delayMs: options.delayMs });
  const count = Math.round((options.seconds * 1000) / options.gapMs);
  const model = slowModel(count, options.gapMs);
  const owner = world(inner, model);
  const readers = world(inner, model);
  await owner.sessions.create({ id: 'plain' });
  await owner.sessions.create({ id: 'streamed' });

  owner.store.reset();
  await runTurn(owner.services, 'plain', { input: 'go' });
  await owner.settle();
  const operationsPlain = owner.store.operations;

  owner.store.reset();
  const emittedAt: number[] = [];
  const lags: number[] = [];
  const random = new SeededRandom(options.seed);
  const started = performance.now();
  const { events, done } = streamTurn(owner.services, 'streamed', { input: 'go' });
  const follow = async (delayMs: number) => {
    await new Promise((resolve) => setTimeout(resolve, delayMs));
    const after = emittedAt.length;
    for await (const event of journalEvents(readers.services, 'streamed', 1, after)) {
      const emitted = emittedAt[event.n - 1];
      if (emitted !== undefined) lags.push(performance.now() - emitted);
    }
  };
  const following = Array.from({ length: options.readers }, () =>
    follow(random.integer(0, options.seconds * 1000 - options.gapMs)),
  );
  for await (const _ of events) emittedAt.push(performance.now());
  await done;
  const streamedSeconds = (performance.now() - started) / 1000;
  await owner.settle();
  await Promise.all(following);
  const operationsStreamed = owner.store.operations;
  const journalWrites = (await inner.inner.list('sessions/streamed/events/')).objects.length;
  options.log?.(
    `  ${options.seconds} s streamed in ${((performance.now() - started) / 1000).toFixed(1)} s, ` +
      `${journalWrites} journal writes, lag p50 ${Math.round(percentile(lags, 50))} ms`,
  );
  return {
    seconds: options.seconds,
    gapMs: options.gapMs,
    delayMs: options.delayMs,
    readers: options.readers,
    lagP50Ms: percentile(lags, 50),
    lagP95Ms: percentile(lags, 95),
    lagMaxMs: Math.max(...lags),
    events: lags.length,
    journalWrites,
    streamedSeconds,
    operationsStreamed,
    operationsPlain,
  };
}

export function resumeSection(figures: ResumeFigures | undefined, notMeasured: string): string[] {
  const title = '## 10. Resumed streams: reader lag and journal writes';
  if (!figures) return [title, '', `${notMeasured}.`, ''];
  const ms = (value: number) => `${Math.round(value)} ms`;
  const added = figures.operationsStreamed - figures.operationsPlain;
  const writeGoal = Math.ceil(figures.seconds) + 2;
  const met = (ok: boolean) => (ok ? 'met' : '**missed**');
  return [
    title,
    '',
    'Command: `npm run bench -- --only=resume` (bench/resume.ts). A streamed turn whose model sends a delta every ' +
      `${figures.gapMs} ms for ${figures.seconds} s, every storage call ${figures.delayMs} ms slower; ` +
      `${figures.readers} readers come in at random points with Last-Event-ID set to the events sent so far and ` +
      "follow the turn's event journal (what GET .../turns/{turn}/events and GET /v1/responses/{id}?stream=true " +
      'read). Lag: when an event reaches a reader minus when the turn emitted it, over the ' +
      `${figures.events} events the readers got live.`,
    '',
    '| lag p50 | lag p95 | lag max | journal writes | operations, streamed / plain turn | added by the stream |',
    '|---|---|---|---|---|---|',
    `| ${ms(figures.lagP50Ms)} | ${ms(figures.lagP95Ms)} | ${ms(figures.lagMaxMs)} | ${figures.journalWrites} | ` +
      `${figures.operationsStreamed} / ${figures.operationsPlain} | ${added} |`,
    '',
    `Goals: lag at most ${RESUME_LAG_GOAL_MS} ms at p50 (${met(figures.lagP50Ms <= RESUME_LAG_GOAL_MS)}); ` +
      `at most one write a second of streaming plus 2, ${writeGoal} here ` +
      `(${met(added <= writeGoal)}: ${added} added).`,
    '',
  ];
}
