import { describe, expect, it } from 'vitest';
import { startServer } from '../support/server-process.ts';

// startServer (test/support/server-process.ts) talks to the URL a server prints once it listens:
// the whole URL, however the server's output reaches it in pieces.

/** A server on port 0 answering /healthz, printing its banner in two writes split inside the port. */
const splitBanner = `
const { createServer } = require('node:http');
const server = createServer((request, response) => response.end(request.url === '/healthz' ? 'ok' : 'other'));
server.listen(0, '127.0.0.1', () => {
  const line = 'tailgate (fake) on http://127.0.0.1:' + server.address().port + '\\n';
  const cut = line.indexOf(':', 'tailgate (fake) on http:'.length) + 2;
  process.stdout.write(line.slice(0, cut), () => setTimeout(() => process.stdout.write(line.slice(cut)), 200));
});
`;

describe('startServer', () => {
  it('talks to the whole URL the server printed, a line its output gave in two pieces', async () => {
    const server = await startServer(process.execPath, ['-e', splitBanner], {
      cwd: process.cwd(),
      env: {},
      timeoutMs: 10_000,
    });
    try {
      expect(server.origin).toMatch(/^http:\/\/127\.0\.0\.1:\d{2,5}$/);
      expect(server.output()).toContain(`tailgate (fake) on ${server.origin}\n`);
      expect(await (await fetch(`${server.origin}/healthz`)).text()).toBe('ok');
    } finally {
      await server.stop();
    }
  });
});
