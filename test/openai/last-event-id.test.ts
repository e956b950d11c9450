import { describe, expect, it } from 'vitest';
import { clientOnTailgate, TOKEN } from './server.ts';

// An EventSource that reconnects to a Responses stream sends the last SSE id it got as
// `Last-Event-ID`: each event carries its sequence_number as that id, and a retrieve with
// `stream=true` starts after the later of it and `starting_after`, as the native events route
// does. A reader that has the terminal event of a response that ended gets a 204, which stops an
// EventSource (one without the header keeps the empty 200 the `openai` client takes).
const world = clientOnTailgate();

interface Message {
  id?: string;
  event?: string;
  /** The data parsed, but for `[DONE]` (a replay's objects may order their keys otherwise). */
  data: unknown;
}

/** The messages of a server-sent events body, each with its `id`, `event` and `data` fields. */
function messagesOf(text: string): Message[] {
  return text
    .split('\n\n')
    .filter((block) => block !== '')
    .map((block) => {
      const message: Message = { data: '' };
      for (const line of block.split('\n')) {
        const [field, ...rest] = line.split(': ');
        const value = rest.join(': ');
        if (field === 'id' || field === 'event' || field === 'data') message[field] = value;
      }
      if (message.data !== '[DONE]') message.data = JSON.parse(message.data as string);
      return message;
    });
}

const authorization = `Bearer ${TOKEN}`;

/** A raw retrieve of `id`'s events, with `query` and a `Last-Event-ID` header when given. */
function retrieve(id: string, query: string, lastEventId?: string) {
  return fetch(`${world.tailgate.baseURL}/responses/${id}?stream=true${query}`, {
    headers: { authorization, ...(lastEventId !== undefined ? { 'last-event-id': lastEventId } : {}) },
  });
}

/** A streamed response created with a raw POST (`background` when asked): its id and its messages. */
async function streamed(background = false) {
  const response = await fetch(`${world.tailgate.baseURL}/responses`, {
    method: 'POST',
    headers: { authorization, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'echo', input: 'number my events', stream: true, background }),
  });
  expect(response.status).toBe(200);
  const messages = messagesOf(await response.text());
  const id = (messages[0]!.data as { response: { id: string } }).response.id;
  return { id, messages };
}

/** Each event's sequence_number, and the SSE id of its message. */
const numbered = (messages: Message[]) =>
  messages.map((message) => ({
    id: message.id,
    sequence: (message.data as { sequence_number?: number }).sequence_number,
  }));

describe('Responses streams: SSE ids and Last-Event-ID', () => {
  it('numbers each event of a create stream and of a retrieve with its sequence_number as the SSE id', async () => {
    for (const background of [false, true]) {
      const { id, messages } = await streamed(background);
      expect(messages.at(-1)).toEqual({ data: '[DONE]' });
      const events = messages.slice(0, -1);
      expect(events.length).toBeGreaterThan(3);
      for (const { id: sseId, sequence } of numbered(events)) expect(sseId).toBe(String(sequence));
      const replayed = await retrieve(id, '');
      expect(messagesOf(await replayed.text())).toEqual(messages);
    }
  });

  it('resumes after Last-Event-ID, or after starting_after when that is later', async () => {
    const { id, messages } = await streamed();
    const past = (n: number) => messages.filter((message) => message.id === undefined || Number(message.id) > n);
    const header = await retrieve(id, '', '2');
    expect(header.status).toBe(200);
    expect(messagesOf(await header.text())).toEqual(past(2));
    const laterHeader = await retrieve(id, '&starting_after=1', '3');
    expect(messagesOf(await laterHeader.text())).toEqual(past(3));
    const laterQuery = await retrieve(id, '&starting_after=4', '1');
    expect(messagesOf(await laterQuery.text())).toEqual(past(4));
  });

  it('answers a 204 to a Last-Event-ID at or past the terminal event; without it an empty 200', async () => {
    for (const background of [false, true]) {
      const { id, messages } = await streamed(background);
      const last = Number(messages.at(-2)!.id);
      expect(messages.at(-2)!.data).toMatchObject({ type: 'response.completed', sequence_number: last });
      for (const lastEventId of [last, last + 1, last + 100]) {
        const ended = await retrieve(id, '', String(lastEventId));
        expect(ended.status).toBe(204);
        expect(await ended.text()).toBe('');
        const withQuery = await retrieve(id, '&starting_after=1', String(lastEventId));
        expect(withQuery.status).toBe(204);
        await withQuery.body?.cancel();
      }
      const plain = await retrieve(id, `&starting_after=${last}`);
      expect(plain.status).toBe(200);
      expect(await plain.text()).toBe('');
      // Before the terminal event, the header resumes as starting_after does.
      const before = await retrieve(id, '', String(last - 1));
      expect(before.status).toBe(200);
      expect(messagesOf(await before.text())).toEqual(messages.slice(-2));
    }
  });

  it("refuses a malformed Last-Event-ID with a 400 in OpenAI's shape", async () => {
    const { id } = await streamed();
    for (const value of ['x', '-1', '1.5', '1e3', ' ', '12345678901234567']) {
      const refused = await retrieve(id, '', value);
      expect(refused.status, value).toBe(400);
      expect(((await refused.json()) as { error: unknown }).error, value).toMatchObject({
        type: 'invalid_request_error',
        param: 'last-event-id',
      });
    }
  });
});
