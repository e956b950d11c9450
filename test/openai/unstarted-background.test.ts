import { describe, expect, it } from 'vitest';
import { createApp, type AppOptions } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { clientInProcess } from './server.ts';

// A background response no runner started within its lease (a queue backlog: docs/API.md,
// "Background turns") is failed, lease_expired, by the first retrieve after the lease: its
// error says so, not that a process running it stopped, since none ever ran it.
const TOKEN = 'unstarted-token';
const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: '3000' };

describe('a background response no runner started', () => {
  it('fails lease_expired once its lease ran out, its error naming a runner that never came', async () => {
    let now = Date.parse('2030-01-01T00:00:00Z');
    const store = new MemoryStore();
    const options: AppOptions = {
      store: () => store,
      readEnvironment: () => environment,
      log: () => {},
      clock: () => new Date(now),
      // The queue never delivers it.
      queueTurn: () => async () => {},
    };
    const client = clientInProcess(createApp(options), TOKEN);
    const created = await client.responses.create({ model: 'echo', input: 'hello', background: true });
    expect((await client.responses.retrieve(created.id)).status).toBe('queued');
    now += 10_000;
    const failed = await client.responses.retrieve(created.id);
    expect(failed.status).toBe('failed');
    expect(failed.error?.code).toBe('lease_expired');
    expect(failed.error?.message).toMatch(/no runner started it/);
  });
});
