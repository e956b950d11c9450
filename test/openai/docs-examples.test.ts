import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTailgate, TOKEN } from './server.ts';

// The ```ts examples of docs/OPENAI.md run as written, with the official clients, against the
// app on a loopback port (the echo model). A block that imports starts a program; a block
// without imports goes on with the program before it. Each program runs in its own Node process
// with OPENAI_API_KEY set, as a user's shell may have it, and fails on any request that leaves
// the server it is pointed at (a client library's telemetry sending the key elsewhere:
// @openai/agents' trace exporter posts to api.openai.com with OPENAI_API_KEY unless turned off).

const root = fileURLToPath(new URL('../..', import.meta.url));
const run = promisify(execFile);
/**
 * How long a program may run (it takes about a second; a loaded machine may take many), killed
 * past it; the test waits longer than that, so a slow program fails with its output and no
 * process outlives the test, the server and the folder it runs from.
 */
const PROGRAM_MS = 60_000;

const GUARD = `
const origin = process.env.EXAMPLES_ORIGIN;
const real = globalThis.fetch;
globalThis.fetch = async (input, init) => {
  const url = new URL(input instanceof Request ? input.url : String(input));
  if (url.origin !== origin) {
    process.exitCode = 3;
    console.error('request outside the server: ' + url.href);
    throw new Error('refused: ' + url.href);
  }
  return real(input, init);
};
`;

/** The programs the ```ts blocks make, in order. */
function programs(page: string): string[] {
  const out: string[] = [];
  for (const [, code] of page.matchAll(/```ts\n([\s\S]*?)```/g)) {
    if (/^import /m.test(code!) || out.length === 0) out.push(code!);
    else out[out.length - 1] += code!;
  }
  return out;
}

describe('docs/OPENAI.md examples', () => {
  let tailgate: Awaited<ReturnType<typeof startTailgate>>;
  let dir: string;
  beforeAll(async () => {
    tailgate = await startTailgate();
    await mkdir(join(root, '.tailgate'), { recursive: true });
    dir = await mkdtemp(join(root, '.tailgate', 'docs-examples-'));
    await writeFile(join(dir, 'guard.mjs'), GUARD);
  });
  afterAll(async () => {
    await tailgate?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const page = readFileSync(join(root, 'docs/OPENAI.md'), 'utf8');
  const all = programs(page);

  it('has an example for each client the page names', () => {
    for (const client of ["from 'openai'", "from '@openai/agents'", "from '@ai-sdk/openai'"])
      expect(
        all.some((program) => program.includes(client)),
        client,
      ).toBe(true);
  });

  it.each(all.map((program, index) => [index + 1, program] as const))(
    'program %i runs against tailgate and reaches nothing else',
    async (index, program) => {
      const file = join(dir, `example-${index}.ts`);
      const base = tailgate.baseURL.replace(/\/v1$/, '');
      await writeFile(file, `${program.replaceAll('http://localhost:8787', base)}\nconsole.log('\\nexample done');\n`);
      const { stdout, stderr } = await run(
        process.execPath,
        ['--import', pathToFileURL(join(dir, 'guard.mjs')).href, file],
        {
          cwd: root,
          // NODE_ENV: as a user runs it (@openai/agents turns its tracing off under `test`).
          env: {
            ...process.env,
            NODE_ENV: 'production',
            API_TOKEN: TOKEN,
            OPENAI_API_KEY: TOKEN,
            EXAMPLES_ORIGIN: new URL(base).origin,
          },
          timeout: PROGRAM_MS,
          killSignal: 'SIGKILL',
        },
      );
      expect(stderr).not.toContain('request outside the server');
      expect(stdout).toContain('example done');
    },
    PROGRAM_MS + 30_000,
  );
});
