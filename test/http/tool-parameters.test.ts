import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { createClient, TOKEN } from './http-suite.ts';

// A function tool's `parameters` must be a JSON Schema of type "object" (OpenAI and Anthropic
// refuse any other at turn time): refused at the edge, naming the field, on every route.
const api = createClient(
  appHarness(new MemoryStore(), { API_TOKEN: TOKEN, ALLOW_ANONYMOUS: 'false', DEFAULT_MODEL: 'echo' }),
);
const stringSchema = { type: 'string' };
const objectSchema = { type: 'object', properties: { city: { type: 'string' } } };

describe('tool parameters that are not an object schema', () => {
  it('are a 400 naming the field on the native routes', async () => {
    const tool = (parameters: object) => ({ type: 'function', name: 'lookup', parameters });
    const created = await api.post('/v1/sessions', { tools: [tool(stringSchema)] });
    expect(created.status).toBe(400);
    expect(created.body.error).toMatchObject({ code: 'invalid_request', details: { field: 'tools.0.parameters' } });
    expect(created.body.error.message).toContain('must be a JSON Schema of type "object" (got type "string")');
    const id = (await api.post('/v1/sessions', {})).body.id as string;
    const turns = `/v1/sessions/${id}/turns`;
    const untyped = { properties: { city: { type: 'string' } } };
    const turn = await api.post(turns, { input: 'x', tools: [tool(objectSchema), { ...tool(untyped), name: 'b' }] });
    expect(turn.status).toBe(400);
    expect(turn.body.error).toMatchObject({ details: { field: 'tools.1.parameters' } });
    expect(turn.body.error.message).toContain('(got type null)');
    // `{}`: a tool that takes no arguments, as OpenAI takes it.
    expect((await api.post(turns, { input: 'x', tools: [{ ...tool({}), name: 'none' }] })).status).toBe(200);
    const patched = await api.patch(`/v1/sessions/${id}`, { tools: [tool(stringSchema)] });
    expect(patched.body.error).toMatchObject({ details: { field: 'tools.0.parameters' } });
    expect((await api.post(turns, { input: 'x', tools: [tool(objectSchema)] })).status).toBe(200);
  });

  it('are a 400 naming the param on the Responses facade and chat completions', async () => {
    const response = await api.post('/v1/responses', {
      model: 'echo',
      input: 'hi',
      tools: [{ type: 'function', name: 'lookup', parameters: stringSchema }],
    });
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({ type: 'invalid_request_error', param: 'tools[0].parameters' });
    const chat = await api.post('/v1/chat/completions', {
      model: 'echo',
      messages: [{ role: 'user', content: 'hi' }],
      tools: [{ type: 'function', function: { name: 'lookup', parameters: stringSchema } }],
    });
    expect(chat.status).toBe(400);
    expect(chat.body.error).toMatchObject({ param: 'tools[0].function.parameters' });
    const accepted = await api.post('/v1/chat/completions', {
      model: 'echo',
      messages: [{ role: 'user', content: 'hi' }],
      tools: [{ type: 'function', function: { name: 'lookup', parameters: objectSchema } }],
    });
    expect(accepted.status).toBe(200);
  });
});
