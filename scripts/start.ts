/**
 * `npm start`: `wrangler dev --local --env local` (wrangler.toml's [env.local]: anonymous
 * access, an open /docs, the local R2 bucket), then the same startup banner as the Node and
 * Deno servers (functions/startup-banner.ts) once wrangler says it is ready. Arguments pass to
 * wrangler dev (`npm start -- --port 9000 --var API_TOKEN:secret`).
 *
 * wrangler's output goes through this process so the banner can follow its "Ready on" line;
 * its keyboard shortcuts need a terminal of its own (`npx wrangler dev --local --env local`).
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import { parseServiceConfig } from '../lib/config.ts';
import { startupBanner } from '../functions/startup-banner.ts';
import { markRunning } from '../functions/local-server.ts';

const ENVIRONMENT = 'local';
const root = fileURLToPath(new URL('..', import.meta.url));
const wranglerPackage = resolve(root, 'node_modules/wrangler');
const args = process.argv.slice(2);

const child = spawn(
  process.execPath,
  [resolve(wranglerPackage, 'bin/wrangler.js'), 'dev', '--local', '--env', ENVIRONMENT, ...args],
  {
    cwd: root,
    stdio: ['inherit', 'pipe', 'pipe'],
    // wrangler writes to a pipe here; keep its colours when this process writes to a terminal.
    env:
      process.stdout.isTTY && process.env.FORCE_COLOR === undefined
        ? { ...process.env, FORCE_COLOR: '1' }
        : process.env,
  },
);
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
// `npm run reset` refuses while this runs (its state is .wrangler/state).
markRunning('npm start (wrangler dev)');

// The vars the worker gets, read the way wrangler dev reads them, while wrangler starts.
const banner = describeWorker().catch(
  (error: unknown) => () => `tailgate: no banner (${error instanceof Error ? error.message : String(error)})`,
);
let shown = false;
let pending = '';
child.stderr.pipe(process.stderr);
child.stdout.on('data', (chunk: Buffer) => {
  process.stdout.write(chunk);
  if (shown) return;
  pending = (pending + chunk.toString('utf8')).slice(-4096);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: strips the terminal's colour codes
  const ready = /Ready on (\S+)/.exec(pending.replace(/\u001b\[[0-9;]*m/g, ''));
  if (!ready) return;
  shown = true;
  void banner.then((text) => console.log(`\n${text(ready[1]!)}\n`));
});

/** The banner for the URL wrangler reports. */
async function describeWorker(): Promise<(url: string) => string> {
  const wrangler = await import('wrangler');
  const config = wrangler.unstable_readConfig(
    { config: resolve(root, 'wrangler.toml'), env: ENVIRONMENT },
    { hideWarnings: true },
  );
  const bindings = wrangler.unstable_getVarsForDev(
    config.configPath,
    optionValues('--env-file'),
    config.vars,
    ENVIRONMENT,
    true,
  );
  const vars: Record<string, string> = {};
  for (const [name, binding] of Object.entries(bindings))
    vars[name] = typeof binding.value === 'string' ? binding.value : JSON.stringify(binding.value);
  for (const pair of optionValues('--var') ?? []) {
    const colon = pair.indexOf(':');
    if (colon > 0) vars[pair.slice(0, colon)] = pair.slice(colon + 1);
  }
  const bucket = config.r2_buckets.find(
    (entry: { binding: string; bucket_name?: string }) => entry.binding === 'BUCKET',
  );
  const state = resolve(root, optionValues('--persist-to')?.at(-1) ?? '.wrangler/state');
  const store = `local R2 bucket ${bucket?.bucket_name ?? '(none bound as BUCKET)'} under ${state}`;
  const version = (JSON.parse(readFileSync(resolve(wranglerPackage, 'package.json'), 'utf8')) as { version: string })
    .version;
  try {
    const service = parseServiceConfig(vars);
    return (url) => startupBanner(`Workers: wrangler dev ${version}`, url, service, store);
  } catch (error) {
    // The worker answers every request 503 not_configured, naming the variable.
    return () => `tailgate: ${error instanceof Error ? error.message : String(error)}`;
  }
}

/** The values of a wrangler dev option: `--var A:1 B:2`, `--var=A:1`, repeated or not. */
function optionValues(option: string): string[] | undefined {
  const values: string[] = [];
  for (let index = 0; index < args.length; index++) {
    const argument = args[index]!;
    if (argument.startsWith(`${option}=`)) values.push(argument.slice(option.length + 1));
    else if (argument === option)
      while (index + 1 < args.length && !args[index + 1]!.startsWith('-')) values.push(args[++index]!);
  }
  return values.length > 0 ? values : undefined;
}
