import { createServer, type Server } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { answerExpectation } from '../../functions/client-error.ts';
import { lingerOnRefusal } from '../../functions/lingering-close.ts';

/**
 * A socket lingering after a refusal (functions/lingering-close.ts) reads what its client still
 * sends only to drop it: the connection was answered `Connection: close`, so no request that
 * follows the refused body on it is run (RFC 9112, 9.6), and its socket is closed.
 */

let server: Server | undefined;

afterEach(async () => {
  await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
  server = undefined;
});

it('runs no request sent after the refused body on the same connection, and closes it', async () => {
  const seen: string[] = [];
  server = createServer((request, response) => {
    seen.push(`${request.method} ${request.url}`);
    if (request.url === '/refused') {
      response.writeHead(413, { connection: 'close' }).end();
      return;
    }
    request.resume();
    request.on('end', () => response.end('ran'));
  });
  lingerOnRefusal(server);
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  let read = '';
  const answered = new Promise<void>((resolve) =>
    socket.on('data', (data: Buffer) => {
      read += data.toString('latin1');
      if (read.includes('\r\n\r\n')) resolve();
    }),
  );
  socket.write('POST /refused HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n');
  await answered;
  expect(read).toMatch(/^HTTP\/1\.1 413 /);
  socket.end(Buffer.concat([Buffer.alloc(1000, 0x20), Buffer.from('DELETE /next HTTP/1.1\r\nHost: x\r\n\r\n')]));
  await closed;
  expect(seen).toEqual(['POST /refused']);
  expect(read.match(/HTTP\/1\.1 /g)).toHaveLength(1);
});

// A request refused for its Expect (functions/client-error.ts) never reaches a 'request' listener.
it('reads and drops the body of a request refused for its Expect while its client sends it', async () => {
  server = createServer(() => undefined);
  server.on('checkExpectation', answerExpectation);
  lingerOnRefusal(server);
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  const chunk = Buffer.alloc(64 * 1024, 0x20);
  const chunks = 64;
  const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
  const errors: string[] = [];
  socket.on('error', (error: NodeJS.ErrnoException) => errors.push(error.code ?? error.message));
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  let read = '';
  const answered = new Promise<void>((resolve) =>
    socket.on('data', (data: Buffer) => {
      read += data.toString('latin1');
      if (read.includes('}}')) resolve();
    }),
  );
  socket.write(
    `POST /refused HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Length: ${chunk.length * chunks}\r\n\r\n`,
  );
  await Promise.race([answered, closed]);
  expect(read).toMatch(/^HTTP\/1\.1 417 /);
  // The client sends its body on: the socket reads it, so no write meets a reset connection.
  for (let sent = 0; sent < chunks && !socket.destroyed; sent++)
    await new Promise<void>((resolve) => socket.write(chunk, () => resolve()));
  socket.end();
  await closed;
  expect(errors).toEqual([]);
});
