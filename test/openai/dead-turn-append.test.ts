import { expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import {
  type DeadProcess,
  deadSecondStep,
  HOUR,
  noBodyHeldAfterEach,
  processOf,
  texts,
} from '../support/dead-process.ts';

// A response answered at its end dies mid-turn (a kill -9). Once its lease ran out, an append
// (native or the facade's) or a manual compaction comes on its conversation, closing the dead
// turn (or finding it closed); the `openai` client's retry of the response then must not store its
// input a second time: the append or the compaction takes the dead turn out first, as a turn does.

noBodyHeldAfterEach();

/** What comes on the conversation once the dead turn's lease ran out: whether it wrote items. */
const writers = {
  'a native append': async (later: DeadProcess, id: string) => {
    const appended = await later.native('POST', `/v1/sessions/${id}/items`, {
      items: [{ type: 'message', role: 'user', content: 'appended' }],
    });
    expect(appended.status, appended.body).toBe(201);
    return ['user: appended'];
  },
  'a keyed native append, retried': async (later: DeadProcess, id: string) => {
    const body = { items: [{ type: 'message', role: 'user', content: 'appended' }] };
    const key = { 'Idempotency-Key': 'append-after-dead' };
    const appended = await later.native('POST', `/v1/sessions/${id}/items`, body, key);
    expect(appended.status, appended.body).toBe(201);
    const again = await later.native('POST', `/v1/sessions/${id}/items`, body, key);
    expect(again.status, again.body).toBe(201);
    expect(JSON.parse(again.body)).toEqual(JSON.parse(appended.body));
    return ['user: appended'];
  },
  "the facade's append": async (later: DeadProcess, id: string) => {
    await later.openai.conversations.items.create(id, {
      items: [{ type: 'message', role: 'user', content: 'appended' }],
    });
    return ['user: appended'];
  },
  'a manual compaction': async (later: DeadProcess, id: string) => {
    const compacted = await later.native('POST', `/v1/sessions/${id}/compact`, { keep_tokens: 0 });
    expect(compacted.status, compacted.body).toBe(200);
    expect(JSON.parse(compacted.body)).toMatchObject({ compacted: true });
    return ['compaction'];
  },
};

const cases: [keyof typeof writers, 'open' | 'closed', 'unkeyed' | 'keyed'][] = [];
for (const writer of Object.keys(writers) as (keyof typeof writers)[])
  for (const found of ['open', 'closed'] as const)
    for (const sent of ['unkeyed', 'keyed'] as const) cases.push([writer, found, sent]);

it.each(cases)('a dead response that %s found %s is retried %s, its input stored once', async (writer, found, sent) => {
  const dead = await deadSecondStep(sent);
  const later = processOf(dead.store, 2 * HOUR);
  // Closed before by a reader of its events, or left open for the writer's claim to close.
  if (found === 'closed') await later.native('GET', `/v1/sessions/${dead.id}/turns/2/events`);
  const written = await writers[writer](later, dead.id);
  await later.drain();
  // The `openai` client's retry of step 2, by another process.
  const { retry } = await dead.retried(written);
  expect([...later.logged, ...retry.logged].filter((line) => line.includes('stays in its session'))).toEqual([]);
});

// The blobs of an append's images go under the generation its items land in: a take-out of a dead
// first turn moves the session to a generation with no ancestor, where a blob put before is not found.
const PNG =
  'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9' +
  'awAAAABJRU5ErkJggg==';

it.each(['first', 'second'] as const)(
  'an image appended after a dead %s turn taken out is read back',
  async (place) => {
    const store = new MemoryStore();
    const { openai } = processOf(store, 0);
    const { id } = await openai.conversations.create({});
    if (place === 'second') await openai.responses.create({ input: 'step 1', conversation: id });
    const dying = processOf(store, HOUR, { dying: true });
    await dying.dies(() => dying.openai.responses.create({ input: 'step 2', conversation: id }));
    const later = processOf(store, 2 * HOUR);
    const appended = await later.native('POST', `/v1/sessions/${id}/items`, {
      items: [{ type: 'message', role: 'user', content: [{ type: 'input_image', image_url: PNG }] }],
    });
    expect(appended.status, appended.body).toBe(201);
    await later.drain();
    const { items } = JSON.parse((await later.native('GET', `/v1/sessions/${id}/items`)).body);
    const blob = items
      .flatMap((item: { content: unknown }) => item.content)
      .find((part: { blob?: string }) => part?.blob);
    expect(blob).toMatchObject({ media_type: 'image/png' });
    expect((await later.native('GET', `/v1/sessions/${id}/blobs/${blob.blob}`)).status).toBe(200);
    const turn = await later.native('POST', `/v1/sessions/${id}/turns`, { input: 'and this?' });
    expect(turn.status, turn.body).toBe(200);
    expect(JSON.parse(turn.body).output[0].content).toContain('[image/png 1x1');
    await later.drain();
    expect(await texts(later.openai, id)).toContain('assistant: echo: and this? [image/png 1x1, 1 KB]');
  },
);
