import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll } from 'vitest';

/** A request the fake provider received, with its JSON body parsed. */
export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: any;
  /** Settles when the connection of this request closes (answered, or dropped by the client). */
  closed: Promise<void>;
}

/**
 * What the fake provider answers: a JSON/text body, an SSE body sent event by event, or nothing;
 * with `gate`, once the gate settles (the model runs until then).
 */
export type FakeReply = (
  | { status?: number; headers?: Record<string, string>; json: unknown }
  | { status?: number; headers?: Record<string, string>; text: string; contentType?: string }
  /**
   * An SSE body; with `hang`, the connection stays open after the last event; `gapMs` between
   * events; with `pause`, the events after the first `after` wait until `until` settles.
   */
  | { sse: string; hang?: true; gapMs?: number; pause?: { after: number; until: Promise<unknown> } }
  | { hang: true }
) & { gate?: Promise<unknown> };

export interface FakeProvider {
  /** `http://127.0.0.1:<port>/v1` */
  baseURL: string;
  requests: RecordedRequest[];
  close(): Promise<void>;
}

/** The text of a recorded provider response under fixtures/. */
export function fixture(name: string): string {
  return readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8');
}

/**
 * Starts a provider on loopback (port 0) that records each request and answers with `reply`.
 * SSE bodies are written one event per chunk, as a real provider flushes them.
 */
export async function startFakeProvider(reply: (request: RecordedRequest) => FakeReply): Promise<FakeProvider> {
  const requests: RecordedRequest[] = [];
  const server = createServer((incoming, response) => {
    const closed = new Promise<void>((resolve) => response.on('close', () => resolve()));
    const chunks: Buffer[] = [];
    incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
    incoming.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: unknown = raw;
      try {
        body = raw === '' ? undefined : JSON.parse(raw);
      } catch {
        // keep the raw text
      }
      const request: RecordedRequest = {
        method: incoming.method ?? 'GET',
        path: incoming.url ?? '/',
        headers: incoming.headers,
        body,
        closed,
      };
      requests.push(request);
      void answer(response, reply(request));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function answer(response: ServerResponse, reply: FakeReply): Promise<void> {
  await reply.gate;
  if ('hang' in reply && !('sse' in reply)) return;
  if ('json' in reply) {
    response.writeHead(reply.status ?? 200, { 'content-type': 'application/json', ...reply.headers });
    response.end(JSON.stringify(reply.json));
    return;
  }
  if ('text' in reply) {
    response.writeHead(reply.status ?? 200, {
      'content-type': reply.contentType ?? 'application/json',
      ...reply.headers,
    });
    response.end(reply.text);
    return;
  }
  response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  let written = 0;
  for (const event of reply.sse.split(/(?<=\n\n)/)) {
    if (event.trim() === '') continue;
    if (written++ === reply.pause?.after) await reply.pause.until;
    response.write(event);
    await new Promise((resolve) => (reply.gapMs ? setTimeout(resolve, reply.gapMs) : setImmediate(resolve)));
  }
  if (!reply.hang) response.end();
}

/**
 * A provider for one test file: started before its tests and closed after them, it answers every
 * request with `next`, which the tests set (a 500 until one does).
 */
export function fakeProviderForFile(): { next: FakeReply; readonly provider: FakeProvider } {
  let provider: FakeProvider | undefined;
  const fake = {
    next: { status: 500, json: {} } as FakeReply,
    get provider(): FakeProvider {
      if (!provider) throw new Error('the fake provider starts before the tests');
      return provider;
    },
  };
  beforeAll(async () => {
    provider = await startFakeProvider(() => fake.next);
  });
  afterAll(async () => {
    await provider?.close();
  });
  return fake;
}
