import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { SessionLog } from '../support/session-log.ts';
import { createClient, TOKEN } from './http-suite.ts';

// A cancel of a turn that has ended is 409 `turn_not_open`. When the turn is the session's
// newest record, the read that found it closed holds its completion: the message says how it
// ended. An older turn's would take another read: the message says only that it is not open.
const harness = appHarness(new MemoryStore(), { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' });
const api = createClient(harness);
const log = new SessionLog(harness.store, { keyPrefix: harness.keyPrefix });

async function cancelled(id: string, turn: number) {
  const answer = await api.post(`/v1/sessions/${id}/turns/${turn}/cancel`);
  expect(answer.status, JSON.stringify(answer.body)).toBe(409);
  expect(answer.body.error).toMatchObject({ code: 'turn_not_open', details: { session_id: id, turn } });
  return answer.body.error.message as string;
}

describe('a cancel of a turn that has ended', () => {
  it('says it completed, or was cancelled, when the turn is the newest record', async () => {
    const id = await api.session();
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'hi' })).status).toBe(200);
    expect(await cancelled(id, 1)).toBe(`turn 1 of session ${id} is not open: it completed`);

    const begun = await log.beginTurn(id, { input: [{ type: 'message', role: 'user', content: 'stuck' }] });
    expect(begun.kind).toBe('claimed');
    expect((await api.post(`/v1/sessions/${id}/turns/2/cancel`)).status).toBe(200);
    expect(await cancelled(id, 2)).toBe(`turn 2 of session ${id} is not open: it was cancelled`);
    // Turn 1 is no longer the newest: how it ended would take a read of its completion.
    expect(await cancelled(id, 1)).toBe(`turn 1 of session ${id} is not open`);
  });

  it('says it failed, with its error code', async () => {
    const id = await api.session();
    const begun = await log.beginTurn(id, { input: [{ type: 'message', role: 'user', content: 'slow' }] });
    if (begun.kind !== 'claimed') throw new Error(`not claimed: ${begun.kind}`);
    await log.completeTurn(begun.turn, {
      status: 'failed',
      output: [],
      receipt: {},
      error: { code: 'lease_expired', message: 'its lease ran out' },
    });
    expect(await cancelled(id, 1)).toBe(`turn 1 of session ${id} is not open: it failed (lease_expired)`);
  });
});
