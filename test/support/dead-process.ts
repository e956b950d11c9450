import type OpenAI from 'openai';
import { createApp } from '../../functions/app.ts';
import { echoModel } from '../../lib/models/echo.ts';
import type { Model, ModelRequest } from '../../lib/models/model.ts';
import type { MemoryStore } from '../../lib/store/memory.ts';
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

/**
 * A process on `store` whose clock is `offset` ms ahead; `dying`: it dies once its model is called
 * (`died`), its store refusing everything from then on, and `dies` sends a request that dies so
 * and ends it (its model call given up, with nothing left to write), so no request is left
 * unanswered. `drain` awaits the work its answers left; what it logs goes to `logged`. Its store
 * also fails the calls `fails` names.
 */
export function processOf(
  store: MemoryStore,
  offset: number,
  dying = false,
  fails: (call: StoreCall) => boolean = () => false,
) {
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
      };
  const tasks: Promise<unknown>[] = [];
  const logged: string[] = [];
  const app = createApp({
    store: () => new FaultyStore(store).failWhen((call) => dead || fails(call)),
    readEnvironment: () => environment,
    log: (line) => void logged.push(line),
    logLine: () => {},
    clock: () => new Date(Date.now() + offset),
    wrapModel: () => model,
    afterResponse: (task) => void tasks.push(task),
  });
  const native = async (method: string, path: string, body?: object) => {
    const response = await app.request(`http://tailgate.test${path}`, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
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
  return { openai: clientInProcess(app, TOKEN), native, died, dies, drain, logged };
}

export type DeadProcess = ReturnType<typeof processOf>;

/** The conversation's items, oldest first, a message as `role: text`. */
export const texts = async (openai: OpenAI, id: string) =>
  (await openai.conversations.items.list(id, { order: 'asc', limit: 100 })).data.map((item) =>
    item.type === 'message'
      ? `${item.role}: ${item.content.map((part) => ('text' in part ? part.text : '')).join('')}`
      : item.type,
  );
