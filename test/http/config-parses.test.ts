import { describe, expect, it } from 'vitest';
import { serviceConfigParses } from '../../lib/config-cache.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { createClient, TOKEN } from './http-suite.ts';

// The app's settings (functions/app.ts, lib/config-cache.ts): read on every request, parsed once
// for the requests of one environment, and again as soon as a setting differs. Test files share
// the module's last parse, so the environment holds a setting no other test sets: its first
// request parses.
const environment = { API_TOKEN: TOKEN, ALLOW_ANONYMOUS: 'false', DEFAULT_MODEL: 'echo', SESSION_TTL_DAYS: '36499' };

describe("the app's settings", () => {
  it('are parsed once for many requests of one environment, and anew for a changed one', async () => {
    const harness = appHarness(new MemoryStore(), environment);
    const api = createClient(harness);
    const before = serviceConfigParses();
    const id = await api.session();
    for (let append = 0; append < 5; append++) {
      const appended = await api.post(`/v1/sessions/${id}/items`, {
        items: [{ type: 'message', role: 'user', content: `m${append}` }],
      });
      expect(appended.status).toBe(201);
    }
    expect((await api.get(`/v1/sessions/${id}/items`)).body.items).toHaveLength(5);
    expect(serviceConfigParses()).toBe(before + 1);
    // Another environment object: parsed, and its setting applies at once.
    const init = { method: 'GET', headers: { authorization: `Bearer ${TOKEN}` } };
    const other = await harness.fetchWithEnv({ API_TOKEN: `${TOKEN}-rotated` }, `/v1/sessions/${id}`, init);
    expect(other.status).toBe(401);
    expect(serviceConfigParses()).toBe(before + 2);
    // And back: the first environment's token is taken again.
    expect((await api.get(`/v1/sessions/${id}`)).status).toBe(200);
    expect(serviceConfigParses()).toBe(before + 3);
  });

  it('that do not parse answer every request the same 503', async () => {
    const harness = appHarness(new MemoryStore(), { ...environment, EPOCH_SIZE: 'abc', MAX_BODY_BYTES: '4MB' });
    const api = createClient(harness);
    const answers = [];
    for (let request = 0; request < 3; request++) {
      const answer = await api.post('/v1/sessions', {});
      answers.push({ status: answer.status, body: answer.body });
    }
    expect(answers[0]).toMatchObject({
      status: 503,
      body: { error: { code: 'not_configured', details: { variables: ['MAX_BODY_BYTES', 'EPOCH_SIZE'] } } },
    });
    expect(answers[1]).toEqual(answers[0]);
    expect(answers[2]).toEqual(answers[0]);
  });
});
