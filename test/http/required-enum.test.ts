import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { createClient, TOKEN } from './http-suite.ts';

// A required field the body lacks reads `required` (functions/error-handler.ts), an enum's as a
// string's: zod's own issue for an enum ("Invalid option") does not say it received nothing.
const api = createClient(appHarness(new MemoryStore(), { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' }));

describe('a request body missing a required enum field', () => {
  it('is a 400 saying the field is required; a value it does not take is still named', async () => {
    const body = (tool_choice: Record<string, unknown>) => ({ model: 'echo', input: 'x', tool_choice });
    const missing = await api.post('/v1/responses', body({ type: 'allowed_tools', tools: [] }));
    expect(missing.status).toBe(400);
    expect(missing.body.error.message).toBe('tool_choice.mode: required');
    const wrong = await api.post('/v1/responses', body({ type: 'allowed_tools', mode: 'some', tools: [] }));
    expect(wrong.status).toBe(400);
    expect(wrong.body.error.message).toMatch(/^tool_choice\.mode: Invalid option/);
  });

  it('reads required in a turn input item that lacks its role', async () => {
    const id = await api.session();
    const turns = `/v1/sessions/${id}/turns`;
    const missing = await api.post(turns, { input: [{ type: 'message', content: 'x' }] });
    expect(missing.status).toBe(400);
    expect(missing.body.error).toMatchObject({
      message: 'body.input[0].role: required',
      details: { field: 'input.0.role' },
    });
    const system = await api.post(turns, { input: [{ type: 'message', role: 'system', content: 'x' }] });
    expect(system.body.error.message).toMatch(/^body\.input\[0\]\.role: must be "user" or "assistant"/);
  });
});
