import OpenAI from 'openai';
import { expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { noBodyHeldAfterEach, processOf, texts } from '../support/dead-process.ts';
import { TOKEN } from './server.ts';

// A response whose server was killed mid-turn (non-streamed, answered at its end) holds its
// conversation until its lease (TURN_LEASE_MS, 3 s here) runs out. The `openai` client, with its
// default retries, retries the dropped connection on the restarted server, is answered 409 while
// the lease runs, waits as its retry-after-ms says (docs/API.md, "Busy sessions") and retries
// once more: the dead turn is taken out and the input stored once.

noBodyHeldAfterEach();

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
