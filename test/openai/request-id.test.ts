import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ListOptions, ListResult } from '../../lib/store/object-store.ts';
import { startTailgate, TOKEN } from './server.ts';

// Every answer names its request in x-request-id, as OpenAI's API does: the official client
// reads it (`request_id`, an error's `requestID`), and the turn's log line carries the same id
// (docs/API.md, Headers; "Metrics and logs").
const REQUEST_ID = /^req_[0-9a-f]{24}$/;

/** A store whose listings fail while `failing` is set: a request it serves answers 500. */
class FailingListStore extends MemoryStore {
  failing = false;
  override async list(prefix: string, options?: ListOptions): Promise<ListResult> {
    if (this.failing) throw new Error('listing refused');
    return super.list(prefix, options);
  }
}

const store = new FailingListStore();
const lines: Record<string, unknown>[] = [];
const failures: string[] = [];
let tailgate: Awaited<ReturnType<typeof startTailgate>>;
let client: OpenAI;
beforeAll(async () => {
  tailgate = await startTailgate({}, store, {
    logLine: (line) => lines.push(JSON.parse(line)),
    log: (message) => failures.push(message),
  });
  client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
});
afterAll(() => tailgate.close());

/** The log line of the turn that answered `response`. */
function lineOf(response: OpenAI.Responses.Response): Record<string, unknown> | undefined {
  return lines.find((line) => line.session_id === response.conversation?.id && line.event === 'turn');
}

describe('x-request-id', () => {
  it("is the client's request_id, one per request, and the turn's log line names it", async () => {
    const first = await client.responses.create({ model: 'echo', input: 'hi' }).withResponse();
    expect(first.request_id).toMatch(REQUEST_ID);
    expect(lineOf(first.data)?.request_id).toBe(first.request_id);

    const next = await client.responses
      .create({ model: 'echo', input: 'again', previous_response_id: first.data.id })
      .withResponse();
    expect(next.request_id).toMatch(REQUEST_ID);
    expect(next.request_id).not.toBe(first.request_id);
    const turns = lines.filter((line) => line.session_id === first.data.conversation?.id);
    expect(turns.map((line) => line.request_id)).toEqual([first.request_id, next.request_id]);
  });

  it('is on a streamed response, and its turn logs it', async () => {
    const { data: stream, request_id } = await client.responses
      .create({ model: 'echo', input: 'streamed', stream: true })
      .withResponse();
    expect(request_id).toMatch(REQUEST_ID);
    let completed: OpenAI.Responses.Response | undefined;
    for await (const event of stream) if (event.type === 'response.completed') completed = event.response;
    expect(lineOf(completed!)?.request_id).toBe(request_id);
  });

  it("is on errors: the client's error names it", async () => {
    const missing = await client.responses.retrieve('resp_missing').catch((error: unknown) => error);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    expect((missing as InstanceType<typeof OpenAI.APIError>).requestID).toMatch(REQUEST_ID);

    const stranger = new OpenAI({ apiKey: 'not-the-token', baseURL: tailgate.baseURL, maxRetries: 0 });
    const refused = await stranger.responses.create({ model: 'echo', input: 'hi' }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((refused as InstanceType<typeof OpenAI.APIError>).requestID).toMatch(REQUEST_ID);
  });

  it("is in a failure's log message, as its 500 answer names it", async () => {
    store.failing = true;
    const failed = await client.responses
      .create({ model: 'echo', input: 'hi' })
      .catch((error: unknown) => error)
      .finally(() => {
        store.failing = false;
      });
    expect(failed).toBeInstanceOf(OpenAI.InternalServerError);
    const id = (failed as InstanceType<typeof OpenAI.APIError>).requestID;
    expect(id).toMatch(REQUEST_ID);
    expect(failures.filter((message) => message.includes(id!))).toHaveLength(1);
  });
});
