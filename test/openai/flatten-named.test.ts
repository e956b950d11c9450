import { expect, it } from 'vitest';
import { MAX_NAMED_GENERATIONS } from '../../lib/session/fork-point.ts';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { noBodyHeldAfterEach, processOf, status, texts } from '../support/dead-process.ts';

// A conversation flattened again and again (lib/session/log/flatten.ts), until its config's
// `named` is cut to MAX_NAMED_GENERATIONS: the ids of the turns of the generation it started in
// still name them, and a fork made of that generation is still listed among its forks.

noBodyHeldAfterEach();

const outputText = (response: { output: { type: string; content?: { type: string; text?: string }[] }[] }) =>
  response.output.flatMap((item) => (item.type === 'message' ? (item.content ?? []) : [])).map((part) => part.text);

it('keeps the first generation named once the generations named are cut to their cap', async () => {
  const store = new MemoryStore();
  const { openai, native } = processOf(store, 0);
  const { id } = await openai.conversations.create({});
  const named = async (): Promise<{ generation: string; seq: number }[]> =>
    JSON.parse(new TextDecoder().decode((await store.get(sessionConfigKey('', id)))!.body)).named ?? [];
  const first = await openai.responses.create({ input: 'base 1', conversation: id });
  const second = await openai.responses.create({ input: 'base 2', conversation: id });
  const fork = await native('POST', `/v1/sessions/${id}/fork`, { at_turn: 1, id: 'branch' });
  expect(fork.status).toBe(201);
  const expected = ['user: base 1', 'assistant: echo: base 1', 'user: base 2', 'assistant: echo: base 2'];
  // Each step kept, then one deleted: a fork one generation deeper each time, a delete of the
  // ninth flattening, each flattening naming about 9 generations more, until one finds 32 named
  // already (MAX_NAMED_GENERATIONS) and cuts what it names to them.
  const kept: { id: string; input: string }[] = [];
  for (let step = 1, cut = false; !cut; step++) {
    // (The conversation's items stay one page of `texts`, 100.)
    expect(step, 'a flattening cut the generations named').toBeLessThanOrEqual(48);
    const input = `kept ${step}`;
    kept.push({ id: (await openai.responses.create({ input, conversation: id })).id, input });
    expected.push(`user: ${input}`, `assistant: echo: ${input}`);
    const gone = await openai.responses.create({ input: `gone ${step}`, conversation: id });
    const before = await named();
    await openai.responses.delete(gone.id);
    const after = await named();
    expect(after.length).toBeLessThanOrEqual(MAX_NAMED_GENERATIONS);
    cut = before.length === MAX_NAMED_GENERATIONS && after[0]!.generation !== before[0]!.generation;
  }
  expect(await texts(openai, id)).toEqual(expected);
  // The first generation's turns: their ids still name them, and GET reads each back.
  for (const [response, input] of [
    [first, 'base 1'],
    [second, 'base 2'],
  ] as const) {
    const read = await openai.responses.retrieve(response.id);
    expect(read.id).toBe(response.id);
    expect(outputText(read)).toEqual([`echo: ${input}`]);
  }
  // The fork of the first generation is still one of the conversation's, on a first page of one:
  // the session's references to itself, one per generation a delete read, are read past.
  const listed = await native('GET', `/v1/sessions/${id}/forks?limit=1`);
  expect(listed.status).toBe(200);
  expect(JSON.parse(listed.body)).toMatchObject({ forks: [{ id: 'branch' }], has_more: false, next_after: null });
  // An id of a turn whose generation is no longer named is 404, never another turn.
  let found = 0;
  for (const { id: response, input } of kept) {
    const read = await openai.responses.retrieve(response).catch((error: unknown) => error);
    if (status(read) === 404) continue;
    expect(outputText(read as never), response).toEqual([`echo: ${input}`]);
    found += 1;
  }
  expect(found).toBeGreaterThan(0);
});
