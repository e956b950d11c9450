import { mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type RunningServer,
  SLOW_SERVER_START_MS,
  startDenoServer,
  startHookTimeout,
  startNodeServer,
  startServers,
} from './runtime-process.ts';

/**
 * Bytes node:http's parser refuses never reach the service; the Node and Deno servers answer
 * them in the API's error JSON all the same (functions/client-error.ts), not with a bare 400.
 * Deno's node:http names no parser reason: every refusal but a header overflow is `HPE_ERROR`.
 */

const TOKEN = 'malformed-requests-token';
let dataDir: string;
const servers: Record<'Node' | 'Deno', RunningServer | undefined> = { Node: undefined, Deno: undefined };

beforeAll(
  async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'tailgate-malformed-'));
    const environment = { API_TOKEN: TOKEN, DATA_DIR: dataDir };
    [servers.Node, servers.Deno] = await startServers([startNodeServer(environment), startDenoServer(environment)]);
  },
  startHookTimeout(SLOW_SERVER_START_MS, 10_000),
);

afterAll(async () => {
  await Promise.all([servers.Node?.stop(), servers.Deno?.stop()]);
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

/** Writes `bytes` on a new connection; everything the server wrote until it closed it (10 s at most). */
function rawExchange(server: RunningServer, bytes: string): Promise<string> {
  const { hostname, port } = new URL(server.origin);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname, () => socket.write(bytes));
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (text: string) => (answer += text));
    socket.on('error', () => undefined);
    const timer = setTimeout(() => socket.destroy(), 10_000);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(answer);
    });
  });
}

function parsed(answer: string): { status: string; headers: string; body: unknown } {
  const [head = '', ...rest] = answer.split('\r\n\r\n');
  const [statusLine = '', ...headers] = head.split('\r\n');
  return { status: statusLine, headers: headers.join('\n').toLowerCase(), body: JSON.parse(rest.join('\r\n\r\n')) };
}

describe.each(['Node', 'Deno'] as const)('%s', (runtime) => {
  let server: RunningServer;
  beforeAll(() => {
    server = servers[runtime]!;
  });

  it('a body longer than its Content-Length is a 400 invalid_request in error JSON; nothing is stored', async () => {
    const body = JSON.stringify({ id: 'cut-short' });
    const answer = await rawExchange(
      server,
      `POST /v1/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\n` +
        `Content-Type: application/json\r\nContent-Length: 5\r\n\r\n${body}`,
    );
    const { status, headers, body: error } = parsed(answer);
    expect(status).toBe('HTTP/1.1 400 Bad Request');
    expect(headers).toContain('content-type: application/json');
    expect(headers).toContain('connection: close');
    expect(error).toEqual({
      error: {
        code: 'invalid_request',
        message: expect.stringMatching(/^malformed HTTP request \(.+\); a body longer than its Content-Length/),
        details: { reason: runtime === 'Deno' ? 'HPE_ERROR' : 'HPE_INVALID_METHOD' },
      },
    });
    const session = await fetch(`${server.origin}/v1/sessions/cut-short`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(session.status).toBe(404);
  });

  it('bytes that are no HTTP request are a 400 invalid_request, headers over the limit a 431, as JSON', async () => {
    const garbage = parsed(await rawExchange(server, 'NOT AN HTTP REQUEST\r\n\r\n'));
    expect(garbage.status).toBe('HTTP/1.1 400 Bad Request');
    expect((garbage.body as { error: { code: string } }).error.code).toBe('invalid_request');
    const huge = parsed(
      await rawExchange(server, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`),
    );
    expect(huge.status).toBe('HTTP/1.1 431 Request Header Fields Too Large');
    expect(huge.body).toEqual({
      error: {
        code: 'headers_too_large',
        message: expect.stringMatching(/^the request's headers are too large/),
        details: { reason: 'HPE_HEADER_OVERFLOW' },
      },
    });
    // The server goes on serving.
    expect((await fetch(`${server.origin}/healthz`)).status).toBe(200);
  });

  // node:http answered an expectation other than 100-continue with a bare 417, no body.
  it('an Expect other than 100-continue is a 417 expectation_failed in error JSON; nothing is stored', async () => {
    const body = JSON.stringify({ id: 'expects-much' });
    const answer = await rawExchange(
      server,
      `POST /v1/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\nExpect: 200-ok\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
    );
    const { status, headers, body: error } = parsed(answer);
    expect(status).toBe('HTTP/1.1 417 Expectation Failed');
    expect(headers).toContain('content-type: application/json');
    expect(headers).toContain('x-request-id: req_');
    expect(error).toEqual({
      error: {
        code: 'expectation_failed',
        message: 'Expect: 200-ok cannot be met: only 100-continue is taken',
        details: { expect: '200-ok' },
      },
    });
    const session = await fetch(`${server.origin}/v1/sessions/expects-much`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(session.status).toBe(404);
  });

  // The OpenAI-compatible routes answer every error in OpenAI's shape (docs/OPENAI.md), this one too.
  it.each(['/v1/responses', '/v1/chat/completions?x=1'])(
    "an Expect other than 100-continue on %s is a 417 in OpenAI's error shape",
    async (path) => {
      const body = JSON.stringify({ model: 'echo', input: 'hi', messages: [{ role: 'user', content: 'hi' }] });
      const answer = await rawExchange(
        server,
        `POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\nExpect: 200-ok\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
      );
      const { status, headers, body: error } = parsed(answer);
      expect(status).toBe('HTTP/1.1 417 Expectation Failed');
      expect(headers).toContain('content-type: application/json');
      expect(headers).toContain('x-request-id: req_');
      expect(error).toEqual({
        error: {
          message: 'Expect: 200-ok cannot be met: only 100-continue is taken',
          type: 'invalid_request_error',
          param: null,
          code: 'expectation_failed',
          details: { expect: '200-ok' },
        },
      });
    },
  );

  // Unlike a parser's refusal, an Expect's comes after the request before it on the connection is answered.
  it('answers a request sent before a refused Expect on the same connection, then the 417', async () => {
    const answer = await rawExchange(
      server,
      'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n' +
        `POST /v1/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\nExpect: 200-ok\r\n` +
        'Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}',
    );
    expect(answer.match(/HTTP\/1\.1 \d+/g)).toEqual(['HTTP/1.1 200', 'HTTP/1.1 417']);
    expect(answer).toContain('"code":"expectation_failed"');
  });
});
