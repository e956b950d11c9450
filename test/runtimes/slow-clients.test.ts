import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localServerOptions } from '../../functions/local-server.ts';
import { type FakeProvider, fixture, startFakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import {
  type RunningServer,
  root,
  SLOW_SERVER_START_MS,
  serverCommand,
  startDenoServer,
  startHookTimeout,
  startNodeServer,
  startServers,
} from './runtime-process.ts';

/**
 * Slow clients on the Node and Deno servers: a socket that trickles its headers, one that
 * sends its headers and then trickles its body, and one that sends nothing are answered 408
 * and closed once HEADERS_TIMEOUT_MS or REQUEST_TIMEOUT_MS (set small here) has passed, while
 * ordinary requests are served; a streamed turn outlives REQUEST_TIMEOUT_MS, which bounds only
 * receiving the request.
 */

const TOKEN = 'slow-clients-token';
const HEADERS_TIMEOUT_MS = 1000;
const REQUEST_TIMEOUT_MS = 2000;
/** How long a slow socket may stay open: generous, for a loaded machine. */
const BOUND_MS = 20 * HEADERS_TIMEOUT_MS;
let dataDir: string;
let provider: FakeProvider;
const servers: Record<'Node' | 'Deno', RunningServer | undefined> = { Node: undefined, Deno: undefined };

beforeAll(
  async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'tailgate-slow-'));
    // The provider streams the first words of an answer and then hangs, so a streamed turn stays
    // open until MODEL_TIMEOUT_MS, well past REQUEST_TIMEOUT_MS.
    provider = await startFakeProvider(() => ({
      sse: `${fixture('openai-chat-text.sse').split('\n\n').slice(0, 3).join('\n\n')}\n\n`,
      hang: true,
    }));
    const environment = {
      API_TOKEN: TOKEN,
      DATA_DIR: dataDir,
      HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
      REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
      MODEL_TIMEOUT_MS: String(4 * REQUEST_TIMEOUT_MS),
      MODEL_MAX_RETRIES: '0',
      OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
      OPENAI_COMPATIBLE_API_KEY: 'test',
    };
    [servers.Node, servers.Deno] = await startServers([startNodeServer(environment), startDenoServer(environment)]);
  },
  startHookTimeout(SLOW_SERVER_START_MS, 10_000),
);

afterAll(async () => {
  await Promise.all([servers.Node?.stop(), servers.Deno?.stop()]);
  await provider?.close();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

interface SlowSocket {
  /** Whether the server closed the socket within BOUND_MS. */
  closed: boolean;
  /** What the server wrote before closing it. */
  answer: string;
}

/**
 * Opens a socket, writes `head`, then writes `trickle()` every 200 ms (nothing when it is
 * empty) until the server closes the socket or BOUND_MS passes.
 */
function slowSocket(origin: string, head: string, trickle: () => string): Promise<SlowSocket> {
  const { hostname, port } = new URL(origin);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (text: string) => (answer += text));
    socket.on('error', () => undefined);
    const ticker = setInterval(() => {
      const bytes = trickle();
      if (bytes !== '' && socket.writable) socket.write(bytes);
    }, 200);
    const giveUp = setTimeout(() => socket.destroy(), BOUND_MS);
    let closedByServer = false;
    socket.on('end', () => (closedByServer = true));
    socket.on('close', () => {
      clearInterval(ticker);
      clearTimeout(giveUp);
      // A reset (no FIN) closes it too: the socket is gone before BOUND_MS either way.
      resolve({ closed: closedByServer || socket.errored !== null, answer });
    });
    socket.on('connect', () => {
      if (head !== '') socket.write(head);
    });
  });
}

/**
 * Writes `head` (with `Expect: 100-continue`), then `body` once the server sent `100 Continue`;
 * what the server wrote within BOUND_MS, and whether it closed the socket: once it answered,
 * a socket the server is to close (`closes`) is waited for until it does (within BOUND_MS), one
 * it keeps open for a moment.
 */
function awaitingContinue(origin: string, head: string, body: string, closes = false): Promise<SlowSocket> {
  const { hostname, port } = new URL(origin);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    let answer = '';
    let closed = false;
    socket.setEncoding('utf8');
    socket.on('error', () => undefined);
    socket.on('data', (text: string) => {
      answer += text;
      if (answer === 'HTTP/1.1 100 Continue\r\n\r\n') socket.write(body);
      // A whole answer (a JSON body of its Content-Length) ends the wait.
      const [headers, ...rest] = answer.replace(/^HTTP\/1\.1 100 Continue\r\n\r\n/, '').split('\r\n\r\n');
      const length = /\r\ncontent-length: (\d+)/i.exec(headers ?? '')?.[1];
      if (length !== undefined && Buffer.byteLength(rest.join('\r\n\r\n')) >= Number(length)) finish();
    });
    socket.on('end', () => (closed = true));
    socket.on('close', () => finish());
    const timer = setTimeout(() => finish(), BOUND_MS);
    let done = false;
    const settle = () => {
      resolve({ closed: closed || socket.destroyed, answer });
      socket.destroy();
    };
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (closed || socket.destroyed) return settle();
      if (!closes) return void setTimeout(settle, 300);
      const giveUp = setTimeout(settle, BOUND_MS);
      socket.once('close', () => {
        clearTimeout(giveUp);
        settle();
      });
    };
    socket.on('connect', () => socket.write(head));
  });
}

describe.each(['Node', 'Deno'] as const)('%s', (runtime) => {
  it('408 and closes sockets trickling headers, trickling a body or silent; serves others meanwhile', async () => {
    const origin = servers[runtime]!.origin;
    const host = new URL(origin).host;
    let header = 0;
    const slow = Promise.all([
      slowSocket(origin, `GET /healthz HTTP/1.1\r\nHost: ${host}\r\n`, () => `X-Slow-${header++}: a\r\n`),
      slowSocket(
        origin,
        `POST /v1/sessions HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${TOKEN}\r\n` +
          'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"id":"',
        () => 'a',
      ),
      slowSocket(origin, '', () => ''),
    ]);
    // Ordinary requests while the slow ones hold their sockets.
    for (let round = 0; round < 3; round++) {
      expect((await fetch(`${origin}/healthz`)).status).toBe(200);
      const created = await fetch(`${origin}/v1/sessions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ id: `slow-${runtime}-${round}-${Date.now().toString(36)}` }),
      });
      expect(created.status).toBe(201);
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
    const [headers, body, silent] = await slow;
    const closedWith408 = { closed: true, answer: expect.stringMatching(/^HTTP\/1\.1 408 /) };
    expect({ headers, body, silent }).toEqual({ headers: closedWith408, body: closedWith408, silent: closedWith408 });
    // The body cut short is an expected 400 of the app, not an unexpected error with a stack.
    expect(servers[runtime]!.output()).not.toContain('unexpected error');
  }, 60_000);

  it('answers a body it refuses unread (over MAX_BODY_BYTES) saying the connection closes', async () => {
    const origin = servers[runtime]!.origin;
    const host = new URL(origin).host;
    // A keep-alive client's next request would go on a socket the server ends once it gave up
    // draining the body it did not read: the answer tells the client not to reuse it.
    const refused = await slowSocket(
      origin,
      `POST /v1/sessions/unread/items HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${TOKEN}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${5 * 1024 * 1024}\r\n\r\n{"items":[`,
      () => '',
    );
    expect(refused.answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(refused.answer.split('\r\n\r\n')[0]).toMatch(/\r\nconnection: close\r\n/i);
    expect(refused.closed).toBe(true);
  }, 60_000);

  it('sends 100 Continue to a body it reads; one over MAX_BODY_BYTES or unauthorized is answered unsent', async () => {
    const origin = servers[runtime]!.origin;
    const host = new URL(origin).host;
    const head = (path: string, length: number, token = TOKEN) =>
      `POST ${path} HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${token}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${length}\r\nExpect: 100-continue\r\n\r\n`;
    // As curl does with a 6 MB file: the headers, then the body only once 100 Continue came.
    const tooLarge = await awaitingContinue(origin, head('/v1/sessions/demo/turns', 6_000_000), '', true);
    expect(tooLarge.answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(tooLarge.answer).not.toContain('100 Continue');
    expect(JSON.parse(tooLarge.answer.split('\r\n\r\n')[1]!)).toEqual({
      error: {
        code: 'payload_too_large',
        message: "request body is larger than 4194304 bytes; MAX_BODY_BYTES in the server's environment raises it",
        details: { limit: 4194304 },
      },
    });
    expect(tooLarge.closed).toBe(true);
    const unauthorized = await awaitingContinue(origin, head('/v1/sessions', 100, 'wrong'), '', true);
    expect(unauthorized.answer).toMatch(/^HTTP\/1\.1 401 /);
    expect(unauthorized.answer).not.toContain('100 Continue');
    // Its body was not sent, so the socket carries no next request: the answer says so and closes it.
    expect(unauthorized.answer).toMatch(/\r\nConnection: close\r\n/i);
    expect(unauthorized.closed).toBe(true);
    // A body the server takes gets its 100 Continue, is sent and is served.
    const body = JSON.stringify({ id: `continue-${runtime}-${Date.now().toString(36)}` });
    const created = await awaitingContinue(origin, head('/v1/sessions', Buffer.byteLength(body)), body);
    expect(created.answer).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 201 /);
    expect(created.answer).not.toMatch(/\r\nConnection: close\r\n/i);
    // The streamed import reads its body past functions/body-budget.ts: it gets its 100 Continue too.
    const exported = await fetch(`${origin}/v1/sessions/${JSON.parse(body).id}/export`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    const lines = (await exported.text()).replace(/"id":"continue-/, '"id":"imported-');
    const imported = await awaitingContinue(
      origin,
      head('/v1/sessions/import', Buffer.byteLength(lines)).replace('application/json', 'application/x-ndjson'),
      lines,
    );
    expect(imported.answer).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 201 /);
  }, 60_000);

  it('keeps streaming a turn past REQUEST_TIMEOUT_MS', async () => {
    const origin = servers[runtime]!.origin;
    const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    const id = `stream-${runtime}-${Date.now().toString(36)}`;
    const created = await fetch(`${origin}/v1/sessions`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ id, model: 'openai-compatible:fake' }),
    });
    expect(created.status).toBe(201);
    const streamed = await fetch(`${origin}/v1/sessions/${id}/turns`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ input: 'take your time', stream: true }),
    });
    expect(streamed.status).toBe(200);
    // The provider hangs after its first words: the stream ends with the model timeout's error
    // event (MODEL_TIMEOUT_MS, four times REQUEST_TIMEOUT_MS), not cut short without one.
    const text = await streamed.text();
    const names = [...text.matchAll(/^event: (.+)$/gm)].map((match) => match[1]);
    expect(names[0]).toBe('turn.started');
    expect(names).toContain('output_text.delta');
    expect(names.at(-1)).toBe('error');
    expect(text).toContain('"model_timeout"');
  }, 60_000);

  it('refuses to start with a bad timeout, naming it', async () => {
    const [command, args] = serverCommand(runtime, 0);
    const child = spawn(command, args, {
      cwd: root,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '/tmp',
        DENO_NO_UPDATE_CHECK: '1',
        HEADERS_TIMEOUT_MS: '10s',
      },
    });
    let stderr = '';
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const status = await new Promise((resolve) => child.once('close', resolve));
    expect(status).toBe(1);
    expect(stderr).toContain('invalid HEADERS_TIMEOUT_MS "10s"');
  }, 60_000);
});

it('reads HEADERS_TIMEOUT_MS and REQUEST_TIMEOUT_MS (default 10 s and 60 s), refusing bad ones by name', () => {
  expect(localServerOptions([], {})).toMatchObject({ headersTimeoutMs: 10_000, requestTimeoutMs: 60_000 });
  expect(localServerOptions([], { HEADERS_TIMEOUT_MS: '500', REQUEST_TIMEOUT_MS: ' 500 ' })).toMatchObject({
    headersTimeoutMs: 500,
    requestTimeoutMs: 500,
  });
  for (const [name, value] of [
    ['HEADERS_TIMEOUT_MS', '10s'],
    ['HEADERS_TIMEOUT_MS', '0'],
    ['REQUEST_TIMEOUT_MS', '-1'],
    ['REQUEST_TIMEOUT_MS', '1.5'],
  ] as const)
    expect(() => localServerOptions([], { [name]: value }), `${name}=${value}`).toThrow(`invalid ${name}`);
  expect(() => localServerOptions([], { HEADERS_TIMEOUT_MS: '30000', REQUEST_TIMEOUT_MS: '20000' })).toThrow(
    'HEADERS_TIMEOUT_MS (30000) must not exceed REQUEST_TIMEOUT_MS (20000)',
  );
});

it('refuses a port or a timeout that is no decimal digits (0x10, 1e3, 1_000), naming it and its text', () => {
  for (const [name, value] of [
    ['HEADERS_TIMEOUT_MS', '0x10'],
    ['REQUEST_TIMEOUT_MS', '1e5'],
    ['SHUTDOWN_GRACE_MS', ' 0b11'],
    ['REPEATED_SIGNAL_MS', '1_000'],
  ] as const)
    expect(() => localServerOptions([], { [name]: value }), `${name}=${value}`).toThrow(
      `invalid ${name} ${JSON.stringify(value.trim())}`,
    );
  for (const port of ['0x1F90', '8e3', '8_787'])
    expect(() => localServerOptions([], { PORT: port }), port).toThrow(`invalid port ${JSON.stringify(port)}`);
  expect(() => localServerOptions(['--port', '0o17'], {})).toThrow('invalid port "0o17" (--port or PORT)');
  expect(localServerOptions(['--port', '9000'], { HEADERS_TIMEOUT_MS: '5000' })).toMatchObject({
    port: 9000,
    headersTimeoutMs: 5000,
  });
});

it('refuses an unknown option (a typo, --help) with the options it takes', () => {
  const options = 'the options are --port <number>, --host <address> and --allow-anonymous';
  expect(() => localServerOptions(['--prot', '9000'], {})).toThrow(`Unknown option '--prot'; ${options}`);
  expect(() => localServerOptions(['--help'], {})).toThrow(`Unknown option '--help'; ${options}`);
  expect(() => localServerOptions(['9000'], {})).toThrow(options);
  expect(localServerOptions(['--port', '9000', '--host', '0.0.0.0', '--allow-anonymous'], {})).toMatchObject({
    port: 9000,
    hostname: '0.0.0.0',
    allowAnonymous: true,
  });
});

it('refuses a SHUTDOWN_GRACE_MS over 2^31 - 1 ms (a timer fires at once); a blank HOST or PORT is unset', () => {
  expect(() => localServerOptions([], { SHUTDOWN_GRACE_MS: '3000000000' })).toThrow('invalid SHUTDOWN_GRACE_MS');
  expect(localServerOptions([], { SHUTDOWN_GRACE_MS: '2147483647' }).shutdownGraceMs).toBe(2_147_483_647);
  // A blank host would listen on every interface, a blank port on a random one.
  expect(localServerOptions([], { HOST: '', PORT: ' ' })).toMatchObject({ hostname: '127.0.0.1', port: 8787 });
});

it('reads REPEATED_SIGNAL_MS (default a second), refusing a bad one by name', () => {
  expect(localServerOptions([], {}).repeatedSignalMs).toBe(1000);
  expect(localServerOptions([], { REPEATED_SIGNAL_MS: ' 250 ' }).repeatedSignalMs).toBe(250);
  expect(() => localServerOptions([], { REPEATED_SIGNAL_MS: '0' })).toThrow('invalid REPEATED_SIGNAL_MS');
});

it('reads QUEUE_SWEEP_MS (default a minute), refusing a bad one by name', () => {
  expect(localServerOptions([], {}).queueSweepMs).toBe(60_000);
  expect(localServerOptions([], { QUEUE_SWEEP_MS: ' 500 ' }).queueSweepMs).toBe(500);
  for (const value of ['0', '1e3', '3000000000'])
    expect(() => localServerOptions([], { QUEUE_SWEEP_MS: value }), value).toThrow('invalid QUEUE_SWEEP_MS');
});
