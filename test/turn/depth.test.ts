import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DepthStore } from '../support/depth-store.ts';
import { dataUrl, pngBytes } from '../support/media-fixtures.ts';
import { hookedEcho, turnWorld } from '../support/turn-world.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { TokenSpend } from '../../lib/ledger/token-spend.ts';
import { runTurn, streamTurn, type TurnEvent } from '../../lib/turn/index.ts';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';

/**
 * Round trips on a turn's critical path: a DepthStore gives each storage call its depth (one
 * more than the deepest call completed before it started), every call taking a timer tick.
 * The model notes the deepest call completed when it is called, and answers only once no
 * storage call is in flight, as a model slower than the writes it overlaps would; the calls
 * that start after its answer are counted after it.
 */

// The timers (the store's delays, the work a turn leaves after its response, the model's wait
// for an idle store) run on a fake clock, one at a time, each once nothing else is left to run:
// which calls overlap is decided by the code's order, not by how fast the machine runs it.
const realImmediate = setImmediate;
let driving = false;
beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate'] });
  driving = true;
  const step = () => {
    if (!driving) return;
    vi.advanceTimersToNextTimer();
    realImmediate(step);
  };
  realImmediate(step);
});
afterEach(() => {
  driving = false;
  vi.useRealTimers();
});

function world() {
  const store = new DepthStore(new MemoryStore(), { delayMs: 2 });
  const seen = { before: 0, endedAt: 0, calls: 0 };
  const deepestCompleted = () => store.depth((call) => call.endedAt !== undefined);
  const model = hookedEcho(
    'timed',
    async () => {
      seen.calls += 1;
      seen.before = deepestCompleted();
      await store.idle();
    },
    () => {
      seen.endedAt = performance.now();
    },
  );
  const { sessions, inbox, services } = turnWorld(store, model);
  /** Sequential rounds among the calls that started after the model's last token. */
  const after = () => {
    const late = store.calls.filter((call) => call.startedAt >= seen.endedAt);
    const floor = Math.min(...late.map((call) => call.depth));
    return late.length === 0 ? 0 : Math.max(...late.map((call) => call.depth)) - floor + 1;
  };
  return { store, sessions, inbox, services, seen, after };
}

async function history(w: ReturnType<typeof world>, turns: number) {
  await w.sessions.create({ id: 's' });
  for (let index = 0; index < turns; index++) await runTurn(w.services, 's', { input: `turn ${index}` });
  // A view of the newest record, as the background packing writes one.
  await w.sessions.pack('s', { refresh: true });
}

describe('round trips of a turn', () => {
  it('a plain turn: at most 2 rounds before the model, 1 after its last token', async () => {
    const w = world();
    await history(w, 6);
    w.store.mark();
    const response = await runTurn(w.services, 's', { input: 'measured' });
    expect(response.output[0]).toMatchObject({ content: 'echo: measured' });
    // The view is read in the round of the newest record.
    const view = w.store.calls.find((call) => call.key.endsWith('.view'));
    expect(view?.depth).toBe(2);
    expect(w.seen.before).toBeLessThanOrEqual(2);
    expect(w.after()).toBe(1);
  });

  it('a session with a budget and usage totals: the same, the budget checked from the head read', async () => {
    const w = world();
    await history(w, 6);
    await w.sessions.update('s', { budget: { max_turns: 8, max_total_tokens: 1_000_000 } });
    w.store.mark();
    const response = await runTurn(w.services, 's', { input: 'measured' });
    expect(response.output[0]).toMatchObject({ content: 'echo: measured' });
    expect(w.seen.before).toBeLessThanOrEqual(2);
    expect(w.after()).toBe(1);
    expect((await w.sessions.get('s')).usage.turns).toBe(7);
    // The 8th turn reaches the limit: the next is refused with no model call and no write.
    await runTurn(w.services, 's', { input: 'last' });
    const calls = w.seen.calls;
    const counts = (await w.sessions.get('s')).counts;
    await expect(runTurn(w.services, 's', { input: 'over' })).rejects.toMatchObject({ code: 'budget_exhausted' });
    expect(w.seen.calls).toBe(calls);
    expect((await w.sessions.get('s')).counts).toEqual(counts);
  });

  it("a budgeted token's turn: read with the claim, charged after the completion", async () => {
    const w = world();
    await history(w, 6);
    const spend = new TokenSpend(w.store, '', { id: 'a'.repeat(32), expires: 4_102_444_800, limits: { max_turns: 9 } });
    const services = { ...w.services, tokenSpend: spend };
    await runTurn(services, 's', { input: 'first charge' });
    w.store.mark();
    await runTurn(services, 's', { input: 'measured' });
    expect(w.seen.before).toBeLessThanOrEqual(2);
    // After the model, the completion's put, then the charge's (not beside it: a turn closed by someone else is
    // charged by the close instead), one put over the etag the claim's read saw.
    const late = w.store.calls.filter((call) => call.startedAt >= w.seen.endedAt && call.op === 'put');
    const [completion, charge] = late.filter((call) => call.key.endsWith('.done') || call.key.includes('token-spend/'));
    expect(completion?.key).toMatch(/\.done$/);
    expect(charge?.depth).toBe(completion!.depth + 1);
    const spent = w.store.calls.filter((call) => call.key.includes('token-spend/'));
    expect(spent.map((call) => call.op)).toEqual(['get', 'put']);
    expect(await spend.read()).toMatchObject({ turns: 2 });
  });

  it('a keyed turn: the same', async () => {
    const w = world();
    await history(w, 6);
    w.store.mark();
    await runTurn(w.services, 's', { input: 'keyed' }, { idempotencyKey: 'k1' });
    expect(w.seen.before).toBeLessThanOrEqual(2);
    expect(w.after()).toBe(1);
    // The replay reads the key's outcome and calls no model.
    const calls = w.seen.calls;
    const replay = await runTurn(w.services, 's', { input: 'keyed' }, { idempotencyKey: 'k1' });
    expect(replay.output[0]).toMatchObject({ content: 'echo: keyed' });
    expect(w.seen.calls).toBe(calls);
  });

  it('a turn with notices: at most 2 rounds before the model, and the notice is delivered', async () => {
    const w = world();
    await history(w, 3);
    await w.inbox.post('s', { name: '0001-a.md', content: 'first notice' });
    await w.inbox.post('s', { name: '0002-b.md', content: 'second notice' });
    w.store.mark();
    const response = await runTurn(w.services, 's', { input: 'with notices' });
    expect(response.context.notices_delivered).toEqual(['0001-a.md', '0002-b.md']);
    expect(w.seen.before).toBeLessThanOrEqual(2);
    expect(w.after()).toBe(1);
    expect(await w.inbox.listPending('s')).toEqual([]);
  });

  it('a tool loop: the packing after a turn that made a call leaves the next turn no shard to read', async () => {
    const w = world();
    await w.sessions.create({ id: 's', tools: [{ type: 'function', name: 'read' }] });
    // Calls before the view: its repeat index holds them (in its delta, below 4,096 keys).
    const loop = async (round: number) => {
      const call = await runTurn(w.services, 's', { input: `call read {"n":${round}}` });
      const made = call.output.find((item) => item.type === 'function_call');
      expect(made).toBeDefined();
      return made!;
    };
    for (let round = -3; round < 0; round++) {
      const made = await loop(round);
      const input = [{ type: 'function_call_output' as const, call_id: made.call_id, output: 'earlier' }];
      await runTurn(w.services, 's', { input });
    }
    await w.sessions.pack('s', { refresh: true });
    for (let round = 1; round <= 3; round++) {
      const made = await loop(round);
      // What the client finds when it comes back from running the tool: the background work done.
      await w.store.idle();
      w.store.mark();
      const answered = await runTurn(w.services, 's', {
        input: [{ type: 'function_call_output', call_id: made!.call_id, output: `result ${round}` }],
      });
      expect(answered.output[0]).toMatchObject({ type: 'message' });
      expect(w.seen.before).toBeLessThanOrEqual(2);
      expect(w.after()).toBe(1);
      // The call is behind the newest view: no shard of the repeat index is read for it.
      expect(w.store.calls.filter((read) => read.key.includes('/keys/'))).toEqual([]);
      await w.store.idle();
    }
  });

  it('a turn whose input holds a new image: 2 rounds before the model, its blob not read back', async () => {
    const w = world();
    await history(w, 6);
    w.store.mark();
    const image = { type: 'input_image' as const, image_url: dataUrl('image/png', pngBytes(64, 48, 2_000)) };
    const content = [{ type: 'input_text' as const, text: 'look' }, image];
    const response = await runTurn(w.services, 's', { input: [{ type: 'message', role: 'user', content }] });
    // The model got the bytes the request brought.
    expect(response.output[0]).toMatchObject({ content: expect.stringContaining('[image/png 64x48') });
    const written = w.store.calls.filter((call) => call.op === 'put' && call.key.includes('/blob/'));
    expect(written).toHaveLength(1);
    expect(w.store.calls.filter((call) => call.op === 'get' && call.key.includes('/blob/'))).toEqual([]);
    // Written after the claim's reads, while the model is called, before the record that references it.
    const record = w.store.calls.find((call) => call.op === 'put' && /\/turn\/.*\/\d+$/.test(call.key));
    expect(record!.depth).toBeGreaterThan(written[0]!.depth);
    expect(w.seen.before).toBeLessThanOrEqual(2);
    expect(w.after()).toBe(1);
  });

  it('a turn with a new image and an older one: the older one read alongside the write of the new', async () => {
    const w = world();
    await history(w, 3);
    const message = (text: string, bytes: Uint8Array) => ({
      type: 'message' as const,
      role: 'user' as const,
      content: [
        { type: 'input_text' as const, text },
        { type: 'input_image' as const, image_url: dataUrl('image/png', bytes) },
      ],
    });
    await runTurn(w.services, 's', { input: [message('older', pngBytes(32, 24, 500))] });
    await w.sessions.pack('s', { refresh: true });
    await w.store.idle();
    w.store.mark();
    const response = await runTurn(w.services, 's', { input: [message('newer', pngBytes(64, 48, 500))] });
    expect(response.output[0]).toMatchObject({ content: expect.stringMatching(/32x24[\s\S]*64x48/) });
    const blobs = w.store.calls.filter((call) => call.key.includes('/blob/'));
    expect(blobs.map((call) => `${call.op} ${call.depth}`)).toEqual(['put 3', 'get 3']);
    expect(w.seen.before).toBeLessThanOrEqual(3);
    expect(w.after()).toBe(1);
  });

  it('a streamed turn: at most 2 rounds before the model, 1 after, turn.started first', async () => {
    const w = world();
    await history(w, 6);
    w.store.mark();
    const { events, done } = streamTurn(w.services, 's', { input: 'streamed' });
    const seen: TurnEvent[] = [];
    for await (const event of events) seen.push(event);
    await done;
    expect(seen[0]).toMatchObject({ event: 'turn.started', data: { turn: 7 } });
    expect(seen.at(-1)).toMatchObject({ event: 'turn.completed' });
    expect(w.seen.before).toBeLessThanOrEqual(2);
    expect(w.after()).toBe(1);
  });

  it('a traced turn: the same calls in the same rounds as an untraced one, and its spans', async () => {
    const exporter = new InMemorySpanExporter();
    const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
    const plain = world();
    const traced = world();
    traced.services.tracer = provider.getTracer('test');
    const rounds = async (w: ReturnType<typeof world>) => {
      await history(w, 6);
      w.store.mark();
      await runTurn(w.services, 's', { input: 'measured' });
      return {
        calls: w.store.calls.map((call) => `${call.op} ${call.depth}`),
        before: w.seen.before,
        after: w.after(),
      };
    };
    const untracedRounds = await rounds(plain);
    exporter.reset();
    expect(await rounds(traced)).toEqual(untracedRounds);
    expect(untracedRounds.before).toBeLessThanOrEqual(2);
    const spans = exporter.getFinishedSpans();
    const turn = spans.find((span) => span.attributes['tailgate.turn'] === 7)!;
    expect(turn.name).toBe('chat timed');
    const children = spans.filter((span) => span.parentSpanContext?.spanId === turn.spanContext().spanId);
    expect(children.map((span) => span.name)).toEqual([
      'tailgate.claim',
      'tailgate.read_context',
      'tailgate.strategies',
      'tailgate.model_call',
      'tailgate.complete',
    ]);
  });
});
