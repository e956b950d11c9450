import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
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

/**
 * This process's peak resident set size, in KiB: on Linux the high-water mark of its own memory
 * (`VmHWM`), since `maxRSS` (getrusage) survives the exec of a child and so counts the RSS of the
 * bench process that spawned it (gigabytes, after the sections before this one); elsewhere
 * `maxRSS`.
 */
export function peakRssKiB(): number {
  try {
    const match = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync('/proc/self/status', 'utf8'));
    if (match) return Number(match[1]);
  } catch {
    // Not Linux: no /proc.
  }
  return process.resourceUsage().maxRSS;
}
