import OpenAI from 'openai';
import { expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { clientInProcess, TOKEN } from './server.ts';

/**
 * An input item's `id` on POST /v1/responses: a message's begins `msg`, a function_call's `fc`,
 * as OpenAI refuses another (400 `invalid_request_error` naming `input[i].id`, "Expected an ID
 * that begins with 'msg'"); the ids tailgate issues, resent through the `openai` client, are taken.
 */
it("refuses a message's id not msg_ and a function_call's not fc_, and takes the ids it issued", async () => {
  const app = createApp({
    store: () => new MemoryStore(),
    readEnvironment: () => ({ API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' }),
    log: () => {},
    logLine: () => {},
  });
  const openai = clientInProcess(app, TOKEN);
  const call = { type: 'function_call', call_id: 'call_1', name: 'f', arguments: '{}' } as const;
  const answer = { type: 'function_call_output', call_id: 'call_1', output: 'ok' } as const;
  for (const [input, message] of [
    [[{ type: 'message', role: 'user', content: 'x', id: 'item_1' }], `a message's id is "msg_"`],
    [[{ role: 'user', content: 'x', id: 'fc_1' }], `a message's id is "msg_"`],
    [[{ ...call, id: 'call_1' }, answer], `a function_call's id is "fc_"`],
  ] as const) {
    const refused = await openai.responses.create({ model: 'echo', input: input as never }).catch((error) => error);
    expect(refused, JSON.stringify(input)).toBeInstanceOf(OpenAI.BadRequestError);
    expect(refused.error).toMatchObject({ type: 'invalid_request_error', param: 'input[0].id' });
    expect(refused.error.message).toContain(message);
  }
  // What it issued, resent whole with store: false (no stored history), is taken.
  const first = await openai.responses.create({ model: 'echo', input: 'one' });
  expect(first.output[0]!.id).toMatch(/^msg_/);
  const resent = await openai.responses.create({
    model: 'echo',
    store: false,
    // (The client's types give a user message no id; OpenAI's own messages resent carry theirs.)
    input: [
      { type: 'message', role: 'user', content: 'one', id: 'msg_1' } as never,
      ...(first.output as never[]),
      { ...call, id: 'fc_1' },
      answer,
      { role: 'user', content: 'two' },
    ],
  });
  expect(resent.status).toBe('completed');
});
