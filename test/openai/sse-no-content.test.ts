import { describe, expect, it } from 'vitest';
import { eventQueue, noContentWhenEmpty, type SseMessage, sseResponse } from '../../lib/openai/sse.ts';

// A retrieve with `Last-Event-ID` awaits its stream's first message: none (the reader has the
// end) is a 204, one is the stream as it was, and a client gone meanwhile stops the stream.
describe('noContentWhenEmpty', () => {
  it('answers a 204 for a stream that ends before its first message', async () => {
    const queue = eventQueue<SseMessage>();
    queue.close();
    const answer = await noContentWhenEmpty(sseResponse(queue), new AbortController().signal);
    expect(answer.status).toBe(204);
    expect(answer.body).toBeNull();
  });

  it('answers the stream whole, its first message too, with its headers', async () => {
    const queue = eventQueue<SseMessage>();
    const answered = noContentWhenEmpty(sseResponse(queue), new AbortController().signal);
    queue.push({ id: '4', event: 'response.completed', data: '{}' });
    queue.push({ data: '[DONE]' });
    queue.close();
    const answer = await answered;
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(await answer.text()).toBe('id: 4\nevent: response.completed\ndata: {}\n\ndata: [DONE]\n\n');
  });

  it('stops the stream, a 499 nobody reads, once its client went away while it waited', async () => {
    const queue = eventQueue<SseMessage>();
    let cancelled!: () => void;
    const stopped = new Promise<void>((resolve) => (cancelled = resolve));
    const leaving = new AbortController();
    const answered = noContentWhenEmpty(sseResponse(queue, cancelled), leaving.signal);
    leaving.abort();
    expect((await answered).status).toBe(499);
    await stopped;
  });

  it('passes a cancel of its answer on to the stream', async () => {
    const queue = eventQueue<SseMessage>();
    let cancelled!: () => void;
    const stopped = new Promise<void>((resolve) => (cancelled = resolve));
    queue.push({ id: '0', data: '{}' });
    const answer = await noContentWhenEmpty(sseResponse(queue, cancelled), new AbortController().signal);
    await answer.body!.cancel();
    await stopped;
  });
});
