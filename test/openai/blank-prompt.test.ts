import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { fixture } from '../support/fake-providers/fake-provider-server.ts';
import { clientOnFakeOpenAI, TOKEN, tailgateGet, tailgatePost } from './server.ts';

// A message with no text but whitespace is not sent (providers refuse a blank text block). A
// prompt left with nothing to send but its instructions is the client's mistake: a 400 naming
// it, before any provider is called, never the 502 of a failed model call.
const world = clientOnFakeOpenAI(() => ({ json: JSON.parse(fixture('openai-chat-text.json')) }));

describe('a prompt of blank messages alone', () => {
  it('is a 400 for a chat completion, streamed or not, and no model is called', async () => {
    for (const stream of [false, true]) {
      for (const messages of [
        [{ role: 'assistant' as const, content: null }],
        [{ role: 'user' as const, content: '  ' }],
        [
          { role: 'system' as const, content: 'be brief' },
          { role: 'user' as const, content: '' },
        ],
      ]) {
        const failure = await world.client.chat.completions.create({ model: 'gpt-4o-mini', messages, stream }).then(
          () => undefined,
          (error: unknown) => error,
        );
        expect(failure, JSON.stringify({ messages, stream })).toBeInstanceOf(OpenAI.BadRequestError);
        expect((failure as InstanceType<typeof OpenAI.BadRequestError>).error).toMatchObject({
          type: 'invalid_request_error',
          code: 'invalid_request',
          param: 'messages',
        });
      }
    }
    expect(world.provider.requests).toHaveLength(0);
  });

  it("is answered when a chat completion delivers a session's notice, else a 400 naming messages", async () => {
    const base = world.tailgate.baseURL;
    expect((await tailgatePost(base, '/sessions', { id: 'noticed' })).status).toBe(201);
    expect(
      (await tailgatePost(base, '/sessions/noticed/inbox', { name: 'n1', content: 'Budget left: 2 USD' })).status,
    ).toBe(201);
    const headers = { 'x-tailgate-session': 'noticed' };
    const messages = [{ role: 'user' as const, content: ' ' }];
    const answered = await world.client.chat.completions.create({ model: 'gpt-4o-mini', messages }, { headers });
    expect(answered.choices[0]!.message.content).toEqual(expect.any(String));
    const sent = world.provider.requests.at(-1)!.body.messages;
    expect(sent.at(-1)).toMatchObject({ role: 'user', content: 'Budget left: 2 USD' });
    const requests = world.provider.requests.length;
    const failure = await world.client.chat.completions.create({ model: 'gpt-4o-mini', messages }, { headers }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(OpenAI.BadRequestError);
    expect((failure as InstanceType<typeof OpenAI.BadRequestError>).error).toMatchObject({
      code: 'invalid_request',
      param: 'messages',
    });
    expect(world.provider.requests).toHaveLength(requests);
  });

  it('is a 400 for a response without a history, stored or not, and no model is called', async () => {
    for (const store of [true, false]) {
      const failure = await world.client.responses
        .create({ model: 'gpt-4o-mini', store, input: [{ type: 'message', role: 'user', content: ' ' }] })
        .then(
          () => undefined,
          (error: unknown) => error,
        );
      expect(failure, `store: ${store}`).toBeInstanceOf(OpenAI.BadRequestError);
      expect((failure as InstanceType<typeof OpenAI.BadRequestError>).error).toMatchObject({
        type: 'invalid_request_error',
        code: 'invalid_request',
        param: 'input',
      });
    }
    expect(world.provider.requests).toHaveLength(1);
  });

  it('is a 400 for a native turn of an empty session, which then takes its next turn', async () => {
    const base = world.tailgate.baseURL;
    expect((await tailgatePost(base, '/sessions', { id: 'blank', model: 'openai:gpt-4o-mini' })).status).toBe(201);
    const refused = await tailgatePost(base, '/sessions/blank/turns', { input: ' \n ' });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: unknown }).error).toMatchObject({
      code: 'invalid_request',
      details: { field: 'input' },
    });
    expect(world.provider.requests).toHaveLength(1);
    const answered = await fetch(`${base}/sessions/blank/turns`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ input: 'hello' }),
    });
    expect(answered.status).toBe(200);
    expect(world.provider.requests).toHaveLength(2);
    expect((await tailgateGet(base, '/sessions/blank')).usage.turns).toBe(1);
  });

  it('is summarized by a compaction of a conversation that holds nothing else, not refused', async () => {
    const base = world.tailgate.baseURL;
    expect((await tailgatePost(base, '/sessions', { id: 'blanks', model: 'openai:gpt-4o-mini' })).status).toBe(201);
    const blank = (role: string) => ({ type: 'message', role, content: ' ' });
    expect(
      (await tailgatePost(base, '/sessions/blanks/items', { items: [blank('user'), blank('assistant')] })).status,
    ).toBe(201);
    const requests = world.provider.requests.length;
    const compacted = await tailgatePost(base, '/sessions/blanks/compact', { keep_tokens: 0 });
    expect(compacted.status).toBe(200);
    expect(world.provider.requests).toHaveLength(requests + 1);
    expect(world.provider.requests.at(-1)!.body.messages.at(-1)).toMatchObject({ role: 'user' });
  });

  it("is answered when instructions alone deliver a session's notice, else a 400 naming messages", async () => {
    const base = world.tailgate.baseURL;
    expect((await tailgatePost(base, '/sessions', { id: 'instructed' })).status).toBe(201);
    expect(
      (await tailgatePost(base, '/sessions/instructed/inbox', { name: 'n1', content: 'Budget left: 2 USD' })).status,
    ).toBe(201);
    const headers = { 'x-tailgate-session': 'instructed' };
    const messages = [{ role: 'system' as const, content: 'be brief' }];
    const answered = await world.client.chat.completions.create({ model: 'gpt-4o-mini', messages }, { headers });
    expect(answered.choices[0]!.message.content).toEqual(expect.any(String));
    const sent = world.provider.requests.at(-1)!.body.messages;
    expect(sent).toMatchObject([
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'Budget left: 2 USD' },
    ]);
    const requests = world.provider.requests.length;
    const failure = await world.client.chat.completions.create({ model: 'gpt-4o-mini', messages }, { headers }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(OpenAI.BadRequestError);
    expect((failure as InstanceType<typeof OpenAI.BadRequestError>).error).toMatchObject({
      code: 'invalid_request',
      param: 'messages',
    });
    expect(world.provider.requests).toHaveLength(requests);
  });
});
