import fc from 'fast-check';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { parseServiceConfig } from '../../lib/config.ts';
import { Inbox } from '../../lib/inbox/inbox.ts';
import { echoModel } from '../../lib/models/echo.ts';
import type { PromptItem } from '../../lib/items.ts';
import type { Model, ModelRequest } from '../../lib/models/model.ts';
import { SessionLog, type PackOptions } from '../support/session-log.ts';
import { CountingStore } from '../support/counting-store.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { isContextNotice } from '../../lib/strategies/context-notice.ts';
import { receiptRanges } from '../../lib/turn/receipt.ts';
import { promptShape, reusedPrefixChars } from '../../lib/prompt-shape.ts';
import {
  previewPrompt,
  promptCharacters,
  runInProcess,
  runTurn,
  seqRanges,
  streamTurn,
  type TurnEvent,
  type TurnServices,
} from '../../lib/turn/index.ts';

function services(
  model: Model = echoModel,
): TurnServices & { sessions: SessionLog; inbox: Inbox; pending: Promise<unknown>[]; store: MemoryStore } {
  const store = new MemoryStore();
  const pending: Promise<unknown>[] = [];
  return {
    sessions: new SessionLog(store),
    inbox: new Inbox(store, { sessionExists: sessionExistsIn(store, '') }),
    config: parseServiceConfig({}),
    clock: () => new Date(),
    env: {},
    model: (id) => (id === 'recording' ? model : echoModel),
    background: (task) => void pending.push(task),
    startBackground(run) {
      return runInProcess(this, run);
    },
    log: () => {},
    info: () => {},
    pending,
    store,
  };
}

/** Every key, etag and body in the store. */
async function snapshot(store: MemoryStore): Promise<string> {
  const listed = await store.list('', { limit: 1000 });
  const objects = await Promise.all(
    listed.objects.map(async (object) => [
      object.key,
      object.etag,
      new TextDecoder().decode((await store.get(object.key))!.body),
    ]),
  );
  return JSON.stringify(objects);
}

/** A model that answers like echo and keeps every request it was sent. */
function recordingModel(): Model & { requests: ModelRequest[] } {
  const requests: ModelRequest[] = [];
  return {
    id: 'recording',
    requests,
    generate: (request) => {
      requests.push(request);
      return echoModel.generate(request);
    },
    stream: (request) => {
      requests.push(request);
      return echoModel.stream(request);
    },
  };
}

describe('seqRanges', () => {
  it.each([
    [[], ''],
    [[3], '3'],
    [[1, 2, 3, 5, 7, 8], '1-3,5,7-8'],
    [[8, 7, 1], '1,7-8'],
  ])('%j -> %j', (seqs, expected) => {
    expect(seqRanges(seqs)).toBe(expected);
  });

  it('expands back to the sorted seqs', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.integer({ min: 1, max: 500 }), { size: 'max', maxLength: 80 }), (seqs) => {
        const expanded = seqRanges(seqs)
          .split(',')
          .filter((part) => part !== '')
          .flatMap((part) => {
            const [low, high] = part.split('-').map(Number);
            return Array.from({ length: (high ?? low!) - low! + 1 }, (_, index) => low! + index);
          });
        expect(expanded).toEqual([...seqs].sort((a, b) => a - b));
      }),
      { numRuns: 150 },
    );
  });
});

describe('receiptRanges', () => {
  const item = (seq: number | undefined, compacted = false): PromptItem => ({
    type: 'message',
    role: 'user',
    content: 'x',
    ...(seq === undefined ? {} : { seq }),
    ...(compacted ? { compacted } : {}),
  });

  it('names each seq read as sent whole, compacted or dropped, in whatever order the prompt holds them', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 1, max: 300 }), { size: 'max', maxLength: 60 }),
        fc.array(fc.constantFrom('whole', 'compacted', 'dropped'), { minLength: 60, maxLength: 60 }),
        fc.integer({ min: 0, max: 60 }),
        (seqs, fates, synthetic) => {
          const history = [...seqs].sort((a, b) => a - b).map((seq) => item(seq));
          const sent = seqs.flatMap((seq, index) =>
            fates[index] === 'dropped' ? [] : [item(seq, fates[index] === 'compacted')],
          );
          sent.splice(Math.min(synthetic, sent.length), 0, item(undefined));
          const of = (fate: string) => seqRanges(seqs.filter((_, index) => fates[index] === fate));
          expect(receiptRanges(history, sent)).toEqual({
            whole: of('whole'),
            compacted: of('compacted'),
            dropped: of('dropped'),
            unread_before: history[0]?.seq ?? null,
          });
        },
      ),
      { numRuns: 150 },
    );
  });

  it('gives the same ranges for a prompt in seq order, with items without a seq anywhere in either list', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 1, max: 300 }), { size: 'max', maxLength: 60 }),
        fc.array(fc.constantFrom('whole', 'compacted', 'dropped'), { minLength: 60, maxLength: 60 }),
        fc.array(fc.integer({ min: 0, max: 60 }), { maxLength: 3 }),
        (unordered, fates, synthetic) => {
          const seqs = [...unordered].sort((a, b) => a - b);
          const history = seqs.map((seq) => item(seq));
          const sent = seqs.flatMap((seq, index) =>
            fates[index] === 'dropped' ? [] : [item(seq, fates[index] === 'compacted')],
          );
          for (const at of synthetic) {
            sent.splice(Math.min(at, sent.length), 0, item(undefined));
            history.splice(Math.min(at, history.length), 0, item(undefined));
          }
          const of = (fate: string) => seqRanges(seqs.filter((_, index) => fates[index] === fate));
          expect(receiptRanges(history, sent)).toEqual({
            whole: of('whole'),
            compacted: of('compacted'),
            dropped: of('dropped'),
            unread_before: seqs[0] ?? null,
          });
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('promptCharacters', () => {
  it('counts content, call names and arguments, and outputs (out of line by their length)', () => {
    expect(
      promptCharacters([
        { type: 'message', role: 'user', content: 'abc' },
        { type: 'function_call', call_id: 'c', name: 'fn', arguments: '{}' },
        { type: 'function_call_output', call_id: 'c', output: 'xyz' },
        {
          type: 'function_call_output',
          call_id: 'd',
          output: '',
          output_ref: { sha256: 'a'.repeat(64), md5: 'b'.repeat(32), length: 1000, head: '', tail: '' },
        },
      ]),
    ).toBe(3 + 4 + 3 + 1000);
  });

  it("counts a content of parts by its characters, as the prompt's shape does, not by its number of parts", () => {
    const image = { type: 'input_image' as const, blob: 'a'.repeat(64), media_type: 'image/png', bytes: 4986 };
    const prompt: PromptItem[] = [
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'call click {"x":1}' }, image] },
      { type: 'function_call', call_id: 'c', name: 'click', arguments: '{"x":1}' },
      { type: 'function_call_output', call_id: 'c', output: [image, { type: 'input_text', text: 'clicked' }] },
    ];
    const shape = promptShape(prompt, [], []);
    // A prompt of fewer items than a block: its tail is every item.
    expect(shape.tail_start).toBe(0);
    const chars = promptCharacters(prompt);
    expect(chars).toBe(shape.tail_chars.reduce((sum, itemChars) => sum + itemChars, 0));
    expect(chars).toBeGreaterThan('call click {"x":1}'.length + 'click{"x":1}'.length + 'clicked'.length);
    // So the prefix a next turn reuses (this whole prompt) is at most that next prompt.
    const next = [...prompt, { type: 'message' as const, role: 'user' as const, content: 'go on' }];
    expect(reusedPrefixChars(promptShape(next, [], []), shape)).toBeLessThanOrEqual(promptCharacters(next));
  });
});

describe('runTurn', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('puts the instructions first and the cache breakpoint on the end of the stable prefix', async () => {
    const model = recordingModel();
    const turnServices = services(model);
    await turnServices.sessions.create({
      id: 's1',
      instructions: 'Rules.',
      model: 'recording',
      strategies: ['shorten_tools_epoch'],
      strategy_config: {
        epoch_tool_call_threshold: 3,
        epoch_full_tool_calls: 1,
        epoch_compacted_tool_calls: 2,
        epoch_size: 2,
      },
    });
    const items = [];
    for (let index = 1; index <= 8; index++) {
      items.push({ type: 'function_call' as const, call_id: `c${index}`, name: 'read', arguments: `{"n":${index}}` });
      items.push({ type: 'function_call_output' as const, call_id: `c${index}`, output: `out ${index}` });
    }
    await turnServices.sessions.append('s1', items);
    const response = await runTurn(turnServices, 's1', { input: 'go' });
    const request = model.requests[0]!;
    expect(request.prompt[0]).toEqual({ type: 'message', role: 'system', content: 'Rules.' });
    const noticeIndex = request.prompt.findIndex((item) => isContextNotice(item));
    expect(noticeIndex).toBeGreaterThan(0);
    expect(request.cacheBreakpoint).toBe(noticeIndex);
    expect(response.context.kept_full + response.context.compacted + response.context.dropped).toBe(8);
    expect(response.context.items_in_prompt).toBe(request.prompt.length);
    expect(response.context.prompt_chars).toBe(promptCharacters(request.prompt));
  });

  it('has no cache breakpoint without instructions or a compacted prefix', async () => {
    const model = recordingModel();
    const turnServices = services(model);
    await turnServices.sessions.create({ id: 's2', model: 'recording' });
    await runTurn(turnServices, 's2', { input: 'hi' });
    expect(model.requests[0]!.cacheBreakpoint).toBeUndefined();
  });

  it('answers without waiting for a timer when the model answers at once', async () => {
    // The receipt, hashed while the model answers, gives way by a turn of the event loop.
    const turnServices = services();
    await turnServices.sessions.create({ id: 's4' });
    // Timers never fire here (afterEach restores them): a turn that waited for one would never answer.
    vi.useFakeTimers({ toFake: ['setTimeout'] });
    const response = await runTurn(turnServices, 's4', { input: 'hi' });
    expect(response.output[0]).toMatchObject({ type: 'message', content: 'echo: hi' });
    const done = await turnServices.sessions.listTurns('s4', { limit: 10 });
    expect(done.turns[0]).toMatchObject({ status: 'completed' });
  });

  it('a bad strategy list stores nothing', async () => {
    const turnServices = services();
    await turnServices.sessions.create({ id: 's3' });
    await expect(runTurn(turnServices, 's3', { input: 'x', strategies: 'nope' })).rejects.toMatchObject({
      code: 'unknown_strategy',
    });
    expect((await turnServices.sessions.get('s3')).counts).toEqual({ items: 0, turns: 0, tool_calls: 0 });
  });
});

describe('streamTurn', () => {
  it('completes and stores the turn even when nobody reads the events', async () => {
    const turnServices = services();
    await turnServices.sessions.create({ id: 's4' });
    const { done } = streamTurn(turnServices, 's4', { input: 'unread stream' });
    await done;
    expect((await turnServices.sessions.get('s4')).counts).toEqual({ items: 2, turns: 1, tool_calls: 0 });
  });

  it('yields started, deltas, the item, then completed; the item equals the completed output', async () => {
    const turnServices = services();
    await turnServices.sessions.create({ id: 's5' });
    const events: TurnEvent[] = [];
    for await (const event of streamTurn(turnServices, 's5', { input: 'a b c' }).events) events.push(event);
    expect(events.map((event) => event.event)).toEqual([
      'turn.started',
      'output_text.delta',
      'output_text.delta',
      'output_text.delta',
      'output_text.delta',
      'output_item.done',
      'turn.completed',
    ]);
    const completed = events.at(-1)!;
    const item = events.at(-2)!;
    if (completed.event !== 'turn.completed' || item.event !== 'output_item.done') throw new Error('unexpected events');
    expect(completed.data.output).toEqual([item.data.item]);
  });

  it('reports an error before turn.started as the only event (the route turns it into a status)', async () => {
    const turnServices = services();
    const events: TurnEvent[] = [];
    for await (const event of streamTurn(turnServices, 'missing', { input: 'x' }).events) events.push(event);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ event: 'error', data: { error: { code: 'not_found' } } });
  });
});

describe('previewPrompt', () => {
  it('writes nothing: the store is byte-identical before and after', async () => {
    const turnServices = services();
    await turnServices.sessions.create({ id: 's6', instructions: 'x' });
    await runTurn(turnServices, 's6', { input: 'hello' });
    await turnServices.inbox.post('s6', { name: 'a.md', content: 'note' });
    await Promise.all(turnServices.pending);
    const before = await snapshot(turnServices.store);
    const preview = await previewPrompt(turnServices, 's6', {});
    expect(preview.items.at(-1)).toEqual({
      type: 'message',
      role: 'user',
      content: 'note',
      synthetic: 'inbox',
      pending: true,
    });
    expect(preview.context.notices_pending).toEqual(['a.md']);
    expect(await snapshot(turnServices.store)).toBe(before);
  });
});

describe('storage operations per turn', () => {
  it('stay constant as the session grows: at most 9, plus 4 per delivered notice', async () => {
    const store = new CountingStore(new MemoryStore());
    const log = new SessionLog(store);
    // Packing runs after the response: the turn asks for it, the test runs it after measuring.
    const packRequests: { id: string; options: PackOptions | undefined }[] = [];
    const inbox = new Inbox(store, { sessionExists: sessionExistsIn(store, '') });
    const turnServices: TurnServices = {
      sessions: {
        get: log.get.bind(log),
        beginTurn: log.beginTurn.bind(log),
        claimTurn: log.claimTurn.bind(log),
        storeAttachments: log.storeAttachments.bind(log),
        checkAttachments: log.checkAttachments.bind(log),
        copyBlobs: log.copyBlobs.bind(log),
        readContext: log.readContext.bind(log),
        needsView: log.needsView.bind(log),
        previewContext: log.previewContext.bind(log),
        hydrate: log.hydrate.bind(log),
        readMedia: log.readMedia.bind(log),
        completeTurn: log.completeTurn.bind(log),
        refreshIndex: log.refreshIndex.bind(log),
        commitTurnContext: log.commitTurnContext.bind(log),
        renewLease: log.renewLease.bind(log),
        takeLease: log.takeLease.bind(log),
        renewHeldLease: log.renewHeldLease.bind(log),
        releaseHeldLease: log.releaseHeldLease.bind(log),
        holdsLease: log.holdsLease.bind(log),
        listQueuedInputs: log.listQueuedInputs.bind(log),
        closedBy: log.closedBy.bind(log),
        closerNotices: log.closerNotices.bind(log),
        leaveDeleted: log.leaveDeleted.bind(log),
        leaveGone: log.leaveGone.bind(log),
        storeStoppedSpend: log.storeStoppedSpend.bind(log),
        storeCharge: log.storeCharge.bind(log),
        queued: log.queued.bind(log),
        journal: log.journal.bind(log),
        getTurn: log.getTurn.bind(log),
        enqueue: log.enqueue.bind(log),
        readQueued: log.readQueued.bind(log),
        queuedTakenBefore: log.queuedTakenBefore.bind(log),
        queuedTakenUp: log.queuedTakenUp.bind(log),
        removeQueued: log.removeQueued.bind(log),
        lowerQueueSignal: log.lowerQueueSignal.bind(log),
        markQueued: log.markQueued.bind(log),
        queuedWithdrawing: log.queuedWithdrawing.bind(log),
        withdrawQueued: log.withdrawQueued.bind(log),
        cancelTurn: log.cancelTurn.bind(log),
        closeIfExpired: log.closeIfExpired.bind(log),
        journalRun: log.journalRun.bind(log),
        completedResponse: log.completedResponse.bind(log),
        scope: log.scope.bind(log),
        exists: log.exists.bind(log),
        getWithNewestTurn: log.getWithNewestTurn.bind(log),
        deleteTurn: log.deleteTurn.bind(log),
        pack: async (id: string, options?: PackOptions) => {
          packRequests.push({ id, options });
          return { packed: false, deleted: 0 };
        },
      },
      inbox,
      config: parseServiceConfig({}),
      clock: () => new Date(),
      env: {},
      model: () => echoModel,
      background: (task) => void background.push(task),
      startBackground: (run) => runInProcess(turnServices, run),
      log: () => {},
      info: () => {},
    };
    // The background work a turn hands over (its listing row), settled before the next is measured.
    const background: Promise<unknown>[] = [];
    const settle = () => Promise.all(background.splice(0));
    await log.create({ id: 'ops', tools: [{ type: 'function', name: 'read' }] });
    const operations = (counts: CountingStore['counts']) =>
      counts.get + counts.head + counts.put + counts.list + counts.delete;
    const measured: number[] = [];
    for (let index = 1; index <= 40; index++) {
      const asked = await runTurn(turnServices, 'ops', { input: `call read {"n":${index}}` });
      const call = asked.output[0]!;
      if (call.type !== 'function_call') throw new Error('expected a call');
      await settle();
      store.reset();
      await runTurn(turnServices, 'ops', {
        input: [{ type: 'function_call_output', call_id: call.call_id, output: 'x'.repeat(200) }],
      });
      measured.push(operations(store.counts));
      // The background work the turn handed over (lib/turn/after-response.ts) asks for its pack.
      await settle();
      for (const { id, options } of packRequests.splice(0)) await log.pack(id, options);
    }
    // Get config, list, get the newest record and completion, get the view, get the shard of
    // the repeat index the calls after the view fall in (40 keys: one shard), list the inbox;
    // put the record and the completion.
    expect(Math.max(...measured)).toBeLessThanOrEqual(9);
    // Constant: the newest turns cost what the turns 20 calls earlier cost.
    expect(Math.max(...measured.slice(-10))).toBeLessThanOrEqual(Math.max(...measured.slice(10, 20)));
    await inbox.post('ops', { name: 'a.md', content: 'one' });
    await inbox.post('ops', { name: 'b.md', content: 'two' });
    store.reset();
    const withNotices = await runTurn(turnServices, 'ops', { input: 'and notices' });
    expect(packRequests.length).toBeLessThanOrEqual(1);
    expect(withNotices.context.notices_delivered).toEqual(['a.md', 'b.md']);
    expect(operations(store.counts)).toBeLessThanOrEqual(8 + 4 * 2);
    // A turn takes 32 notices at most (MAX_NOTICES_PER_TURN), at 4 calls each: the rest wait.
    for (let index = 0; index < 40; index++) await inbox.post('ops', { name: `n${index + 10}`, content: 'x' });
    await settle();
    store.reset();
    const capped = await runTurn(turnServices, 'ops', { input: 'and many notices' });
    expect(capped.context.notices_delivered).toEqual(Array.from({ length: 32 }, (_, index) => `n${index + 10}`));
    expect(operations(store.counts)).toBeLessThanOrEqual(8 + 4 * 32);
    await settle();
    const rest = await runTurn(turnServices, 'ops', { input: 'and the rest' });
    expect(rest.context.notices_delivered).toHaveLength(8);
  });
});
