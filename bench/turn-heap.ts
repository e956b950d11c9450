import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { HeapProbeOptions, HeapProbeResult } from './memory-probe.ts';

/** The command the heap figure comes from (for RESULTS.md). */
export function heapProbeCommand(options: HeapProbeOptions): string {
  return `node --expose-gc --import tsx bench/memory-probe.ts '${JSON.stringify(options)}'`;
}

/**
 * Peak heap of a turn, measured in a child process with --expose-gc so nothing else of the
 * benchmark shares its heap: see bench/memory-probe.ts for the method.
 */
export function measureTurnHeap(options: HeapProbeOptions): Promise<HeapProbeResult> {
  const probe = fileURLToPath(new URL('./memory-probe.ts', import.meta.url));
  const root = fileURLToPath(new URL('..', import.meta.url));
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--expose-gc', '--import', 'tsx', probe, JSON.stringify(options)],
      { cwd: root, maxBuffer: 16 * 1024 * 1024, timeout: 15 * 60_000 },
      (error, stdout, stderr) => {
        if (error) return reject(new Error(`heap probe failed: ${error.message}\n${stderr}`));
        const line = stdout.trim().split('\n').at(-1) ?? '';
        try {
          resolve(JSON.parse(line) as HeapProbeResult);
        } catch {
          reject(new Error(`heap probe printed no result: ${stdout.slice(-500)}\n${stderr.slice(-2000)}`));
        }
      },
    );
  });
}
