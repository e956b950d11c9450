import type OpenAI from 'openai';
import { expect, it } from 'vitest';
import { createApp, createTurnRunner, type AppOptions } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { BackgroundTurn } from '../../lib/turn/index.ts';
import { texts } from '../support/dead-process.ts';
import { clientInProcess } from './server.ts';
import { goingOnFrom } from '../support/response-starts.ts';

// A background response's create was answered at once (`queued`): no client sends it again by
// itself, so once it is cancelled (`responses.cancel`) the same input sent again from the same
// start is the user's own request, run again, not refused as a foreground response's retry is
// (test/openai/cancel-retry.test.ts).
const TOKEN = 'background-resend-token';
const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' };

/** The app on a store of its own; its queue never delivers (a background turn stays queued) unless to `sent`. */
function app(sent?: BackgroundTurn[]) {
  const store = new MemoryStore();
  const options: AppOptions = {
    store: () => store,
    readEnvironment: () => environment,
    log: () => {},
    queueTurn: () => async (run) => void sent?.push(run),
  };
  const served = createApp(options);
  const native = (path: string, body: unknown = {}) =>
    served.request(`http://tailgate.test${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  // Runs the first queued turn here, as the queue's consumer would.
  const run = async () => {
    const tasks: Promise<unknown>[] = [];
    expect(await createTurnRunner(options)(sent!.shift()!, environment, (task) => void tasks.push(task))).toBe('done');
    await Promise.all(tasks);
  };
  return { client: clientInProcess(served, TOKEN), native, run };
}

for (const start of ['conversation', 'previous_response_id', 'history'] as const)
  for (const background of [false, true]) {
    const how = background ? ' in the background' : '';
    it(`a cancelled background response sent again under ${start}${how} runs`, async () => {
      const { client } = app();
      const first = await client.responses.create({ input: 'one' });
      const id = first.conversation!.id;
      const request = goingOnFrom(first, start, 'one');
      const queued = await client.responses.create({ ...request('two'), background: true });
      expect(queued.status).toBe('queued');
      expect((await client.responses.cancel(queued.id)).status).toBe('cancelled');
      const again = await client.responses.create({ ...request('two'), background }).catch((error: unknown) => error);
      expect(again).toMatchObject({ status: background ? 'queued' : 'completed' });
      const ran = again as OpenAI.Responses.Response;
      if (!background) expect(ran.output_text).toBe('echo: two');
      // Under the usual rules: the next turn of the conversation, a branch, or a new conversation.
      expect(ran.conversation!.id === id).toBe(start === 'conversation');
      if (start === 'conversation')
        expect(await texts(client, id)).toEqual([
          'user: one',
          'assistant: echo: one',
          'user: two',
          'user: two',
          ...(background ? [] : ['assistant: echo: two']),
        ]);
    });
  }

it('a cancelled native background turn sent again runs', async () => {
  const { native } = app();
  const created = await native('/v1/sessions', {});
  const { id } = (await created.json()) as { id: string };
  expect((await native(`/v1/sessions/${id}/turns`, { input: 'one' })).status).toBe(200);
  expect((await native(`/v1/sessions/${id}/turns`, { input: 'two', background: true })).status).toBe(202);
  expect((await native(`/v1/sessions/${id}/turns/2/cancel`)).status).toBe(200);
  const again = await native(`/v1/sessions/${id}/turns`, { input: 'two' });
  expect(again.status, await again.clone().text()).toBe(200);
  expect(await again.json()).toMatchObject({ turn: 3 });
});

it('a background response an abort notice refused, sent again under its conversation, runs', async () => {
  const sent: BackgroundTurn[] = [];
  const { client, native, run } = app(sent);
  const { id } = await client.conversations.create({});
  await client.responses.create({ input: 'one', conversation: id });
  expect((await native(`/v1/sessions/${id}/inbox`, { name: 'abort', content: 'stop' })).status).toBe(201);
  const queued = await client.responses.create({ input: 'two', conversation: id, background: true });
  await run();
  expect(await client.responses.retrieve(queued.id)).toMatchObject({ error: { code: 'aborted' } });
  const again = await client.responses.create({ input: 'two', conversation: id }).catch((error: unknown) => error);
  expect(again).toMatchObject({ status: 'completed', output_text: 'echo: two' });
});
