import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { parseResponseId, responseId } from '../../lib/openai/ids.ts';
import { fixture } from '../support/fake-providers/fake-provider-server.ts';
import { clientOnFakeOpenAI } from './server.ts';

// A foreground response retrieved while its turn still runs (the model held until its gate
// opens), through the official client against the real app: it is in progress, with no error,
// no completed_at and the model its request named (an alias), as once it ended.
let open: () => void = () => {};
let gate: Promise<void> = Promise.resolve();
const world = clientOnFakeOpenAI((request) =>
  request.body.stream
    ? { sse: fixture('openai-chat-text.sse'), gate }
    : { json: JSON.parse(fixture('openai-chat-text.json')), gate },
);

/** Holds the model's answers until the returned function is called. */
function hold(): () => void {
  gate = new Promise<void>((resolve) => (open = resolve));
  return () => {
    open();
    gate = Promise.resolve();
  };
}

const running = {
  object: 'response',
  status: 'in_progress',
  completed_at: null,
  error: null,
  output: [],
  usage: null,
  model: 'gpt-4o-mini',
};

describe('a foreground response retrieved while it runs', () => {
  it('streamed: in progress with the model it named, then completed as its stream ended', async () => {
    const release = hold();
    const stream = await world.client.responses.create({ model: 'gpt-4o-mini', input: 'hi', stream: true });
    const events: ResponseStreamEvent[] = [];
    const iterator = stream[Symbol.asyncIterator]();
    const first = await iterator.next();
    const created = first.value as ResponseStreamEvent & { type: 'response.created' };
    expect(created.type).toBe('response.created');
    const id = created.response.id;
    const retrieved = await world.client.responses.retrieve(id).finally(release);
    expect(retrieved).toMatchObject({ id, ...running });
    for (let next = await iterator.next(); !next.done; next = await iterator.next()) events.push(next.value);
    const completed = events.at(-1) as ResponseStreamEvent & { type: 'response.completed' };
    expect(completed.type).toBe('response.completed');
    const ended = await world.client.responses.retrieve(id);
    expect(ended).toMatchObject({ id, status: 'completed', model: 'gpt-4o-mini', error: null });
    expect(ended.output_text).toBe(completed.response.output_text);
  });

  it('not streamed: in progress under the id its answer then has', async () => {
    const conversation = await world.client.conversations.create({});
    const before = await world.client.responses.create({
      model: 'gpt-4o-mini',
      input: 'hi',
      conversation: conversation.id,
    });
    const release = hold();
    const pending = world.client.responses.create({
      model: 'gpt-4o-mini',
      input: 'again',
      conversation: conversation.id,
    });
    // The conversation's second turn: its input is seq 3 (after the first's input and answer), its output from 4.
    const id = responseId({ ...parseResponseId(before.id)!, turn: 2, inputSeq: 3, outputSeq: 4 });
    for (;;) {
      const turns = await world.client.conversations.items.list(conversation.id);
      if (turns.data.length > 2) break;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const retrieved = await world.client.responses.retrieve(id).finally(release);
    expect(retrieved).toMatchObject({ id, ...running });
    const answered = await pending;
    expect(answered.id).toBe(id);
    expect(await world.client.responses.retrieve(id)).toMatchObject({
      id,
      status: 'completed',
      model: 'gpt-4o-mini',
      output_text: answered.output_text,
    });
  });
});
