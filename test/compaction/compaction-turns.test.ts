import { describe, expect, it } from 'vitest';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import { compactSession } from '../../lib/turn/compact-session.ts';
import { parseServiceConfig } from '../../lib/config.ts';
import { TailgateError } from '../../lib/errors.ts';
import { Inbox } from '../../lib/inbox/inbox.ts';
import { echoModel } from '../../lib/models/echo.ts';
import { convertToModelMessages } from '../../lib/models/convert-to-model-messages.ts';
import type { Model, ModelRequest } from '../../lib/models/model.ts';
import type { Item, PromptItem } from '../../lib/items.ts';
import type { CompactionSpend } from '../../lib/turn/types.ts';
import { ModelError } from '../../lib/models/errors.ts';
import { contextKey, recordsPrefix } from '../../lib/session/keys.ts';
import { indexPrefix } from '../../lib/session/log/session-index.ts';
import { SessionLog } from '../support/session-log.ts';
import { recordingModel, servicesFor } from '../support/recording-model.ts';
import { CountingStore } from '../support/counting-store.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { hookedEcho } from '../support/turn-world.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import {
  previewPrompt,
  runInProcess,
  runTurn,
  streamTurn,
  takeUnderPolicy,
  type TurnEvent,
  type TurnServices,
} from '../../lib/turn/index.ts';

/** A tiny window, so a few turns of echo overflow it: prompt limit 1000 - 200 = 800 tokens. */
const BUDGET = { context_limit: 1000, response_reserve: 200 };

function services(
  store: ObjectStore,
  options: { model?: Model; env?: Record<string, string> } = {},
): TurnServices & { sessions: SessionLog; settled: () => Promise<unknown> } {
  // The tasks handed over after responses (they start on a timer), until they settle.
  const pending = new Set<Promise<unknown>>();
  return {
    sessions: new SessionLog(store),
    inbox: new Inbox(store, { sessionExists: sessionExistsIn(store, '') }),
    config: parseServiceConfig(options.env ?? {}),
    clock: () => new Date(),
    env: options.env ?? {},
    model: (id) => (id === 'echo' || !options.model ? echoModel : options.model),
    background: (task) => {
      const settled: Promise<unknown> = task.catch(() => undefined).finally(() => pending.delete(settled));
      pending.add(settled);
    },
    settled: () => Promise.all(pending),
    startBackground(run) {
      return runInProcess(this, run);
    },
    log: () => {},
    info: () => {},
  };
}

async function createSession(
  service: TurnServices & { sessions: SessionLog },
  id = 's1',
  strategies = 'shorten_tools_epoch_increment,compact,inbox',
) {
  await service.sessions.create({ id, model: 'echo', strategies, strategy_config: BUDGET });
}

/** Runs turns of ~`size` characters each until one compacts; returns that turn's response. */
async function turnsUntilCompaction(service: TurnServices, id = 's1', size = 600) {
  for (let index = 1; index <= 40; index++) {
    const response = await runTurn(service, id, { input: `turn ${index} ${'w'.repeat(size)}` });
    if (response.context.compaction) return { response, turns: index };
  }
  throw new Error('no compaction happened');
}

async function allItems(log: SessionLog, id: string) {
  const items = [];
  let before: number | undefined;
  for (;;) {
    const page = await log.listItems(id, { limit: 7, ...(before !== undefined ? { before } : {}) });
    items.push(...page.items);
    if (!page.has_more) break;
    before = page.next_before!;
  }
  return items;
}

describe('compaction in a turn', () => {
  it(
    'summarizes the oldest part past the trigger, opens the prompt with the summary, and keeps the whole ' + 'history',
    async () => {
      const store = new MemoryStore();
      const service = services(store);
      await createSession(service);
      const { response, turns } = await turnsUntilCompaction(service);
      const compaction = response.context.compaction!;
      expect(compaction.summarized.first_seq).toBe(1);
      expect(response.context.context_start_seq).toBe(compaction.start_seq);
      expect(response.context.prompt_tokens).toBeLessThanOrEqual(800);
      // The newest input is kept whole, and the echo answer is to it.
      expect(response.output[0]).toMatchObject({ content: `echo: turn ${turns} ${'w'.repeat(600)}` });

      const preview = await previewPrompt(service, 's1', {});
      expect(preview.items[0]).toMatchObject({ type: 'message', role: 'user', synthetic: 'summary' });
      expect(preview.items[0]!.type === 'message' && preview.items[0]!.content).toContain('echo: #1 user: turn 1');
      expect(preview.items.slice(1).every((item) => item.seq! >= compaction.start_seq)).toBe(true);
      expect(preview.context.context_start_seq).toBe(compaction.start_seq);

      // Every item is still stored and reached by paging, densely.
      const items = await allItems(service.sessions, 's1');
      expect(items.map((item) => item.seq)).toEqual(Array.from({ length: 2 * turns }, (_, index) => 2 * turns - index));

      // The next turn reads only the current context: its prompt starts with the same summary.
      const next = await runTurn(service, 's1', { input: 'after' });
      expect(next.context.context_start_seq).toBe(compaction.start_seq);
      expect(next.context.compaction).toBeUndefined();
    },
  );

  it('keeps compacting as the session grows: each summary folds in the previous one', async () => {
    const service = services(new MemoryStore());
    await createSession(service);
    const first = (await turnsUntilCompaction(service)).response.context.compaction!;
    const second = (await turnsUntilCompaction(service)).response.context.compaction!;
    expect(second.start_seq).toBeGreaterThan(first.start_seq);
    expect(second.summarized.first_seq).toBe(1);
    const preview = await previewPrompt(service, 's1', {});
    const summary = preview.items[0]!;
    expect(summary.type === 'message' && summary.content).toContain('Earlier summary: echo: ');
  });

  it('bytes read per turn after compaction do not depend on the length of the history', async () => {
    const measure = async (turnsBefore: number) => {
      const counting = new CountingStore(new MemoryStore());
      const service = services(counting);
      // Packing is run between phases, not concurrently with the measured turn.
      const log = service.sessions;
      const pack = () => SessionLog.prototype.pack.call(log, 's1');
      log.pack = async () => ({ packed: false, deleted: 0 });
      await createSession(service, 's1', 'compact');
      // Long history first (no compaction: no limit for echo without a budget)...
      await service.sessions.update('s1', { strategy_config: {} });
      for (let index = 0; index < turnsBefore; index++) {
        await runTurn(service, 's1', { input: `old ${index} ${'o'.repeat(300)}` });
        if (index % 4 === 3) await pack();
      }
      // ...then a manual compaction that keeps nothing, and a few turns in the new context.
      await compactSession(service, 's1', { keep_tokens: 0 });
      for (let index = 0; index < 3; index++) await runTurn(service, 's1', { input: `new ${index}` });
      await pack();
      // The earlier turns' background work done, so none of its reads counts as the measured turn's.
      await service.settled();
      counting.reset();
      await runTurn(service, 's1', { input: 'measured' });
      return counting.counts.bytesRead;
    };
    // Both histories are long enough for the summary to reach its cap; the second is 4 times longer.
    const short = await measure(48);
    const long = await measure(192);
    expect(long).toBeLessThan(short * 1.1 + 1024);
  });

  it('a streamed turn compacts before turn.started, and a request-level budget overrides the session', async () => {
    const service = services(new MemoryStore());
    await service.sessions.create({ id: 's1', model: 'echo', strategies: 'compact' });
    for (let index = 0; index < 6; index++) await runTurn(service, 's1', { input: `turn ${index} ${'q'.repeat(300)}` });
    const { events, done } = streamTurn(service, 's1', {
      input: 'streamed',
      strategy_config: { context_limit: 600, response_reserve: 100 },
    });
    const seen: TurnEvent[] = [];
    for await (const event of events) seen.push(event);
    await done;
    expect(seen[0]!.event).toBe('turn.started');
    const completed = seen.find((event) => event.event === 'turn.completed');
    expect(completed && completed.event === 'turn.completed' && completed.data.context.compaction).toMatchObject({
      summarized: { first_seq: 1 },
    });
  });

  it('a call left without output at the cut becomes an interruption note; the tool is not run again', async () => {
    const service = services(new MemoryStore());
    await createSession(service);
    await service.sessions.append('s1', [
      { type: 'message', role: 'user', content: 'look it up' },
      { type: 'function_call', call_id: 'lost', name: 'lookup', arguments: '{}' },
    ]);
    const { response } = await turnsUntilCompaction(service);
    expect(response.context.compaction!.interrupted).toEqual(['lost']);
    const preview = await previewPrompt(service, 's1', {});
    expect(preview.items.some((item) => item.type === 'function_call')).toBe(false);
    const summary = preview.items[0]!;
    expect(summary.type === 'message' && summary.content).toContain('tool call lookup({}) was interrupted');
  });

  it(
    'the output of a call compaction summarized as interrupted, sent late, reaches the model as user text where it ' +
      'stands, in that turn and every later one, as the preview shows it',
    async () => {
      const prompts: ModelRequest[] = [];
      const recording: Model = {
        ...echoModel,
        id: 'recording',
        generate: (request) => {
          prompts.push(request);
          return echoModel.generate(request);
        },
      };
      const service = services(new MemoryStore(), { model: recording });
      await createSession(service);
      await service.sessions.update('s1', { model: 'recording' });
      await service.sessions.append('s1', [
        { type: 'message', role: 'user', content: 'look it up' },
        { type: 'function_call', call_id: 'lost', name: 'lookup', arguments: '{}' },
      ]);
      const { response } = await turnsUntilCompaction(service);
      expect(response.context.compaction!.interrupted).toEqual(['lost']);
      // Packed: the turns after it read the context from segments and a view, not the records.
      await service.settled();
      await service.sessions.pack('s1', { refresh: true });
      const late = await runTurn(service, 's1', {
        input: [{ type: 'function_call_output', call_id: 'lost', output: 'LATE RESULT' }],
      });
      const sent = (items: readonly PromptItem[]) =>
        convertToModelMessages([...items]).filter((message) => JSON.stringify(message).includes('LATE RESULT'));
      const asText = [{ role: 'user', content: [{ type: 'text', text: 'Output of tool call lost:\nLATE RESULT' }] }];
      // The turn's own prompt (its last model call: a compaction summary may come before it).
      expect(sent(prompts.at(-1)!.prompt)).toEqual(asText);
      expect(late.context.tool_calls_total).toBe(
        late.context.kept_full + late.context.compacted + late.context.dropped,
      );
      const preview = await previewPrompt(service, 's1', {});
      expect(sent(preview.items)).toEqual(asText);
      // Where it stands: right after the items before it, the next prompt begins as this one did.
      const seqOf = (items: readonly PromptItem[]) =>
        items.find((item) => item.type === 'function_call_output' && item.call_id === 'lost')?.seq;
      expect(seqOf(preview.items)).toBe(seqOf(prompts.at(-1)!.prompt));
      await service.settled();
      await service.sessions.pack('s1', { refresh: true });
      await runTurn(service, 's1', { input: 'and then' });
      expect(sent(prompts.at(-1)!.prompt)).toEqual(asText);
      // The summarized call is never read back into a prompt.
      for (const request of prompts.slice(-2))
        expect(request.prompt.some((item) => item.type === 'function_call' && item.call_id === 'lost')).toBe(false);
    },
  );

  it(
    'refuses a prompt that still does not fit with context_too_large, naming the item; the turn is closed as ' +
      'failed with its input',
    async () => {
      const service = services(new MemoryStore());
      await createSession(service);
      await runTurn(service, 's1', { input: 'small' });
      const error = await runTurn(service, 's1', { input: 'x'.repeat(5000) }).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(TailgateError);
      expect(error).toMatchObject({ code: 'context_too_large', details: { item: { seq: 3 }, prompt_limit: 800 } });
      const items = await allItems(service.sessions, 's1');
      expect(items[0]).toMatchObject({ seq: 3, content: 'x'.repeat(5000) });
      // The turn is closed: the next one goes ahead.
      await expect(runTurn(service, 's1', { input: 'fine again' })).resolves.toMatchObject({ turn: 3 });
    },
  );

  it('a model with a known window is refused before the provider is called, with or without compact', async () => {
    let called = false;
    const provider: Model = {
      id: 'openai:gpt-4',
      generate: async () => {
        called = true;
        return { output: [], usage: { input_tokens: 0, output_tokens: 0 } };
      },
      stream: async function* () {},
    };
    const service = services(new MemoryStore(), { model: provider });
    await service.sessions.create({ id: 's1', model: 'openai:gpt-4', strategies: 'none' });
    await expect(runTurn(service, 's1', { input: 'y'.repeat(40_000) })).rejects.toMatchObject({
      code: 'context_too_large',
    });
    expect(called).toBe(false);
  });
});

describe('compaction is durable and idempotent', () => {
  it('a crash between the summary and the commit leaves the previous context', async () => {
    const memory = new MemoryStore();
    const faulty = new FaultyStore(memory);
    const service = services(faulty);
    await createSession(service);
    // The completion of the turn that compacts fails: its summary is stored but never committed.
    let summaryStored = false;
    faulty.failWhen(({ operation, key }) => {
      if (operation === 'put' && key.includes('/context/')) summaryStored = true;
      return operation === 'put' && key.endsWith('.done') && summaryStored;
    });
    const error = await turnsUntilCompaction(service).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(TailgateError);
    faulty.heal();
    const contexts = await memory.list('sessions/s1/context/');
    expect(contexts.objects).toHaveLength(1);
    expect(await service.sessions.currentContext('s1')).toBeNull();
    // After the lease, the next turn closes the crashed one with the old (no) context.
    const later = services(memory);
    const clock = new Date(Date.now() + 10 * 60_000);
    later.sessions = new SessionLog(memory, { clock: () => clock });
    const response = await runTurn(later, 's1', { input: 'after the crash' });
    expect(response.context.context_start_seq === undefined || response.context.compaction !== undefined).toBe(true);
  });

  it('of 8 concurrent manual compactions one calls the model, the others are refused; it is charged', async () => {
    const memory = new MemoryStore();
    let refused = 0;
    let entered = 0;
    let open!: () => void;
    const othersDone = new Promise<void>((resolve) => (open = resolve));
    const answered = () => refused + entered === 8 && open();
    // A summary call waits until every compaction was refused or called the model.
    const gated = hookedEcho('gated', () => {
      entered++;
      answered();
      return othersDone;
    });
    const observed: CompactionSpend[] = [];
    const service = {
      ...services(memory, { model: gated }),
      observeCompaction: (spend: CompactionSpend) => observed.push(spend),
    };
    await createSession(service, 's1', 'none');
    for (let index = 0; index < 6; index++) await runTurn(service, 's1', { input: `turn ${index} ${'v'.repeat(100)}` });
    const before = (await service.sessions.get('s1')).usage;
    const results = await Promise.allSettled(
      Array.from({ length: 8 }, () =>
        compactSession(service, 's1', { keep_tokens: 50, model: 'gated' }).catch((error: unknown) => {
          refused++;
          answered();
          throw error;
        }),
      ),
    );
    const answers = results.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
    expect(answers).toMatchObject([{ compacted: true }]);
    for (const result of results)
      if (result.status === 'rejected') expect(result.reason).toMatchObject({ code: 'turn_in_progress' });
    // The metrics' compaction tokens are what the session's totals took.
    expect(observed).toHaveLength(1);
    const after = (await service.sessions.get('s1')).usage;
    expect(after.input_tokens - before.input_tokens).toBe(observed[0]!.usage.input_tokens);
    expect(after.output_tokens - before.output_tokens).toBe(observed[0]!.usage.output_tokens);
    expect((await memory.list('sessions/s1/context/')).objects).toHaveLength(1);
    const records = await memory.list(recordsPrefix(await service.sessions.scope('s1')));
    const bodies = await Promise.all(
      records.objects
        .filter((object) => !object.key.endsWith('.done') && !object.key.endsWith('.lease'))
        .map(async (object) => JSON.parse(new TextDecoder().decode((await memory.get(object.key))!.body))),
    );
    // Newest first: the record that moves the context and ends the claim, then the claim.
    const compacts = bodies.filter((body) => body.kind === 'compact');
    expect(compacts).toMatchObject([{ context: answers[0]!.context! }, { lease_expires_at: expect.any(String) }]);
    expect(compacts[0].lease_expires_at).toBeUndefined();
    // A second call with nothing older than the kept part does nothing.
    expect((await compactSession(service, 's1', { keep_tokens: 50 })).compacted).toBe(false);
  });

  it('a lost answer to the summary put is recovered: the stored summary is the compaction', async () => {
    const memory = new MemoryStore();
    const faulty = new FaultyStore(memory);
    const service = services(faulty);
    await createSession(service, 's1', 'none');
    for (let index = 0; index < 4; index++) await runTurn(service, 's1', { input: `turn ${index}` });
    const summaryKey = contextKey(await service.sessions.scope('s1'), 4);
    faulty.failWhen(({ operation, key }) => operation === 'put' && key === summaryKey, { after: true, times: 1 });
    const result = await compactSession(service, 's1', { keep_tokens: 0 });
    expect(result).toMatchObject({ compacted: true, context: { start_seq: 9 } });
    expect(await service.sessions.currentContext('s1')).toMatchObject({ start_seq: 9, base_record: 4 });
  });

  it("with input: the session's listing row is written once, for the input and the summary", async () => {
    let failing = false;
    const broken = hookedEcho('broken', async () => {
      if (failing) throw new ModelError('provider down', { model: 'broken' });
    });
    const store = new CountingStore(new MemoryStore());
    const service = services(store, { model: broken });
    await createSession(service, 's1', 'none');
    for (let index = 0; index < 4; index++) await runTurn(service, 's1', { input: `turn ${index}` });
    await service.settled();
    const indexPuts = () => store.putKeys.filter((key) => key.startsWith(indexPrefix(''))).length;
    const row = async () => (await service.sessions.listSessions({ limit: 10 })).sessions[0]!;
    const before = await row();
    store.reset();
    const input: Item[] = [{ type: 'message', role: 'user', content: 'one more' }];
    const result = await compactSession(service, 's1', { keep_tokens: 0, model: 'broken' }, input);
    expect(result).toMatchObject({ compacted: true, context: { start_seq: 10 } });
    await service.settled();
    expect(indexPuts()).toBe(1);
    const after = await row();
    expect(after.counts).toMatchObject({ items: 9 });
    expect(after.usage!.output_tokens).toBe(before.usage!.output_tokens + result.usage!.output_tokens);

    // A compaction that fails after its input was appended: the row still takes the input, once.
    failing = true;
    store.reset();
    await expect(compactSession(service, 's1', { keep_tokens: 0, model: 'broken' }, input)).rejects.toThrow(
      'provider down',
    );
    await service.settled();
    expect(indexPuts()).toBe(1);
    expect((await row()).counts).toMatchObject({ items: 10 });
  });

  it('an open turn refuses a manual compaction (turn_in_progress)', async () => {
    const service = services(new MemoryStore());
    await createSession(service, 's1', 'none');
    await service.sessions.beginTurn('s1', { input: [{ type: 'message', role: 'user', content: 'open' }] });
    await expect(compactSession(service, 's1', {})).rejects.toMatchObject({ code: 'turn_in_progress' });
  });
});

describe("a manual compaction's end", () => {
  /** A session of 4 turns whose summaries are written by `model` ('held'). */
  async function heldSession(model: Model, env?: Record<string, string>) {
    const service = services(new MemoryStore(), { model, ...(env && { env }) });
    await createSession(service, 's1', 'none');
    for (let index = 0; index < 4; index++) await runTurn(service, 's1', { input: `turn ${index}` });
    return service;
  }

  it('takes up an input queued behind it once it released the session, as a turn ends', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let summarizing!: () => void;
    const started = new Promise<void>((resolve) => (summarizing = resolve));
    const service = await heldSession(
      hookedEcho('held', async () => {
        summarizing();
        await held;
      }),
    );
    const running = compactSession(service, 's1', { keep_tokens: 0, model: 'held' });
    await started;
    const queued = await takeUnderPolicy(service, 's1', { input: 'queued' }, { onBusy: 'enqueue' }, (busy) =>
      runTurn(busy, 's1', { input: 'queued' }),
    );
    expect(queued.kind).toBe('queued');
    // The pickup after the enqueue finds the session held, and leaves the input queued.
    await service.settled();
    release();
    expect(await running).toMatchObject({ compacted: true });
    await service.settled();
    expect(await service.sessions.queued(await service.sessions.scope('s1'))).toEqual([]);
    expect((await service.sessions.get('s1')).counts.turns).toBe(5);
  });

  it('a summary model that never answers fails it by MODEL_TIMEOUT_MS and releases the session', async () => {
    const never: Model = { id: 'never', generate: () => new Promise(() => {}), stream: echoModel.stream };
    const service = await heldSession(never, { MODEL_TIMEOUT_MS: '50' });
    const before = (await service.sessions.get('s1')).usage;
    await expect(compactSession(service, 's1', { keep_tokens: 0, model: 'never' })).rejects.toMatchObject({
      code: 'model_timeout',
    });
    // Nothing was summarized, but the provider worked on the call and bills it: the session is
    // charged the summary prompt's tokens, estimated, as no turn. Released at once: the next turn
    // is not refused.
    const after = (await service.sessions.get('s1')).usage;
    expect(after).toMatchObject({ turns: before.turns, output_tokens: before.output_tokens });
    expect(after.input_tokens).toBeGreaterThan(before.input_tokens);
    expect(await service.sessions.currentContext('s1')).toBeNull();
    expect(await runTurn(service, 's1', { input: 'after' })).toMatchObject({ turn: 5 });
  });
});

describe('the turn that compacts a tail view', () => {
  it('builds the prompt the next turn builds from the context it keeps, as its preview shows it', async () => {
    const store = new MemoryStore();
    const sessions = new SessionLog(store);
    const prompts: ModelRequest[] = [];
    const model = recordingModel(prompts, () => ({
      output: [{ type: 'message', role: 'assistant', content: 'ok' }],
      usage: { input_tokens: 1, output_tokens: 1 },
    }));
    const services = servicesFor(sessions, store, model);
    await sessions.create({
      id: 's1',
      strategies: ['shorten_tools_epoch', 'compact'],
      strategy_config: {
        epoch_tool_call_threshold: 10,
        epoch_size: 5,
        epoch_full_tool_calls: 0,
        epoch_compacted_tool_calls: 0,
        context_limit: 5000,
      },
    });
    // 60 calls with tiny outputs, each followed by a longer message: the epoch strategy's tail
    // view holds every message but only the newest calls, and the compaction keeps more than that.
    for (let index = 1; index <= 60; index++)
      await sessions.append('s1', [
        { type: 'function_call', call_id: `c${index}`, name: 'read', arguments: `{"n":${index}}` },
        { type: 'function_call_output', call_id: `c${index}`, output: `r${index}` },
        { type: 'message', role: 'assistant', content: `${index} `.padEnd(200, 'm') },
      ]);
    await services.settle();
    const tools = (prompt: readonly PromptItem[]) =>
      prompt.filter((item) => item.type !== 'message').map((item) => JSON.stringify({ ...item, seq: undefined }));
    const preview = await previewPrompt(services, 's1', {});
    const compacting = await runTurn(services, 's1', { input: 'go' });
    expect(compacting.context.compaction).toBeDefined();
    await services.settle();
    const next = await runTurn(services, 's1', { input: 'again' });
    await services.settle();

    // Nothing but 'go', 'ok' and 'again' came in between: the same context, the same calls.
    expect(compacting.context.tool_calls_total).toBe(next.context.tool_calls_total);
    expect(prompts).toHaveLength(3); // the summary, the compacting turn, the next turn
    expect(tools(prompts[1]!.prompt)).toEqual(tools(prompts[2]!.prompt));
    expect(tools(preview.items)).toEqual(tools(prompts[1]!.prompt));
  });
});
