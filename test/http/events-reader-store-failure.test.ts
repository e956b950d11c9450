import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { journalPut } from '../support/dies-after-completion.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { heldOptions, releasedAfterEach } from '../support/slow-echo.ts';
import { sseReader } from '../support/sse-reader.ts';
import { createClient, parseSse, TOKEN } from './http-suite.ts';

// A reader of a streamed turn's events whose store fails once its stream began: the turn did
// not fail, so the stream ends with no event (no `error`, which is how a turn ends), and the
// client resuming after the last id it got follows the turn to its turn.completed.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' };
const heldEcho = releasedAfterEach();

describe("a turn's events reader whose store fails mid-stream", () => {
  it('ends with no error event, and its client resumes to turn.completed', async () => {
    const store = new MemoryStore();
    const owning = new FaultyStore(store);
    let batches = 0;
    owning.failWhen((call) => {
      if (journalPut(call)) batches += 1;
      return false;
    });
    const slow = heldEcho();
    const { options, drain } = heldOptions(slow.model);
    const owner = appHarness(owning, environment, options);
    const session = await createClient(owner).session();
    const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    const own = sseReader(
      await owner.fetch(`/v1/sessions/${session}/turns`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ input: 'slow one', stream: true }),
      }),
    );
    await own.until('event: output_text.delta');
    await expect.poll(() => batches).toBe(1);
    // Another process reads its events; its store's lists then fail.
    const reading = new FaultyStore(store);
    let failing = false;
    reading.failWhen((call) => failing && call.operation === 'list' && call.key.includes('/events/'));
    const reader = appHarness(reading, environment, heldOptions(slow.model).options);
    const events = sseReader(await reader.fetch(`/v1/sessions/${session}/turns/1/events`, { headers }));
    await events.until('event: output_text.delta');
    failing = true;
    const cut = (await events.rest()).trimEnd().split('\n\n');
    expect(parseSse(cut.join('\n\n')).map((event) => event.event)).not.toContain('error');
    const lastId = /^id: (\d+)$/m.exec(cut.at(-1)!)?.[1];
    expect(lastId).toBeDefined();
    failing = false;
    slow.release();
    await own.rest();
    await drain();
    const resumed = await createClient(reader).get(`/v1/sessions/${session}/turns/1/events`, {
      'last-event-id': lastId!,
    });
    expect(parseSse(resumed.body as string).at(-1)).toMatchObject({ event: 'turn.completed' });
  });
});
