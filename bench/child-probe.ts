import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * Runs `probe` (a bench file invoked directly) in a child process of its own (its own heap and
 * RSS) with `argument`, and parses the JSON of the last line it prints. `env`: variables set for
 * it beside this process's.
 */
export function runChildProbe<Figures>(
  probe: string,
  nodeOptions: string[],
  argument: unknown,
  env: Record<string, string> = {},
): Promise<Figures> {
  const root = fileURLToPath(new URL('..', import.meta.url));
  const name = probe.slice(probe.lastIndexOf('/') + 1);
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [...nodeOptions, '--import', 'tsx', probe, JSON.stringify(argument)],
      { cwd: root, env: { ...process.env, ...env }, maxBuffer: 16 * 1024 * 1024, timeout: 60 * 60_000 },
      (error, stdout, stderr) => {
        if (error) return reject(new Error(`${name} failed: ${error.message}\n${stderr.slice(-2000)}`));
        try {
          resolve(JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as Figures);
        } catch {
          reject(new Error(`${name} printed no result: ${stdout.slice(-500)}\n${stderr.slice(-2000)}`));
        }
      },
    );
  });
}
