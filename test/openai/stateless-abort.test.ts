import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Body, ObjectInfo, PutOptions } from '../../lib/store/object-store.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import {
  startFakeProvider,
  type FakeProvider,
  type RecordedRequest,
} from '../support/fake-providers/fake-provider-server.ts';
import { startTailgate, tailgatePost, TOKEN } from './server.ts';

// A request that stores nothing (a chat completion, a `store: false` response, on its input alone
// or under previous_response_id), streamed or not, whose client aborts it while the model runs:
// its model call is aborted too (the provider's connection closes before its answer ended), and
// its budgeted token is charged what that call spent, with no failure logged.

/** A store that tells when a token's spend record is written (a charge landed). */
class ChargeWatchingStore extends MemoryStore {
  #waiting: (() => void)[] = [];
  charged(): Promise<void> {
    return new Promise((resolve) => this.#waiting.push(resolve));
  }
  override async put(key: string, body: Body, options?: PutOptions): Promise<ObjectInfo | null> {
    const written = await super.put(key, body, options);
    if (key.includes('token-spend/')) for (const resolve of this.#waiting.splice(0)) resolve();
    return written;
  }
}

let provider: FakeProvider;
let tailgate: Awaited<ReturnType<typeof startTailgate>>;
let store: ChargeWatchingStore;
const failures: string[] = [];
const routine: string[] = [];
let requested: (request: RecordedRequest) => void = () => {};

function chunk(delta: object): string {
  const choices = [{ index: 0, delta, finish_reason: null }];
  return `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices })}\n\n`;
}

beforeAll(async () => {
  provider = await startFakeProvider((request) => {
    requested(request);
    // Streamed: two words, then nothing more until the connection closes (the model still running);
    // answered at once: no answer until then.
    if (!request.body?.stream) return { hang: true };
    const sse = chunk({ role: 'assistant', content: '' }) + chunk({ content: 'one ' }) + chunk({ content: 'two ' });
    return { sse, pause: { after: 2, until: request.closed }, hang: true };
  });
  store = new ChargeWatchingStore();
  tailgate = await startTailgate(
    {
      OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
      MODEL_ALIASES: 'slow=openai-compatible:fake',
      MODEL_MAX_RETRIES: '0',
    },
    store,
    { log: (message) => failures.push(message), logLine: () => {}, info: (message) => routine.push(message) },
  );
});
afterAll(async () => {
  await tailgate.close();
  await provider.close();
});

/** A client on a token with a budget, and what that token has spent. */
async function budgeted() {
  const answer = await tailgatePost(tailgate.baseURL, '/tokens', {
    scopes: ['session:turn'],
    budget: { max_total_tokens: 100_000 },
  });
  const { token } = (await answer.json()) as { token: string };
  const spent = async () => {
    const current = await fetch(`${tailgate.baseURL}/tokens/current`, {
      headers: { authorization: `Bearer ${token}` },
    });
    return ((await current.json()) as { usage: { input_tokens: number; output_tokens: number } }).usage;
  };
  return { client: new OpenAI({ apiKey: token, baseURL: tailgate.baseURL, maxRetries: 0 }), spent };
}

/** A stored response of the echo model, for a `store: false` one to go on after. */
const stored = () =>
  new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 }).responses.create({
    model: 'echo',
    input: 'one',
  });

type Start = (client: OpenAI, signal: AbortSignal, stream: boolean) => Promise<unknown>;

const chat: Start = (client, signal, stream) =>
  client.chat.completions.create({ model: 'slow', messages: [{ role: 'user', content: 'go' }], stream }, { signal });

const response: Start = (client, signal, stream) =>
  client.responses.create({ model: 'slow', input: 'go', store: false, stream }, { signal });

const continued: Start = async (client, signal, stream) => {
  const { id } = await stored();
  return client.responses.create(
    { model: 'slow', input: 'go', store: false, previous_response_id: id, stream },
    { signal },
  );
};

/** Reads `stream` until its first text, then aborts its request. */
async function abortAtFirstText(stream: AsyncIterable<unknown>, controller: AbortController): Promise<void> {
  for await (const event of stream) {
    const text = JSON.stringify(event);
    if (text.includes('"one ')) controller.abort();
  }
}

describe('a request storing nothing that its client aborts', () => {
  it.each([
    ['a chat completion', true, chat],
    ['a chat completion', false, chat],
    ['a store: false response', true, response],
    ['a store: false response', false, response],
    ['a store: false response under previous_response_id', true, continued],
    ['a store: false response under previous_response_id', false, continued],
  ])('%s (streamed: %s) aborts its model call and charges what it spent', async (_, stream, start) => {
    failures.length = 0;
    routine.length = 0;
    const { client, spent } = await budgeted();
    const controller = new AbortController();
    const reached = new Promise<RecordedRequest>((resolve) => (requested = resolve));
    const charged = store.charged();
    const made = start(client, controller.signal, stream);
    const request = await reached;
    if (stream) await abortAtFirstText((await made) as AsyncIterable<unknown>, controller).catch(() => undefined);
    else {
      controller.abort();
      await made.catch(() => undefined);
    }
    // The provider's connection closes while it holds the rest of its answer.
    await request.closed;
    await charged;
    const usage = await spent();
    expect(usage.input_tokens).toBeGreaterThan(0);
    // A streamed call is charged the output it streamed; one answered at once had none.
    if (stream) expect(usage.output_tokens).toBeGreaterThan(0);
    else expect(usage.output_tokens).toBe(0);
    await tailgate.settled();
    expect(failures).toEqual([]);
    // One routine line says the call stopped, for an operator whose clients time out on a slow provider.
    expect(routine.filter((line) => line.includes('stopped'))).toEqual([
      'tailgate: a call of openai-compatible:fake stopped: its client went away',
    ]);
  });
});
