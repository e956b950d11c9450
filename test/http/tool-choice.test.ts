import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { createClient, TOKEN } from './http-suite.ts';

// tool_choice "required" (or a named tool) with no tool to call is a 400 naming tool_choice, as
// OpenAI answers, before any model call.
const api = createClient(
  appHarness(new MemoryStore(), { API_TOKEN: TOKEN, ALLOW_ANONYMOUS: 'false', DEFAULT_MODEL: 'echo' }),
);
const lookup = { type: 'function', name: 'lookup', parameters: { type: 'object', properties: {} } };

function expectToolChoiceRefused(result: { status: number; body: any }): void {
  expect(result.status, JSON.stringify(result.body)).toBe(400);
  expect(result.body.error).toMatchObject({ type: 'invalid_request_error', param: 'tool_choice' });
}

describe('tool_choice without tools', () => {
  it('is a 400 naming tool_choice on chat completions', async () => {
    const messages = [{ role: 'user', content: 'hi' }];
    for (const tools of [undefined, []]) {
      const required = await api.post('/v1/chat/completions', {
        model: 'echo',
        messages,
        tools,
        tool_choice: 'required',
      });
      expectToolChoiceRefused(required);
      expect(required.body.error.message).toBe('tool_choice "required" needs a tool to call, and tools holds none');
      const named = { type: 'function', function: { name: 'lookup' } };
      expectToolChoiceRefused(
        await api.post('/v1/chat/completions', { model: 'echo', messages, tools, tool_choice: named }),
      );
    }
    const tools = [{ type: 'function', function: { name: 'lookup', parameters: lookup.parameters } }];
    const call = [{ role: 'user', content: 'call lookup' }];
    const called = await api.post('/v1/chat/completions', {
      model: 'echo',
      messages: call,
      tools,
      tool_choice: 'required',
    });
    expect(called.status).toBe(200);
    expect(called.body.choices[0].message.tool_calls[0].function.name).toBe('lookup');
  });

  it('is a 400 naming tool_choice on the Responses facade, stored or not, unless a conversation has one', async () => {
    const create = (fields: object) => api.post('/v1/responses', { model: 'echo', input: 'hi', ...fields });
    expectToolChoiceRefused(await create({ tool_choice: 'required' }));
    expectToolChoiceRefused(await create({ tool_choice: 'required', store: false }));
    expectToolChoiceRefused(await create({ tool_choice: 'required', tools: [] }));
    const conversation = (await api.post('/v1/conversations', {})).body.id as string;
    expectToolChoiceRefused(await create({ tool_choice: 'required', conversation }));
    // A conversation is a session: the tools set on it are offered.
    expect((await api.patch(`/v1/sessions/${conversation}`, { tools: [lookup] })).status).toBe(200);
    const called = await create({ conversation, tool_choice: 'required', input: 'call lookup' });
    expect(called.status, JSON.stringify(called.body)).toBe(200);
    expect(called.body.output[0]).toMatchObject({ type: 'function_call', name: 'lookup' });
  });
});
