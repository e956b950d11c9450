import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { createClient, TOKEN } from '../http/http-suite.ts';

// The facade's numbers in a query (input_items' `limit`, retrieve's `starting_after`) are
// decimal digits: a hex, exponent or empty value is a 400 naming the param, as a path's turn is.
const api = createClient(
  appHarness(new MemoryStore(), { API_TOKEN: TOKEN, ALLOW_ANONYMOUS: 'false', DEFAULT_MODEL: 'echo' }),
);

describe('numbers in the facade queries', () => {
  it('take decimal digits only', async () => {
    const created = await api.post('/v1/responses', { model: 'echo', input: 'hi' });
    expect(created.status).toBe(200);
    const id = created.body.id as string;
    for (const limit of ['0x10', '1e1', '', ' 5', '5.0']) {
      const listed = await api.get(`/v1/responses/${id}/input_items?limit=${encodeURIComponent(limit)}`);
      expect(listed.status, limit).toBe(400);
      expect(listed.body.error, limit).toMatchObject({ type: 'invalid_request_error', param: 'limit' });
    }
    const listed = await api.get(`/v1/responses/${id}/input_items?limit=10`);
    expect(listed.status).toBe(200);
    expect(listed.body.data).toHaveLength(1);
    for (const after of ['0x1', '1e0', '', '-2']) {
      const retrieved = await api.get(`/v1/responses/${id}?starting_after=${encodeURIComponent(after)}`);
      expect(retrieved.status, after).toBe(400);
      expect(retrieved.body.error, after).toMatchObject({ param: 'starting_after' });
      expect(retrieved.body.error.message, after).toMatch(/must be an integer|Too small/);
    }
    // A whole number past 16 digits says so, not that it is no integer.
    const long = await api.get(`/v1/responses/${id}?stream=true&starting_after=${'9'.repeat(17)}`);
    expect(long.status).toBe(400);
    expect(long.body.error.message).toBe('starting_after: starting_after must be an integer of at most 16 digits');
    // Past the safe integers, as the native events route says it of `after` (docs/API.md, "Turns").
    const past = await api.get(`/v1/responses/${id}?stream=true&starting_after=9007199254740992`);
    expect(past.status).toBe(400);
    expect(past.body.error.message).toBe('starting_after: starting_after must be at most 9007199254740991');
    // Numbers it takes reach the next check (a starting_after needs stream=true).
    for (const after of ['-1', '3', '9007199254740991']) {
      const retrieved = await api.get(`/v1/responses/${id}?starting_after=${after}`);
      expect(retrieved.body.error, after).toMatchObject({ message: 'starting_after is for stream=true' });
    }
  });
});
