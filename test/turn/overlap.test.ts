import { describe, expect, it } from 'vitest';
import type { Model, ModelRequest } from '../../lib/models/model.ts';
import { echoModel } from '../../lib/models/echo.ts';
import { hookedEcho, turnWorld } from '../support/turn-world.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { Body, ObjectInfo, PutOptions } from '../../lib/store/object-store.ts';
import { streamTurn, runTurn, type TurnEvent } from '../../lib/turn/index.ts';
import { approximateTokenCounter, countPromptTokens } from '../../lib/tokens/token-counter.ts';

/**
 * The model call a turn starts before its claim and its notice moves have landed: when one
 * of them fails, the call is aborted and nothing of it is emitted or stored.
 */

/** A memory store that runs `hook` once, right before the first call it matches. */
class HookedStore extends MemoryStore {
  #hook: { op: 'put' | 'head'; match: (key: string) => boolean; run: () => Promise<void> } | undefined;
  /** Set with a hook, and kept once it ran, until a model call takes it. */
  armed = false;

  get hook() {
    return this.#hook;
  }

  set hook(hook) {
    this.#hook = hook;
    this.armed = hook !== undefined;
  }

  async #before(op: 'put' | 'head', key: string): Promise<void> {
    const hook = this.#hook;
    if (hook && hook.op === op && hook.match(key)) {
      this.#hook = undefined;
      await hook.run();
    }
  }

  override async put(key: string, body: Body, options?: PutOptions): Promise<ObjectInfo | null> {
    await this.#before('put', key);
    return super.put(key, body, options);
  }

  override async head(key: string): Promise<ObjectInfo | null> {
    await this.#before('head', key);
    return super.head(key);
  }
}

/**
 * A world whose model answers at once, except the first call after a store hook is set: that
 * call answers only by failing when the turn aborts it, however long the hook takes.
 */
function world() {
  const store = new HookedStore();
  const prompts: { prompt: ModelRequest['prompt']; signal: AbortSignal | undefined }[] = [];
  const model = hookedEcho('seen', async (request) => {
    prompts.push({ prompt: request.prompt, signal: request.signal });
    if (!store.armed) return;
    store.armed = false;
    const signal = request.signal!;
    if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    throw signal.reason;
  });
  return { store, prompts, ...turnWorld(store, model) };
}

/** The key of a turn's record (not its completion, lease or view). */
const isRecord = (key: string) => /\/turn\/g[^/]+\/\d{12}$/.test(key);

describe('a model call started before the claim landed', () => {
  it('is aborted when another writer took the record number, emits nothing, and the turn starts again', async () => {
    const w = world();
    await w.sessions.create({ id: 's' });
    await runTurn(w.services, 's', { input: 'first' });
    // Right before this turn's claim lands, another writer appends: the claim is refused.
    w.store.hook = {
      op: 'put',
      match: isRecord,
      run: async () => void (await w.sessions.append('s', [{ type: 'message', role: 'user', content: 'meanwhile' }])),
    };
    w.prompts.length = 0;
    const { events, done } = streamTurn(w.services, 's', { input: 'second' });
    const seen: TurnEvent[] = [];
    for await (const event of events) seen.push(event);
    await done;
    // Called twice: the first call, on a history without "meanwhile", was aborted.
    expect(w.prompts).toHaveLength(2);
    expect(w.prompts[0]!.signal?.aborted).toBe(true);
    expect(w.prompts[0]!.prompt.some((item) => 'content' in item && item.content === 'meanwhile')).toBe(false);
    expect(w.prompts[1]!.prompt.some((item) => 'content' in item && item.content === 'meanwhile')).toBe(true);
    // One turn.started, one answer: nothing of the aborted call reached the stream.
    expect(seen.filter((event) => event.event === 'turn.started')).toEqual([
      { event: 'turn.started', data: { turn: 2, first_seq: 5 } },
    ]);
    expect(seen.filter((event) => event.event === 'output_item.done')).toHaveLength(1);
    expect(seen.at(-1)).toMatchObject({ event: 'turn.completed', data: { turn: 2 } });
    const items = await w.sessions.listItems('s', { limit: 10 });
    expect(items.items.map((item) => ('content' in item ? item.content : item.type)).reverse()).toEqual([
      'first',
      'echo: first',
      'meanwhile',
      'second',
      'echo: second',
    ]);
  });

  it('is aborted when a notice it shows did not move, and the model is called again without it', async () => {
    const w = world();
    await w.sessions.create({ id: 's' });
    await w.inbox.post('s', { name: '0001-gone.md', content: 'withdrawn meanwhile' });
    await w.inbox.post('s', { name: '0002-kept.md', content: 'still here' });
    // The notice is read with the claim's reads, then withdrawn before its move.
    w.store.hook = {
      op: 'head',
      match: (key) => key.endsWith('inbox/0001-gone.md'),
      run: () => w.inbox.withdraw('s', '0001-gone.md'),
    };
    const response = await runTurn(w.services, 's', { input: 'hello' });
    expect(w.prompts).toHaveLength(2);
    expect(w.prompts[0]!.signal?.aborted).toBe(true);
    const shown = (index: number) =>
      w.prompts[index]!.prompt.flatMap((item) => ('content' in item && item.role === 'user' ? [item.content] : []));
    expect(shown(0)).toEqual(['hello', 'withdrawn meanwhile', 'still here']);
    expect(shown(1)).toEqual(['hello', 'still here']);
    expect(response.context.notices_delivered).toEqual(['0002-kept.md']);
    expect(response.output[0]).toMatchObject({ content: 'echo: still here' });
    expect((await w.inbox.listDelivered('s')).map((record) => record.name)).toEqual(['0002-kept.md']);
  });

  it("charges the call it aborted: its prompt's tokens, estimated, in the turn's usage and the session's", async () => {
    // The same turn, its notice never withdrawn: what the call that answered reports.
    const plain = world();
    await plain.sessions.create({ id: 's' });
    await plain.inbox.post('s', { name: '0002-kept.md', content: 'still here' });
    const answered = (await runTurn(plain.services, 's', { input: 'hello' })).usage;
    const w = world();
    await w.sessions.create({ id: 's' });
    await w.inbox.post('s', { name: '0001-gone.md', content: 'withdrawn meanwhile' });
    await w.inbox.post('s', { name: '0002-kept.md', content: 'still here' });
    w.store.hook = {
      op: 'head',
      match: (key) => key.endsWith('inbox/0001-gone.md'),
      run: () => w.inbox.withdraw('s', '0001-gone.md'),
    };
    const response = await runTurn(w.services, 's', { input: 'hello' });
    expect(w.prompts).toHaveLength(2);
    const aborted = countPromptTokens(w.prompts[0]!.prompt, [], approximateTokenCounter);
    expect(response.usage).toMatchObject({
      input_tokens: answered.input_tokens + aborted,
      output_tokens: answered.output_tokens,
    });
    expect((await w.sessions.get('s')).usage).toMatchObject({
      turns: 1,
      input_tokens: response.usage.input_tokens,
      output_tokens: response.usage.output_tokens,
    });
    const turn = await w.sessions.getTurn('s', response.turn);
    expect(turn).toMatchObject({ usage: response.usage, usage_estimated: true });
  });

  it('charges the call a lost claim aborted, estimated, in the usage of the turn that starts again', async () => {
    // The same turns, "meanwhile" appended before the second: what its call that answered reports.
    const plain = world();
    await plain.sessions.create({ id: 's' });
    await runTurn(plain.services, 's', { input: 'first' });
    await plain.sessions.append('s', [{ type: 'message', role: 'user', content: 'meanwhile' }]);
    const answered = (await runTurn(plain.services, 's', { input: 'second' })).usage;
    const w = world();
    await w.sessions.create({ id: 's' });
    await runTurn(w.services, 's', { input: 'first' });
    w.store.hook = {
      op: 'put',
      match: isRecord,
      run: async () => void (await w.sessions.append('s', [{ type: 'message', role: 'user', content: 'meanwhile' }])),
    };
    w.prompts.length = 0;
    const response = await runTurn(w.services, 's', { input: 'second' });
    expect(w.prompts).toHaveLength(2);
    const aborted = countPromptTokens(w.prompts[0]!.prompt, [], approximateTokenCounter);
    expect(response.usage).toMatchObject({
      input_tokens: answered.input_tokens + aborted,
      output_tokens: answered.output_tokens,
    });
    expect(await w.sessions.getTurn('s', response.turn)).toMatchObject({ usage_estimated: true });
  });

  /**
   * A model whose provider reports 1000 input tokens and 50 output tokens for every call (not what
   * an estimate would count), telling `answered` once each call answered.
   */
  function reporting() {
    const store = new HookedStore();
    const prompts: ModelRequest['prompt'][] = [];
    const answers: (() => void)[] = [];
    const answered = (call: number) => new Promise<void>((resolve) => (answers[call] = resolve));
    const first = answered(0);
    const model: Model = {
      id: 'reporting',
      async generate(request) {
        prompts.push(request.prompt);
        const result = await echoModel.generate(request);
        answers[prompts.length - 1]?.();
        return { ...result, usage: { input_tokens: 1000, output_tokens: 50 } };
      },
      stream: () => {
        throw new Error('not streamed');
      },
    };
    return { store, prompts, first, ...turnWorld(store, model) };
  }

  it('charges the call a lost claim aborted after it answered as its provider reported it', async () => {
    const w = reporting();
    await w.sessions.create({ id: 's' });
    // The claim's put waits for the call's answer, and is then refused: another writer appended.
    w.store.hook = {
      op: 'put',
      match: isRecord,
      run: async () => {
        await w.first;
        await w.sessions.append('s', [{ type: 'message', role: 'user', content: 'meanwhile' }]);
      },
    };
    const response = await runTurn(w.services, 's', { input: 'hello' });
    expect(w.prompts).toHaveLength(2);
    expect(response.usage).toMatchObject({ input_tokens: 2000, output_tokens: 100 });
    const turn = await w.sessions.getTurn('s', response.turn);
    expect(turn.usage).toMatchObject({ input_tokens: 2000, output_tokens: 100 });
    expect(turn.usage_estimated).toBeUndefined();
    expect((await w.sessions.get('s')).usage).toMatchObject({ turns: 1, input_tokens: 2000, output_tokens: 100 });
  });

  it('charges the call a notice aborted after it answered as its provider reported it', async () => {
    const w = reporting();
    await w.sessions.create({ id: 's' });
    await w.inbox.post('s', { name: '0001-gone.md', content: 'withdrawn meanwhile' });
    // The notice's move waits for the call's answer, and finds it withdrawn.
    w.store.hook = {
      op: 'head',
      match: (key) => key.endsWith('inbox/0001-gone.md'),
      run: async () => {
        await w.first;
        await w.inbox.withdraw('s', '0001-gone.md');
      },
    };
    const response = await runTurn(w.services, 's', { input: 'hello' });
    expect(w.prompts).toHaveLength(2);
    expect(response.usage).toMatchObject({ input_tokens: 2000, output_tokens: 100 });
    const turn = await w.sessions.getTurn('s', response.turn);
    expect(turn.usage_estimated).toBeUndefined();
    expect((await w.sessions.get('s')).usage).toMatchObject({ turns: 1, input_tokens: 2000, output_tokens: 100 });
  });
});
