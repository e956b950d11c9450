import OpenAI from 'openai';
import { afterEach, expect } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { heldBodyBytes } from '../../functions/body-budget.ts';
import { echoModel } from '../../lib/models/echo.ts';
import type { Model, ModelRequest } from '../../lib/models/model.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { clientInProcess, TOKEN } from '../openai/server.ts';
import { FaultyStore, type StoreCall } from './faulty-store.ts';

/**
 * Processes of the app sharing one store, one of which dies mid-turn (a kill -9): the tests of
 * a response answered at its end whose process died (lib/turn/dead-turn.ts).
 */

export const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: '3000' };
export const HOUR = 3_600_000;

/** Never answers: its call ends only when aborted, or once its process is `killed`. */
async function hang(request: ModelRequest, killed: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    const end = () => reject(new Error('aborted'));
    if (killed.aborted) end();
    killed.addEventListener('abort', end);
    request.signal?.addEventListener('abort', end);
  });
}

export interface ProcessOptions {
  /** It dies once its model is called (a stream, once it streamed a first delta). */
  dying?: boolean;
  /** The calls its store refuses while it lives. */
  fails?: (call: StoreCall) => boolean;
  /** Its clock goes an hour further once it made this many storage calls. */
  passAt?: number;
}

/**
 * A process on `store` whose clock is `offset` ms ahead; `dying`: it dies once its model is called
 * (`died`), its store refusing everything from then on, and `dies` sends a request that dies so
 * and ends it (its model call given up, with nothing left to write), so no request is left
 * unanswered. `drain` awaits the work its answers left; what it logs goes to `logged`.
 */
export function processOf(store: MemoryStore, offset: number, options: ProcessOptions = {}) {
  const { dying = false, fails = () => false, passAt = 0 } = options;
  let calls = 0;
  let dead = false;
  let die = () => {};
  const died = new Promise<void>((resolve) => (die = resolve));
  const killed = new AbortController();
  const model: Model = !dying
    ? echoModel
    : {
        ...echoModel,
        generate: (request) => {
          dead = true;
          die();
          return hang(request, killed.signal);
        },
        async *stream(request) {
          yield { type: 'text_delta', delta: 'thinking ' };
          dead = true;
          die();
          await hang(request, killed.signal);
        },
      };
  const tasks: Promise<unknown>[] = [];
  const logged: string[] = [];
  const app = createApp({
    store: () =>
      new FaultyStore(store).failWhen((call) => {
        calls += 1;
        if (calls === passAt) offset += HOUR;
        return dead || fails(call);
      }),
    readEnvironment: () => environment,
    log: (line) => void logged.push(line),
    logLine: () => {},
    clock: () => new Date(Date.now() + offset),
    wrapModel: () => model,
    afterResponse: (task) => void tasks.push(task),
  });
  const native = async (method: string, path: string, body?: object, headers: Record<string, string> = {}) => {
    const response = await app.request(`http://tailgate.test${path}`, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...headers },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: response.status, body: await response.text() };
  };
  const drain = async () => {
    while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
  };
  const dies = async (send: () => Promise<unknown>) => {
    const sent = send().catch(() => undefined);
    await Promise.race([died, sent]);
    killed.abort();
    await sent;
    await drain();
  };
  return { app, openai: clientInProcess(app, TOKEN), native, died, dies, drain, logged };
}

export type DeadProcess = ReturnType<typeof processOf>;

/** After each test: no request of it is left in the app (its body would count in the next file's budget). */
export function noBodyHeldAfterEach(): void {
  afterEach(() => {
    expect(heldBodyBytes()).toBe(0);
  });
}

/** The conversation's items, oldest first, a message as `role: text`. */
export const texts = async (openai: OpenAI, id: string) =>
  (await openai.conversations.items.list(id, { order: 'asc', limit: 100 })).data.map((item) =>
    item.type === 'message'
      ? `${item.role}: ${item.content.map((part) => ('text' in part ? part.text : '')).join('')}`
      : item.type,
  );

export const tools = [
  { type: 'function' as const, name: 'get_weather', strict: false, parameters: { type: 'object' } },
];

/**
 * A conversation whose newest response called get_weather, on a store of its own: its id, that
 * response's, the input of a step answering the call and that step's body under the conversation.
 */
export async function answeringCall() {
  const store = new MemoryStore();
  const { openai } = processOf(store, 0);
  const { id: conversation } = await openai.conversations.create({});
  const first = await openai.responses.create({ input: 'call get_weather {"city":"x"}', conversation, tools });
  const callId = first.output.find((item) => item.type === 'function_call')!.call_id;
  const input = [{ type: 'function_call_output' as const, call_id: callId, output: '18C' }];
  return { store, conversation, response: first.id, input, body: { input, conversation, tools } };
}

/** The items of a conversation whose step answering that call was stored once, its answer not yet. */
export const LOOP = ['user: call get_weather {"city":"x"}', 'function_call', 'function_call_output'];

/** A response's status, or the HTTP status of the error its request threw. */
export const status = (answer: unknown) =>
  answer instanceof OpenAI.APIError ? answer.status : (answer as { status?: string }).status;

/** Sends `body` (with request `options`) from a process `offset` ms ahead that dies during its turn. */
export async function diesSending(
  store: MemoryStore,
  offset: number,
  body: object,
  options: object = {},
): Promise<void> {
  const dying = processOf(store, offset, { dying: true });
  await dying.dies(() => dying.openai.responses.create(body as never, options));
}

/**
 * A conversation on a store of its own whose steps 1 to `steps` each died once mid-turn, then were
 * retried by a process an hour further on: each take-out forks one generation deeper. Its store
 * and id, the hours the clocks came to, each retry's status (its error's, where it was refused)
 * and the retries' response ids (`previous`: the last one's, when `chained`).
 */
export async function diedOnceEach(steps: number, chained = false) {
  const store = new MemoryStore();
  const { id } = await processOf(store, 0).openai.conversations.create({});
  let hours = 0;
  let previous: string | undefined;
  const statuses: unknown[] = [];
  const ids: (string | undefined)[] = [];
  for (let step = 1; step <= steps; step++) {
    // `chained`: each step after the first names the response before it, as a loop under
    // `previous_response_id` does (the first one starts in the conversation).
    const body = previous
      ? { input: `step ${step}`, previous_response_id: previous }
      : { input: `step ${step}`, conversation: id };
    await diesSending(store, ++hours * HOUR, body);
    const retry = processOf(store, ++hours * HOUR);
    const answer = await retry.openai.responses.create(body).catch((error: unknown) => error);
    statuses.push(status(answer));
    ids.push((answer as { id?: string }).id);
    if (chained) previous = ids.at(-1);
    await retry.drain();
  }
  return { store, id, hours, statuses, previous, ids };
}

/**
 * A conversation whose step 1 completed and whose step 2 (`sent` under an Idempotency-Key or not)
 * died mid-turn in a process an hour ahead: its store and id, step 1's response id (`first`), step
 * 2's body and request options,
 * and `retried`: the `openai` client's retry of that step 2, by a process three hours ahead, which
 * completes, the conversation then reading step 1, the items `between` and step 2 once (the
 * retrying process and those items).
 */
export async function deadSecondStep(sent: 'unkeyed' | 'keyed' = 'unkeyed') {
  const store = new MemoryStore();
  const { openai } = processOf(store, 0);
  const { id } = await openai.conversations.create({});
  const first = await openai.responses.create({ input: 'step 1', conversation: id });
  const body = { input: 'step 2', conversation: id };
  const options = sent === 'keyed' ? { headers: { 'Idempotency-Key': 'step-2' } } : {};
  await diesSending(store, HOUR, body, options);
  const retried = async (between: string[]) => {
    const retry = processOf(store, 3 * HOUR);
    expect((await retry.openai.responses.create(body, options)).status).toBe('completed');
    await retry.drain();
    const items = await texts(retry.openai, id);
    expect(items).toEqual([
      'user: step 1',
      'assistant: echo: step 1',
      ...between,
      'user: step 2',
      'assistant: echo: step 2',
    ]);
    return { retry, items };
  };
  return { store, id, first: first.id, body, options, retried };
}
