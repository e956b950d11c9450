import { describe, expect, it } from 'vitest';
import type { AppOptions } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { createClient, TOKEN } from './http-suite.ts';

// Deleting the newest turn and the inbox (docs/API.md, "Deleting the newest turn"): a turn
// that took notices cannot be taken out (their delivery records name turns by number, which the
// session numbers again after a delete); one that took none can.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' };

function clientFor(options: Partial<Omit<AppOptions, 'store'>> = {}) {
  return createClient(appHarness(new MemoryStore(), environment, options));
}

describe('deleting the newest turn and the inbox', () => {
  it('refuses to delete a turn that an abort notice stopped (its delivery record names the turn)', async () => {
    const api = clientFor();
    const id = await api.session();
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'one' })).status).toBe(200);
    await api.post(`/v1/sessions/${id}/inbox`, { name: 'abort', content: 'stop' });
    const aborted = await api.post(`/v1/sessions/${id}/turns`, { input: 'two' });
    expect(aborted.body.error.code).toBe('aborted');
    const records = (await api.get(`/v1/sessions/${id}/inbox/delivered`)).body.delivered;
    expect(records).toMatchObject([{ name: 'abort', turn: 2 }]);
    const deleted = await api.delete(`/v1/sessions/${id}/turns/2`);
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(409);
    expect(deleted.body.error.code).toBe('delete_refused');
  });

  it('a turn closed by someone else that consumed nothing does not make later turns undeletable', async () => {
    // Background turns go to a runner that never starts them: turn 2 stays queued.
    const api = clientFor({ queueTurn: () => async () => {} });
    const id = await api.session({ strategies: ['shorten_tools_epoch_increment'] });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'one' })).status).toBe(200);
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'two', background: true })).status).toBe(202);
    expect((await api.post(`/v1/sessions/${id}/turns/2/cancel`)).status).toBe(200);
    for (const input of ['three', 'four'])
      expect((await api.post(`/v1/sessions/${id}/turns`, { input })).status).toBe(200);
    const deleted = await api.delete(`/v1/sessions/${id}/turns/4`);
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(200);
    expect(deleted.body.counts.turns).toBe(3);
    // The cancelled turn itself, which consumed nothing, goes too once it is the newest.
    expect((await api.delete(`/v1/sessions/${id}/turns/3`)).status).toBe(200);
    expect((await api.delete(`/v1/sessions/${id}/turns/2`)).status).toBe(200);
    expect((await api.get(`/v1/sessions/${id}`)).body.counts.turns).toBe(1);
  });
});
