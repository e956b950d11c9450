import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, stepCountIs, tool } from 'ai';
import OpenAI from 'openai';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { type FakeProvider, startFakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { forwardingPort } from '../support/server-process.ts';
import { type RunningServer, root, startHookTimeout, startServer } from './runtime-process.ts';

const TOKEN = 'crash-token';
const LEASE_MS = 3000;

/** A chat completion stream answering `text`. */
function chatSse(text: string): string {
  const chunk = (delta: object, finish: string | null) => {
    const choices = [{ index: 0, delta, logprobs: null, finish_reason: finish }];
    const event = { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'fake', choices };
    return `data: ${JSON.stringify(event)}\n\n`;
  };
  return [chunk({ role: 'assistant', content: '' }, null), chunk({ content: text }, null), chunk({}, 'stop')]
    .join('')
    .concat('data: [DONE]\n\n');
}

/**
 * kill -9 of a real Node server while the `openai` client's `responses.create` runs (the fake
 * provider hangs, so the turn is mid-flight), then a server on the same data directory, behind
 * the same port (forwardingPort)
 * takes the client's own retry (a dropped connection, then 409 `turn_in_progress` while the dead
 * turn's lease runs). The conversation afterwards holds the input once, and goes on.
 */

let dataDir: string;
let provider: FakeProvider;
let hangNext = false;
let port: number;
let server: RunningServer | undefined;
let forward: Awaited<ReturnType<typeof forwardingPort>>;

const lastUser = (body: { messages?: unknown } | undefined) => {
  const messages = (body?.messages ?? []) as { role: string; content: unknown }[];
  const last = [...messages].reverse().find((message) => message.role === 'user');
  return typeof last?.content === 'string' ? last.content : JSON.stringify(last?.content);
};

beforeAll(
  async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'tailgate-crash-'));
    provider = await startFakeProvider((request) => {
      if (hangNext) {
        hangNext = false;
        return { hang: true };
      }
      const text = `answer to ${lastUser(request.body)}`;
      if (request.body?.stream) return { sse: chatSse(text) };
      // Offered tools and not answered a call yet: calls get_weather.
      const answered = (request.body?.messages ?? []).some((message: { role: string }) => message.role === 'tool');
      const call = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } };
      const message = request.body?.tools && !answered ? { content: null, tool_calls: [call] } : { content: text };
      const finish = 'tool_calls' in message ? 'tool_calls' : 'stop';
      return {
        json: {
          id: 'c',
          object: 'chat.completion',
          created: 1,
          model: 'fake',
          choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: finish }],
          usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 },
        },
      };
    });
    forward = await forwardingPort(() => (server ? Number(new URL(server.origin).port) : undefined));
    port = forward.port;
    server = await start();
  },
  startHookTimeout(undefined, 10_000),
);

afterAll(async () => {
  await server?.stop();
  await forward?.close();
  await provider?.close();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

function start() {
  return startServer(process.execPath, ['--import', 'tsx', 'functions/node.ts'], {
    cwd: root,
    env: {
      PORT: '0',
      API_TOKEN: TOKEN,
      DATA_DIR: dataDir,
      DEFAULT_MODEL: 'openai-compatible:fake',
      TURN_LEASE_MS: String(LEASE_MS),
      OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
      OPENAI_COMPATIBLE_API_KEY: 'test',
    },
  });
}

/** kill -9 of the server, then another on the same data directory (after `waitMs`): none listens between. */
async function restart(waitMs = 0): Promise<void> {
  const dead = server!;
  server = undefined;
  await dead.kill();
  if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
  server = await start();
}

/**
 * Lets the provider hang on its next request, waits until that request arrives (the turn is
 * mid-flight), kills the server with kill -9 and starts another on the same port and data
 * directory; with `afterLease`, once the dead turn's lease ran out.
 */
async function killMidTurn(options: { afterLease?: boolean } = {}): Promise<void> {
  // The provider took the request it hangs on.
  for (let i = 0; hangNext; i++) {
    if (i > 300) throw new Error('the turn never reached the provider');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await restart(options.afterLease ? LEASE_MS : 0);
}

// The client's own retries (a dropped connection, then 409 turn_in_progress while the dead
// turn's lease runs) span the restart: more of them than the default 2.
const client = () => new OpenAI({ apiKey: TOKEN, baseURL: `http://127.0.0.1:${port}/v1`, maxRetries: 8 });
const MODEL = 'openai-compatible:fake';

async function items(conversation: string): Promise<string[]> {
  const page = await client().conversations.items.list(conversation, { order: 'asc', limit: 100 });
  return page.data.map((item) =>
    item.type === 'message'
      ? `${item.role}: ${item.content.map((part) => ('text' in part ? part.text : '')).join('')}`
      : item.type,
  );
}

/** A conversation of three steps, each input stored once and answered. */
const THREE_STEPS = ['one', 'two', 'three'].flatMap((input) => [`user: ${input}`, `assistant: answer to ${input}`]);

const settled = <T>(promise: Promise<T>) =>
  promise.then(
    (value) => value,
    (error: unknown) => error as Error,
  );

it('a response under previous_response_id whose server was killed is answered by the retry, in its conversation, ' +
  'its input stored once', async () => {
  const first = await client().responses.create({ model: MODEL, input: 'one', store: true });
  hangNext = true;
  const pending = settled(
    client().responses.create({ model: MODEL, input: 'two', previous_response_id: first.id, store: true }),
  );
  await killMidTurn({ afterLease: true });
  const second = await pending;
  if (second instanceof Error) throw second;
  expect(second.output_text).toBe('answer to two');
  expect(second.conversation).toEqual(first.conversation);
  const third = await client().responses.create({ model: MODEL, input: 'three', previous_response_id: second.id });
  expect(third.conversation).toEqual(first.conversation);
  expect(await items(first.conversation!.id)).toEqual(THREE_STEPS);
}, 90_000);

it("a response under conversation whose server was killed is answered by the retry (409 while the dead turn's " +
  'lease runs, when it comes that early), its input stored once', async () => {
  const conversation = await client().conversations.create({});
  await client().responses.create({ model: MODEL, input: 'one', conversation: conversation.id });
  hangNext = true;
  const pending = settled(client().responses.create({ model: MODEL, input: 'two', conversation: conversation.id }));
  await killMidTurn();
  const second = await pending;
  if (second instanceof Error) throw second;
  expect(second.output_text).toBe('answer to two');
  expect(await items(conversation.id)).toEqual([
    'user: one',
    'assistant: answer to one',
    'user: two',
    'assistant: answer to two',
  ]);
}, 90_000);

it('a resent history whose server was killed is answered by the retry in the same conversation, its input stored ' +
  'once', async () => {
  const first = await client().responses.create({ model: MODEL, input: 'one', store: true });
  hangNext = true;
  const history = [
    { role: 'user' as const, content: 'one' },
    { role: 'assistant' as const, content: first.output_text },
    { role: 'user' as const, content: 'two' },
  ];
  const pending = settled(client().responses.create({ model: MODEL, input: history, store: true }));
  await killMidTurn({ afterLease: true });
  const second = await pending;
  if (second instanceof Error) throw second;
  expect(second.conversation).toEqual(first.conversation);
  const next = [...history, { role: 'assistant' as const, content: second.output_text }];
  const third = await client().responses.create({
    model: MODEL,
    input: [...next, { role: 'user', content: 'three' }],
    store: true,
  });
  expect(third.conversation).toEqual(first.conversation);
  expect(await items(first.conversation!.id)).toEqual(THREE_STEPS);
}, 90_000);

it('an AI SDK generateText tool loop goes on in its conversation across a kill -9 between its steps and one ' +
  'during its second step, each call answered once', async () => {
  const openai = createOpenAI({ apiKey: TOKEN, baseURL: `http://127.0.0.1:${port}/v1` });
  const run = (kill: () => Promise<void>) =>
    generateText({
      model: openai(MODEL),
      prompt: 'weather in Paris?',
      // Its retries (2 s, 4 s...) span the restart and the dead turn's lease.
      maxRetries: 6,
      tools: {
        get_weather: tool({
          inputSchema: z.object({ city: z.string() }),
          execute: async () => {
            await kill();
            return '18C, clear';
          },
        }),
      },
      stopWhen: stepCountIs(3),
    });
  const loop = [
    'user: weather in Paris?',
    'function_call',
    'function_call_output',
    'assistant: answer to weather in Paris?',
  ];
  // Between the steps: the server dies while the tool runs; the next step goes to the new server.
  const between = await run(async () => {
    await restart();
  });
  // During the second step: the turn answering the call is mid-flight when the server dies, and
  // none answers until its lease lapsed (a resent history that meets the dead turn's lease
  // running starts a new conversation, docs/OPENAI.md).
  let killing: Promise<void> | undefined;
  const during = await run(async () => {
    hangNext = true;
    killing = killMidTurn({ afterLease: true });
  });
  await killing;
  for (const result of [between, during]) {
    expect(result.text).toBe('answer to weather in Paris?');
    const [first, second] = result.steps.map((step) => step.response.id.match(/^resp_(conv_[0-9a-f]+)_/)![1]!);
    expect(second).toBe(first);
    expect(await items(first!)).toEqual(loop);
  }
}, 120_000);
