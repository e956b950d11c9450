import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startServer, startServers } from '../support/server-process.ts';

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

// A server that is still starting when another fails to start must not be left running: the
// failure would end the hook before its start, and afterAll would not know of it.
describe('startServers', () => {
  it('stops the servers that started when another failed to, before it throws', async () => {
    const directory = await mkdtemp(join(tmpdir(), 'tailgate-start-servers-'));
    const failed = join(directory, 'failed');
    const pidFile = join(directory, 'pid');
    // Starts only once the other has failed: its start is under way when the failure is known.
    const late = `
const { existsSync, writeFileSync } = require('node:fs');
const { createServer } = require('node:http');
const wait = () => {
  if (!existsSync(${JSON.stringify(failed)})) return setTimeout(wait, 10);
  writeFileSync(${JSON.stringify(pidFile)}, String(process.pid));
  const server = createServer((request, response) => response.end('ok'));
  const banner = () => console.log('tailgate (fake) on http://127.0.0.1:' + server.address().port + ' ');
  server.listen(0, '127.0.0.1', banner);
};
wait();
`;
    const failing = `require('node:fs').writeFileSync(${JSON.stringify(failed)}, ''); process.exit(3);`;
    try {
      await expect(
        startServers([
          startServer(process.execPath, ['-e', late], { cwd: process.cwd(), env: {}, timeoutMs: 20_000 }),
          startServer(process.execPath, ['-e', failing], { cwd: process.cwd(), env: {}, timeoutMs: 20_000 }),
        ]),
      ).rejects.toThrow(/server exited early \(3\)/);
      const pid = Number(await readFile(pidFile, 'utf8'));
      expect(() => process.kill(pid, 0)).toThrow(expect.objectContaining({ code: 'ESRCH' }));
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  });
});
