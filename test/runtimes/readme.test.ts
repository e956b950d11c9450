import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { SIGNING_KEY } from '../http/http-suite.ts';
import { startServer, type RunningServer } from './runtime-process.ts';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
const readme = await readFile(join(root, 'README.md'), 'utf8');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

/** The first ```sh block after `heading`. */
function codeBlock(heading: string): string {
  const start = readme.indexOf(heading);
  expect(start, `README has ${heading}`).toBeGreaterThanOrEqual(0);
  const match = /```sh\n([\s\S]*?)```/.exec(readme.slice(start));
  return match![1]!;
}

/** Every ```sh block of the README that runs `curl`. */
const curlBlocks = [...readme.matchAll(/```sh\n([\s\S]*?)```/g)]
  .map((match) => match[1]!)
  .filter((block) => /^curl /m.test(block));

interface Step {
  command: string;
  /** The output the README shows for it (`...` stands for anything), if it shows one. */
  expected?: string;
  /** The status the README shows for it (`# 201`, `# 403 forbidden, ...`), if it shows one. */
  status?: string;
  /** Variables the block sets before this command (`POSTER=eyJhbGciOiJIUzI1NiIs...`). */
  assignments: string[];
}

/**
 * Each `curl` of a block with the output its README comment shows: a comment on the same line,
 * or the comment lines right after it, when they start with `{` or a status (`409 {`), or the
 * status alone (`# 201`, `# 403 forbidden, session:read`).
 */
function curlSteps(block: string): Step[] {
  const lines = block.split('\n');
  const steps: Step[] = [];
  let assignments: string[] = [];
  for (let index = 0; index < lines.length; index++) {
    if (/^[A-Z]+=/.test(lines[index]!)) assignments.push(lines[index]!);
    if (!lines[index]!.startsWith('curl ')) continue;
    let command = '';
    let inline: string | undefined;
    for (;;) {
      let line = lines[index]!;
      const comment = line.indexOf('  # ');
      if (comment >= 0 && (command + line.slice(0, comment)).split("'").length % 2 === 1) {
        inline = line.slice(comment + 4).trim();
        line = line.slice(0, comment);
      }
      command += `${line}\n`;
      if (!line.trimEnd().endsWith('\\') && command.split("'").length % 2 === 1) break;
      index++;
    }
    const comments: string[] = inline === undefined ? [] : [inline];
    while (inline === undefined && lines[index + 1]?.startsWith('#'))
      comments.push(lines[++index]!.replace(/^#\s*/, ''));
    const expected = comments.join('');
    const step: Step = { command, assignments };
    assignments = [];
    if (/^(\d{3} )?\{/.test(expected)) step.expected = expected;
    else if (/^\d{3}\b/.test(expected)) step.status = expected.slice(0, 3);
    steps.push(step);
  }
  return steps;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function pattern(expected: string): RegExp {
  const escaped = escapeRegExp(expected).replace(/\\\.\\\.\\\./g, '[\\s\\S]*');
  return new RegExp(`^${escaped}$`);
}

/**
 * Runs a block against `origin`, one step at a time, and checks what each prints and the
 * status it shows. A variable the block sets to a placeholder after a step
 * (`POSTER=eyJhbGciOiJIUzI1NiIs...`) takes the value of the previous output that starts so.
 */
async function runBlock(
  block: string,
  origin: string,
  env: Record<string, string> = {},
): Promise<{ checked: number; prelude: string[] }> {
  const steps = curlSteps(block);
  const prelude: string[] = [];
  let checked = 0;
  let previous = '';
  for (const step of steps) {
    for (const assignment of step.assignments) {
      const placeholder = /^([A-Z]+)=(\S+)\.\.\.$/.exec(assignment);
      if (placeholder) {
        const value = new RegExp(`${escapeRegExp(placeholder[2]!)}[\\w.-]*`).exec(previous);
        expect(value, `${assignment} in ${previous}`).not.toBeNull();
        prelude.push(`${placeholder[1]}=${value![0]}`);
      } else prelude.push(assignment.replace(/^B=.*/, `B=${origin}`));
    }
    // Every command prints its status last; the README shows it first, when it shows one.
    const command = step.command.includes('%{http_code}')
      ? step.command
      : `${step.command.trimEnd()} -w '\\n%{http_code}'`;
    const { stdout } = await run('bash', ['-c', `set -e\n${prelude.join('\n')}\n${command}`], {
      cwd: root,
      timeout: 30_000,
      env: { ...process.env, ...env },
    });
    const status = /(\d{3})\n?$/.exec(stdout);
    expect(status, step.command).not.toBeNull();
    const body = stdout.slice(0, status!.index).trim();
    previous = body;
    expect(body.length, step.command).toBeGreaterThan(0);
    if (step.status !== undefined) {
      expect(status![1], step.command).toBe(step.status);
      checked++;
    }
    if (step.expected === undefined) continue;
    const shown = /^\d{3} /.test(step.expected) ? `${status![1]} ${body}` : body;
    expect(shown, step.command).toMatch(pattern(step.expected));
    checked++;
  }
  return { checked, prelude };
}

/** Runs the walkthrough block against `origin` (anonymous access). */
async function walkThrough(origin: string): Promise<number> {
  const block = codeBlock('## Walkthrough');
  expect(curlSteps(block).length).toBeGreaterThan(10);
  return (await runBlock(block, origin)).checked;
}

const servers: RunningServer[] = [];
const directories: string[] = [];
afterAll(async () => {
  await Promise.all(servers.map((server) => server.stop()));
  await Promise.all(directories.map((directory) => rm(directory, { recursive: true, force: true })));
});

/** The README's command, with a port of its own and a fresh data directory (returned with the server). */
async function startScript(
  script: string,
  extra: (directory: string) => string[],
  timeoutMs = 90_000,
  env: Record<string, string> = {},
): Promise<{ server: RunningServer; directory: string }> {
  const directory = await mkdtemp(join(tmpdir(), 'tailgate-readme-'));
  directories.push(directory);
  const server = await startServer(npm, ['run', script, '--', '--port', '0', ...extra(directory)], {
    cwd: root,
    env: {
      DATA_DIR: join(directory, 'data'),
      DENO_NO_UPDATE_CHECK: '1',
      WRANGLER_SEND_METRICS: 'false',
      CI: '1',
      ...env,
    },
    timeoutMs,
  });
  servers.push(server);
  return { server, directory };
}

/**
 * A command the README gives to run by hand, as written (`node` and `deno` the pinned ones of
 * node_modules/.bin, first on the PATH as npm puts them), with a port of its own, a fresh data
 * directory and anonymous access for the walkthrough.
 */
async function startCommand(command: string): Promise<{ server: RunningServer; directory: string }> {
  const directory = await mkdtemp(join(tmpdir(), 'tailgate-readme-'));
  directories.push(directory);
  const server = await startServer('bash', ['-c', `exec ${command} --port 0`], {
    cwd: root,
    env: {
      PATH: `${join(root, 'node_modules', '.bin')}:${process.env.PATH ?? ''}`,
      DATA_DIR: join(directory, 'data'),
      ALLOW_ANONYMOUS: 'true',
      DENO_NO_UPDATE_CHECK: '1',
    },
    timeoutMs: 90_000,
  });
  servers.push(server);
  return { server, directory };
}

/** The commands the README and docs/DEPLOY.md give for running a server without npm. */
const deploy = await readFile(join(root, 'docs', 'DEPLOY.md'), 'utf8');
const directCommands = [
  /Running `(node functions\/node\.ts)` yourself/.exec(readme)?.[1],
  /# Deno: (deno run [^\n]*functions\/deno\.ts)\n/.exec(deploy)?.[1],
];

/** The token block's server: the admin token and a signing key, no anonymous access. */
const TOKEN_ENV = { API_TOKEN: 'readme-admin-token', TOKEN_SIGNING_KEY: SIGNING_KEY, ALLOW_ANONYMOUS: 'false' };

describe('README', () => {
  it('runs every curl block: the walkthrough and the token block', () => {
    expect(curlBlocks).toEqual([codeBlock('## Walkthrough'), codeBlock('## Give a notice poster its own token')]);
  });

  // `npm start` takes the settings as the README gives them to it (`npm start -- --var API_TOKEN:secret`).
  it.concurrent.for([
    ['start:node', () => []],
    ['start:deno', () => []],
    [
      'start',
      (directory: string) => [
        '--persist-to',
        join(directory, 'wrangler'),
        ...Object.entries(TOKEN_ENV).flatMap(([name, value]) => ['--var', `${name}:${value}`]),
      ],
    ],
  ] as Array<[string, (directory: string) => string[]]>)(
    'token block against `npm run %s`: mints, posts, is refused, and the revoke revokes',
    { timeout: 180_000 },
    async ([script, extra], { expect }) => {
      // wrangler dev hands the Worker no environment variable: the `--var`s alone carry them.
      const { server } = await startScript(script, extra, 90_000, script === 'start' ? {} : TOKEN_ENV);
      const admin = { authorization: `Bearer ${TOKEN_ENV.API_TOKEN}`, 'content-type': 'application/json' };
      const demo = await fetch(`${server.origin}/v1/sessions`, {
        method: 'POST',
        headers: admin,
        body: JSON.stringify({ id: 'demo' }),
      });
      expect(demo.status).toBe(201);
      const block = codeBlock('## Give a notice poster its own token');
      const { checked, prelude } = await runBlock(block, server.origin, TOKEN_ENV);
      expect(checked).toBe(5);
      // The poster the block minted is refused now: the revoke took effect.
      const { stdout } = await run(
        'bash',
        [
          '-c',
          `${prelude.join('\n')}\ncurl -s -o /dev/null -w '%{http_code}' -X POST $B/v1/sessions/demo/inbox ` +
            `-H "authorization: Bearer $POSTER" -H "$J" -d '{"name": "late", "content": "x"}'`,
        ],
        { cwd: root, timeout: 30_000, env: { ...process.env, ...TOKEN_ENV } },
      );
      expect(stdout).toBe('401');
    },
  );

  it('names the one command of each runtime in the quick start', () => {
    const quickStart = codeBlock('## Quick start');
    for (const command of ['npm start', 'npm run start:node', 'npm run start:deno', 'npm run reset'])
      expect(quickStart).toContain(command);
  });

  it('keeps a short Costs, limits and tracing section that links the full one', async () => {
    const section = /\n## Costs, limits and tracing\n([\s\S]*?)\n## /.exec(readme)?.[1] ?? '';
    expect(section).toContain('(docs/CONFIGURATION.md#costs-limits-and-tracing)');
    expect(section.split('\n').length).toBeLessThan(15);
    const configuration = await readFile(join(root, 'docs/CONFIGURATION.md'), 'utf8');
    expect(configuration).toContain('\n## Costs, limits and tracing\n');
  });

  it('reads the expected output of every walkthrough step it shows one for', () => {
    const steps = curlSteps(codeBlock('## Walkthrough'));
    expect(steps.filter((step) => step.expected !== undefined).length).toBeGreaterThanOrEqual(8);
    expect(pattern('{"a":1,...}').test('{"a":1,"b":2}')).toBe(true);
    expect(pattern('{"a":1,...}').test('{"a":2,"b":2}')).toBe(false);
  });

  it.concurrent.for(directCommands.map((command, index) => [index, command] as const))(
    'walkthrough against the README command %i run as written (%s)',
    { timeout: 180_000 },
    async ([, command], { expect }) => {
      expect(command, 'the README names the command').toBeDefined();
      const { server } = await startCommand(command!);
      expect(await walkThrough(server.origin)).toBeGreaterThanOrEqual(8);
      expect(server.output()).toMatch(/access: anonymous/);
    },
  );

  // The three runtimes at once: each test mostly waits for its server to start and its curls.
  it.concurrent.for([
    ['start:node', () => []],
    ['start:deno', () => []],
    ['start', (directory: string) => ['--persist-to', join(directory, 'wrangler')]],
  ] as Array<[string, (directory: string) => string[]]>)(
    'walkthrough against `npm run %s`: every step prints what the README shows',
    { timeout: 180_000 },
    async ([script, extra], { expect }) => {
      const { server, directory } = await startScript(script, extra);
      expect(await walkThrough(server.origin)).toBeGreaterThanOrEqual(8);
      if (script === 'start') {
        // wrangler's bindings table shows the local vars plainly, then the banner follows its "Ready on" line.
        expect(server.output()).toContain('env.ALLOW_ANONYMOUS ("true")');
        expect(server.output()).not.toContain('(hidden)');
        await expect
          .poll(() => server.output(), { timeout: 20_000 })
          .toMatch(/^tailgate \(Workers: wrangler dev [\d.]+\) on http:\/\/localhost:\d+$/m);
        expect(server.output()).toContain(
          `  store:  local R2 bucket tailgate under ${directory}/wrangler\n  model:  echo\n`,
        );
      }
      expect(server.output()).toMatch(/access: anonymous/);
      expect(server.output()).toMatch(/^ {2}docs: {3}http:\/\/\S+\/docs$/m);
    },
  );
});
