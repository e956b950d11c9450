import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { TOKEN } from './http-suite.ts';

// An `abort` notice is a notice: a turn whose strategies leave `inbox` out passes over it, as
// over every notice (docs/CONFIGURATION.md, "inbox": "Without it, notices wait"), and the next
// turn that has `inbox` is aborted by it. A session's budget stops its turns whatever their
// requests' strategies (docs/API.md, "Inbox").
const store = new MemoryStore();
const app = createApp({ store: () => store, readEnvironment: () => ({ API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' }) });

async function post(path: string, body: unknown): Promise<{ status: number; body: any }> {
  const response = await app.request(path, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

describe('an abort notice and the strategies a turn runs with', () => {
  it('waits through a turn without inbox, aborts the next one with it; a zero budget stops both', async () => {
    await post('/v1/sessions', { id: 'runaway' });
    await post('/v1/sessions/runaway/inbox', { name: 'abort', content: 'stop' });
    const passed = await post('/v1/sessions/runaway/turns', { input: 'go', strategies: ['shorten_tools'] });
    expect(passed.status).toBe(200);
    const aborted = await post('/v1/sessions/runaway/turns', { input: 'go on' });
    expect(aborted).toMatchObject({ status: 409, body: { error: { code: 'aborted' } } });

    await app.request('/v1/sessions/runaway', {
      method: 'PATCH',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ budget: { max_turns: 0 } }),
    });
    const refused = await post('/v1/sessions/runaway/turns', { input: 'again', strategies: ['shorten_tools'] });
    expect(refused).toMatchObject({ status: 402, body: { error: { code: 'budget_exhausted' } } });
  });

  it('keeps the aborted input: its call outputs sent again are refused, the next message goes on', async () => {
    await post('/v1/sessions', {
      id: 'stopped-loop',
      tools: [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: {} } }],
    });
    const call = await post('/v1/sessions/stopped-loop/turns', { input: 'call get_weather {}' });
    const outputs = [{ type: 'function_call_output', call_id: call.body.output[0].call_id, output: '18C' }];
    await post('/v1/sessions/stopped-loop/inbox', { name: 'abort', content: 'stop' });
    const aborted = await post('/v1/sessions/stopped-loop/turns', { input: outputs });
    expect(aborted).toMatchObject({ status: 409, body: { error: { code: 'aborted' } } });

    const resent = await post('/v1/sessions/stopped-loop/turns', { input: outputs });
    expect(resent).toMatchObject({ status: 400, body: { error: { details: { field: 'input.0.call_id' } } } });
    const empty = await post('/v1/sessions/stopped-loop/turns', { input: [] });
    expect(empty).toMatchObject({ status: 400, body: { error: { details: { field: 'input' } } } });
    const deleted = await app.request('/v1/sessions/stopped-loop/turns/2', {
      method: 'DELETE',
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(deleted.status).toBe(409);
    const next = await post('/v1/sessions/stopped-loop/turns', { input: 'go on' });
    expect(next.status).toBe(200);
  });
});
