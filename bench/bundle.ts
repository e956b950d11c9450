/**
 * The bundle section of `npm run bench`: the Worker built as CI builds it (`npm run build`,
 * wrangler's dry run into dist/) and gzipped as scripts/check-bundle-size.mjs measures it, which
 * is how wrangler measures its upload; and what the minified bundle is made of, from the
 * metafile esbuild writes beside it (dist/meta.json).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BUDGET_KIB, measureBundle } from '../scripts/check-bundle-size.mjs';

/** The design's goal for the Worker bundle, gzipped. */
export const BUNDLE_GOAL_KIB = 300;

export interface BundleFigures {
  command: string;
  modules: number;
  rawBytes: number;
  gzippedBytes: number;
  /** CI's budget (scripts/check-bundle-size.mjs `BUDGET_KIB`), a guard against growth, not the goal. */
  budgetKiB: number;
  /** The minified bytes of each package or source directory, largest first. */
  inputs: BundleInput[];
}

export interface BundleInput {
  name: string;
  bytes: number;
}

/** Builds the Worker with `npm run build` and measures dist/. */
export function measureWorkerBundle(log: (line: string) => void): BundleFigures {
  const root = fileURLToPath(new URL('..', import.meta.url));
  const command = 'npm run build';
  log(`  ${command}`);
  execFileSync('npm', ['run', '-s', 'build'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
  const dist = join(root, 'dist');
  const measured = measureBundle(dist);
  const meta = JSON.parse(readFileSync(join(dist, 'meta.json'), 'utf8')) as EsbuildMeta;
  return { command, ...measured, budgetKiB: BUDGET_KIB, inputs: bundleInputs(meta) };
}

interface EsbuildMeta {
  outputs: Record<string, { inputs: Record<string, { bytesInOutput: number }> }>;
}

/**
 * The bytes each input brought to the outputs, summed by package (the last `node_modules/`
 * of its path: `ai`, `@ai-sdk/anthropic`) or by source directory (`lib/session`; a file at the
 * top of lib/ counts under `lib`), largest first.
 */
export function bundleInputs(meta: EsbuildMeta): BundleInput[] {
  const totals = new Map<string, number>();
  for (const output of Object.values(meta.outputs))
    for (const [path, input] of Object.entries(output.inputs)) {
      const name = inputName(path);
      totals.set(name, (totals.get(name) ?? 0) + input.bytesInOutput);
    }
  return [...totals]
    .map(([name, bytes]) => ({ name, bytes }))
    .filter((input) => input.bytes > 0)
    .sort((a, b) => b.bytes - a.bytes || a.name.localeCompare(b.name));
}

function inputName(path: string): string {
  const at = path.lastIndexOf('node_modules/');
  if (at >= 0) {
    const parts = path.slice(at + 'node_modules/'.length).split('/');
    return parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!;
  }
  const parts = path.split('/');
  return parts.length > 2 ? `${parts[0]}/${parts[1]}` : parts.length === 2 ? parts[0]! : path;
}

const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;

/** The goal row: the gzipped bundle against the design's 300 KiB. */
export function bundleGoalRow(figures: BundleFigures) {
  return {
    goal: 'Worker bundle, gzipped (as wrangler measures its upload)',
    target: `< ${BUNDLE_GOAL_KIB} KiB`,
    measured: kib(figures.gzippedBytes),
    met: figures.gzippedBytes < BUNDLE_GOAL_KIB * 1024,
  };
}

/** RESULTS.md's section. */
export function bundleSection(figures: BundleFigures | undefined, notMeasured: string): string[] {
  const title = '## The Worker bundle';
  if (!figures) return [title, '', `${notMeasured}.`, ''];
  const largest = figures.inputs.slice(0, 12);
  const shown = largest.reduce((sum, input) => sum + input.bytes, 0);
  const over = figures.gzippedBytes - BUNDLE_GOAL_KIB * 1024;
  return [
    title,
    '',
    `Command: \`npm run bench -- --only=bundle\` (bench/bundle.ts): \`${figures.command}\`, then every module ` +
      'it wrote to dist/ gzipped one by one, source maps aside (scripts/check-bundle-size.mjs `measureBundle`, ' +
      "CI's check).",
    '',
    `${kib(figures.rawBytes)} minified in ${figures.modules} module${figures.modules === 1 ? '' : 's'}, ` +
      `**${kib(figures.gzippedBytes)} gzipped**: goal < ${BUNDLE_GOAL_KIB} KiB ` +
      `(${over >= 0 ? `${kib(over)} over` : 'met'}); ` +
      `CI's budget, a guard against growth, ${figures.budgetKiB} KiB.`,
    '',
    `The largest inputs, minified bytes in the bundle (dist/meta.json), ${kib(shown)} of ` +
      `${kib(figures.rawBytes)}:`,
    '',
    '| Package or directory | Minified |',
    '|---|---|',
    ...largest.map((input) => `| ${input.name} | ${kib(input.bytes)} |`),
    '',
  ];
}
