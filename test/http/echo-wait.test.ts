import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { sseReader } from '../support/sse-reader.ts';
import { createClient, TOKEN } from './http-suite.ts';

// The echo model's `wait <milliseconds> <text>` (lib/models/echo.ts) keeps a session busy
// offline, so the busy policies can be tried without a slow provider (docs/API.md, "Busy
// sessions"); a cancel or an interrupt ends the wait at once, as it aborts a provider's call.
// The waits asked are the longest the model takes: the turns end only through their cancels.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' };

function world() {
  const harness = appHarness(new MemoryStore(), environment);
  return { harness, api: createClient(harness) };
}

describe('an echo turn that waits', () => {
  it('holds the session: another turn is refused 409 until a cancel ends the wait', async () => {
    const { harness, api } = world();
    const id = await api.session();
    const streamed = await harness.fetch(`/v1/sessions/${id}/turns`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ input: 'wait 60000 hi', stream: true }),
    });
    expect(streamed.status).toBe(200);
    const events = sseReader(streamed);
    await events.until('event: turn.started');

    const refused = await api.post(`/v1/sessions/${id}/turns`, { input: 'hi', on_busy: 'reject' });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('turn_in_progress');

    expect((await api.post(`/v1/sessions/${id}/turns/1/cancel`)).status).toBe(200);
    const rest = await events.rest();
    expect(rest).toContain('turn_cancelled');
    expect(rest).not.toContain('output_text.delta');

    const next = await api.post(`/v1/sessions/${id}/turns`, { input: 'wait 1 after the cancel' });
    expect(next.status).toBe(200);
    expect(next.body.output).toMatchObject([{ type: 'message', content: 'echo: after the cancel' }]);
  });

  it('is interrupted by a turn with on_busy interrupt, which answers as for its text', async () => {
    const { api } = world();
    const id = await api.session();
    const first = api.post(`/v1/sessions/${id}/turns`, { input: 'wait 60000 first' });
    await expect.poll(async () => (await api.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('in_progress');

    const second = await api.post(`/v1/sessions/${id}/turns`, { input: 'wait 1 second', on_busy: 'interrupt' });
    expect(second.status).toBe(200);
    expect(second.body.output).toMatchObject([{ type: 'message', content: 'echo: second' }]);
    const interrupted = await first;
    expect(interrupted.status).toBe(409);
    expect(interrupted.body.error).toMatchObject({ code: 'turn_cancelled', details: { interrupted: true } });
    // Its own answer is the error its receipt keeps.
    expect(interrupted.body.error).toEqual((await api.get(`/v1/sessions/${id}/turns/1`)).body.error);
  });
});
