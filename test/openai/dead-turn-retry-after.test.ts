import OpenAI from 'openai';
import { expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { environment, noBodyHeldAfterEach, processOf, texts } from '../support/dead-process.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { heldOptions, releasedAfterEach } from '../support/slow-echo.ts';
import { TOKEN } from './server.ts';

// A response whose server was killed mid-turn (non-streamed, answered at its end) holds its
// conversation until its lease (TURN_LEASE_MS, 3 s here) runs out. The `openai` client, with its
// default retries, retries the dropped connection on the restarted server, is answered 409 while
// the lease runs, waits as its retry-after-ms says (docs/API.md, "Busy sessions") and retries
// once more: the dead turn is taken out and the input stored once.

noBodyHeldAfterEach();
const heldEcho = releasedAfterEach();

it("the openai client's own retries of a response whose server was killed end in success", async () => {
  const store = new MemoryStore();
  const { openai } = processOf(store, 0);
  const { id } = await openai.conversations.create({});
  await openai.responses.create({ input: 'step 1', conversation: id });
  const killed = processOf(store, 0, { dying: true });
  const restarted = processOf(store, 0);
  const answers: (number | 'dropped')[] = [];
  const client = new OpenAI({
    apiKey: TOKEN,
    baseURL: 'http://tailgate.test/v1',
    fetch: async (url: string | URL | Request, init?: RequestInit) => {
      if (answers.length === 0) {
        answers.push('dropped');
        await killed.dies(async () => killed.app.request(String(url), init));
        throw new TypeError('fetch failed');
      }
      const response = await restarted.app.request(String(url), init);
      answers.push(response.status);
      return response;
    },
  });
  const answer = await client.responses.create({ input: 'step 2', conversation: id });
  expect(answer).toMatchObject({ status: 'completed', output_text: 'echo: step 2' });
  expect(answers).toEqual(['dropped', 409, 200]);
  await restarted.drain();
  expect(await texts(restarted.openai, id)).toEqual([
    'user: step 1',
    'assistant: echo: step 1',
    'user: step 2',
    'assistant: echo: step 2',
  ]);
});

// Killed once it renewed its lease (every third of it), within the lease its claim took: the 409
// names the renewed lease, the one that holds the conversation, so the second retry passes.
it("the openai client's own retries of a response killed after renewing its lease end in success", async () => {
  const store = new MemoryStore();
  const { openai } = processOf(store, 0);
  const { id } = await openai.conversations.create({});
  await openai.responses.create({ input: 'step 1', conversation: id });
  const slow = heldEcho();
  const killed = heldOptions(slow.model);
  let dead = false;
  let renewal = (_key: string) => {};
  const renewed = new Promise<string>((resolve) => (renewal = resolve));
  const app = createApp({
    store: () =>
      new FaultyStore(store).failWhen((call) => {
        if (call.operation === 'put' && call.key.endsWith('.lease')) renewal(call.key);
        return dead;
      }),
    readEnvironment: () => environment,
    ...killed.options,
  });
  const restarted = processOf(store, 0);
  const answers: (number | 'dropped')[] = [];
  let first: Promise<Response> | undefined;
  const client = new OpenAI({
    apiKey: TOKEN,
    baseURL: 'http://tailgate.test/v1',
    fetch: async (url: string | URL | Request, init?: RequestInit) => {
      if (!first) {
        answers.push('dropped');
        first = Promise.resolve(app.request(String(url), init));
        const key = await renewed;
        await expect.poll(async () => (await store.get(key)) !== null).toBe(true);
        dead = true;
        throw new TypeError('fetch failed');
      }
      const response = await restarted.app.request(String(url), init);
      answers.push(response.status);
      return response;
    },
  });
  const answer = await client.responses.create({ input: 'step 2 slow', conversation: id }).finally(async () => {
    slow.release();
    await first;
    await killed.drain();
  });
  expect(answer).toMatchObject({ status: 'completed', output_text: 'echo: step 2 slow' });
  expect(answers).toEqual(['dropped', 409, 200]);
  await restarted.drain();
  expect(await texts(restarted.openai, id)).toEqual([
    'user: step 1',
    'assistant: echo: step 1',
    'user: step 2 slow',
    'assistant: echo: step 2 slow',
  ]);
});
