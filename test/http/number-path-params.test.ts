import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { createClient, TOKEN } from './http-suite.ts';

// A number in a path is decimal digits, the same on every route: anything else (hex, an
// exponent, a point, a sign, a space, a word) names no turn, item or response, and is never
// read as the number it would convert to.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' };
const tasks: Promise<unknown>[] = [];
// Background turns never run: turn 1 stays open, for a cancel that must not reach it.
const api = createClient(
  appHarness(new MemoryStore(), environment, {
    readEnvironment: (c) => c.env ?? environment,
    queueTurn: () => async () => undefined,
    afterResponse: (task) => void tasks.push(task),
  }),
);

const notTurnOne = ['0x1', '1e0', '%201', '1%20', '1.0', '+1', '-1', 'abc', '0', '%EF%BC%91'];

describe('numbers in paths', () => {
  it.each([
    ['POST', 'cancel'],
    ['GET', 'events'],
    ['GET', ''],
    ['GET', 'items'],
    ['DELETE', ''],
  ])('%s .../turns/{turn}/%s: 400 naming the turn for anything but its digits', async (method, tail) => {
    const id = await api.session();
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'hi', background: true })).status).toBe(202);
    for (const turn of notTurnOne) {
      const path = `/v1/sessions/${id}/turns/${turn}${tail ? `/${tail}` : ''}`;
      const answer = await api.call(method, path);
      expect(answer.status, path).toBe(400);
      expect(answer.body.error.code, path).toBe('invalid_request');
      expect(answer.body.error.message, path).toMatch(/^param\.turn: turn must be (a positive integer|1\.\.)/);
    }
    await Promise.allSettled(tasks.splice(0));
    // Turn 1 is as it was: open, not cancelled nor deleted.
    expect((await api.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('queued');
  });

  it('refuses a facade id whose numbers are not written as the API writes them (no leading zero)', async () => {
    const created = await api.post('/v1/responses', { model: 'echo', input: 'hi' });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const id: string = created.body.id;
    expect((await api.get(`/v1/responses/${id}`)).status).toBe(200);
    const [, session, turn, input, output, generation = ''] = /^resp_(.+)_(\d+)_(\d+)_(\d+)(_g\w+)?$/.exec(id)!;
    for (const alias of [
      `resp_${session}_0${turn}_${input}_${output}${generation}`,
      `resp_${session}_${turn}_0${input}_${output}${generation}`,
      `resp_${session}_${turn}_${input}_0${output}${generation}`,
    ])
      expect((await api.get(`/v1/responses/${alias}`)).status, alias).toBe(404);
    const items = (await api.get(`/v1/conversations/${session}/items`)).body.data;
    const item: string = items[0].id;
    expect((await api.get(`/v1/conversations/${session}/items/${item}`)).status).toBe(200);
    const zeroed = item.replace(/_(\d+)$/, '_0$1');
    expect((await api.get(`/v1/conversations/${session}/items/${zeroed}`)).status, zeroed).toBe(404);
  });
});
