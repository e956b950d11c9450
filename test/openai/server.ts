import { serve } from '@hono/node-server';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import type { ResponseCompactionItem } from 'openai/resources/responses/responses';
import { afterAll, beforeAll, expect } from 'vitest';
import { createApp, type AppOptions } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { SIGNING_KEY } from '../http/http-suite.ts';
import {
  fixture,
  startFakeProvider,
  type FakeProvider,
  type FakeReply,
  type RecordedRequest,
} from '../support/fake-providers/fake-provider-server.ts';
import { thinksToCall } from '../support/fake-providers/thinking.ts';

export const TOKEN = 'openai-facade-token';

/**
 * The real app on a loopback port (Node server), with an in-memory store (or `store`) and `env`;
 * `logs` takes its turns' log lines and its failures' log messages (default: turn lines to stdout, failures dropped).
 */
export async function startTailgate(
  env: Record<string, string> = {},
  store: MemoryStore = new MemoryStore(),
  logs: Pick<AppOptions, 'log' | 'logLine' | 'info'> = {},
): Promise<{ baseURL: string; store: MemoryStore; settled(): Promise<void>; close(): Promise<void> }> {
  const environment = {
    API_TOKEN: TOKEN,
    TOKEN_SIGNING_KEY: SIGNING_KEY,
    ALLOW_ANONYMOUS: 'false',
    DEFAULT_MODEL: 'echo',
    ...env,
  };
  // The work requests leave after their responses (packing, listing rows), until it settles.
  const running = new Set<Promise<unknown>>();
  const afterResponse = (task: Promise<unknown>) => {
    running.add(task);
    void task.finally(() => running.delete(task));
  };
  const app = createApp({
    store: () => store,
    readEnvironment: () => environment,
    log: () => {},
    afterResponse,
    ...logs,
  });
  const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    store,
    settled: async () => {
      while (running.size > 0) await Promise.allSettled([...running]);
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The official client on an app in this process (`app.request`), no socket between them, with `apiKey`. */
export function clientInProcess(
  app: { request: (url: string, init?: RequestInit) => Response | Promise<Response> },
  apiKey: string,
): OpenAI {
  return new OpenAI({
    apiKey,
    baseURL: 'http://tailgate.test/v1',
    maxRetries: 0,
    fetch: async (url: string | URL | Request, init?: RequestInit) => app.request(String(url), init),
  });
}

/**
 * The app started before a file's tests and closed after them, with an official client on it:
 * `world.client` and `world.tailgate` are set once the tests run.
 */
export function clientOnTailgate(env: Record<string, string> = {}) {
  const world = {} as { tailgate: Awaited<ReturnType<typeof startTailgate>>; client: OpenAI };
  beforeAll(async () => {
    world.tailgate = await startTailgate(env);
    world.client = new OpenAI({ apiKey: TOKEN, baseURL: world.tailgate.baseURL, maxRetries: 0 });
  });
  afterAll(() => world.tailgate.close());
  return world;
}

/** The events of one streamed message, from its output_item.added to its output_item.done, without its deltas. */
export const MESSAGE_EVENTS = [
  'response.output_item.added',
  'response.content_part.added',
  'response.output_text.done',
  'response.content_part.done',
  'response.output_item.done',
];

/** GET `path` under the app's `/v1` with the admin token, as JSON (tailgate's own routes beside the facade). */
export async function tailgateGet(baseURL: string, path: string): Promise<any> {
  const response = await fetch(`${baseURL}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  return response.json();
}

/** POST `body` as JSON to `path` under the app's `/v1` with the admin token (tailgate's own routes, as tailgateGet). */
export function tailgatePost(baseURL: string, path: string, body: unknown): Promise<Response> {
  return fetch(`${baseURL}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

/**
 * Every key stored under `sessions/`, to show that a call stored nothing: once the background
 * work of earlier calls (packing, listing rows) has ended.
 */
export async function sessionKeys(tailgate: Pick<Awaited<ReturnType<typeof startTailgate>>, 'store' | 'settled'>) {
  await tailgate.settled();
  return (await tailgate.store.list('sessions/', { limit: 1000 })).objects.map((object) => object.key);
}

/**
 * The app before a loopback fake provider that answers with `reply`, its environment `env(its
 * baseURL)`, as clientOnTailgate: `world.provider` records its requests.
 */
export function clientOnFakeProvider(
  reply: (request: RecordedRequest) => FakeReply,
  env: (baseURL: string) => Record<string, string>,
) {
  const world = {} as { provider: FakeProvider; tailgate: Awaited<ReturnType<typeof startTailgate>>; client: OpenAI };
  beforeAll(async () => {
    world.provider = await startFakeProvider(reply);
    world.tailgate = await startTailgate({ MODEL_MAX_RETRIES: '0', ...env(world.provider.baseURL) });
    world.client = new OpenAI({ apiKey: TOKEN, baseURL: world.tailgate.baseURL, maxRetries: 0 });
  });
  afterAll(async () => {
    await world.tailgate.close();
    await world.provider.close();
  });
  return world;
}

/**
 * The app before an OpenAI model (`gpt-4o-mini`, openai:gpt-4o-mini) that a loopback fake
 * provider serves with `reply`, as clientOnTailgate: `world.provider` records its requests.
 */
export function clientOnFakeOpenAI(reply: (request: RecordedRequest) => FakeReply) {
  return clientOnFakeProvider(reply, (baseURL) => ({
    OPENAI_API_KEY: 'test-key',
    OPENAI_BASE_URL: baseURL,
    MODEL_ALIASES: 'gpt-4o-mini=openai:gpt-4o-mini',
  }));
}

/**
 * The app before an Anthropic model (`claude-wire`, and `gpt-5`: a name the AI SDK takes for a
 * reasoning model) that a loopback fake provider serves with its recorded answers: with thinking
 * and a call (thinking on, no tool result last), else a text answer. As clientOnFakeOpenAI.
 */
export function clientOnThinkingAnthropic() {
  const answer = (request: RecordedRequest, name: string): FakeReply =>
    request.body?.stream ? { sse: fixture(`${name}.sse`) } : { json: JSON.parse(fixture(`${name}.json`)) };
  return clientOnFakeProvider(
    (request) =>
      answer(request, thinksToCall(request) ? 'anthropic-message-thinking-tool-use' : 'anthropic-message-text'),
    (baseURL) => ({
      ANTHROPIC_API_KEY: 'test-key',
      ANTHROPIC_BASE_URL: baseURL,
      MODEL_ALIASES: 'claude-wire=anthropic:claude-sonnet-4-5,gpt-5=anthropic:claude-sonnet-4-5',
    }),
  );
}

/**
 * A response whose input is `word` 30 times, under a compaction threshold of 100 tokens: the
 * second of a conversation compacts (`after`: the response before; `background`: queued).
 */
export function compactingResponse(
  client: OpenAI,
  word: string,
  options: { after?: string; background?: boolean } = {},
): Promise<OpenAI.Responses.Response> {
  return client.responses.create({
    model: 'echo',
    input: Array.from({ length: 30 }, () => word).join(' '),
    context_management: [{ type: 'compaction', compact_threshold: 100 }],
    ...(options.after !== undefined ? { previous_response_id: options.after } : {}),
    ...(options.background ? { background: true } : {}),
  });
}

// 30 words of about 5 characters: about 40 tokens a message with the chars/4 approximation.
export const long = (word: string) => Array.from({ length: 30 }, () => word).join(' ');

/**
 * A conversation of `client`'s whose second response ran in the background and compacted (at
 * 100 prompt tokens): its id, the response's, and the compaction item its output ends with
 * (from its stream's `response.completed`).
 */
export async function compactedInBackground(client: OpenAI) {
  const context_management = [{ type: 'compaction' as const, compact_threshold: 100 }];
  const first = await client.responses.create({ model: 'echo', input: long('alpha'), context_management });
  const created = await client.responses.create({
    model: 'echo',
    previous_response_id: first.id,
    input: long('bravo'),
    context_management,
    background: true,
  });
  let ended: OpenAI.Responses.Response | undefined;
  for await (const event of await client.responses.retrieve(created.id, { stream: true }))
    if (event.type === 'response.completed') ended = event.response;
  const sessionId = first.conversation!.id;
  const compaction = ended!.output.at(-1) as ResponseCompactionItem;
  expect(compaction).toMatchObject({ type: 'compaction', id: `cmp_${sessionId}_3` });
  return { sessionId, id: created.id, compaction };
}

/** A background response of `client`'s once it ended (retrieve polled until it is neither queued nor in progress). */
export async function settledResponse(client: OpenAI, id: string): Promise<OpenAI.Responses.Response> {
  for (let polls = 0; polls < 600; polls++) {
    const response = await client.responses.retrieve(id);
    if (response.status !== 'queued' && response.status !== 'in_progress') return response;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`response ${id} did not end`);
}

/** A user message `said`, the echo model's answer to it, then `next`: an input resending an exchange. */
export function echoedThen(said: string, next: string) {
  return [
    { role: 'user' as const, content: said },
    { role: 'assistant' as const, content: `echo: ${said}` },
    { role: 'user' as const, content: next },
  ];
}

/** A Chat Completions answer of a fake OpenAI provider: the assistant `message`, ending with `finish`. */
export function chatCompletion(message: Record<string, unknown>, finish: string) {
  return {
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1,
    model: 'gpt-4o-mini',
    choices: [
      { index: 0, message: { role: 'assistant', refusal: null, ...message }, logprobs: null, finish_reason: finish },
    ],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  };
}
