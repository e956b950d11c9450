import { describe, expect, it } from 'vitest';
import { bundleInputs, type BundleFigures } from '../../bench/bundle.ts';
import { quickCheckFailures } from '../../bench/quick-check.ts';
import { resultsMarkdown, type BenchResults } from '../../bench/results-markdown.ts';
import { notRunExcept } from '../../bench/sections.ts';

const header = (): BenchResults => ({
  startedAt: '',
  durationMs: 0,
  machine: { cores: 2, cpuModel: '', memoryGiB: 1, platform: '', node: '', loadAverage: '' },
  commit: '',
  commands: { overheadMemory: '', overheadWorkerd: '', strategies: '', cache: '', heap: '', compaction: '' },
});

const figures = (gzippedBytes: number): BundleFigures => ({
  command: 'npm run build',
  modules: 1,
  rawBytes: 4 * gzippedBytes,
  gzippedBytes,
  budgetKiB: 400,
  inputs: [{ name: 'ai', bytes: 1024 }],
});

const goalLine = (markdown: string) => markdown.split('\n').find((line) => line.startsWith('| Worker bundle'));

describe('bench: the Worker bundle', () => {
  it('sums the minified bytes by package, the innermost node_modules one, and by source directory', () => {
    const input = (bytesInOutput: number) => ({ bytesInOutput });
    const inputs = bundleInputs({
      outputs: {
        'dist/worker.js': {
          inputs: {
            'node_modules/ai/dist/index.mjs': input(300),
            'node_modules/@ai-sdk/anthropic/dist/internal/index.mjs': input(200),
            'node_modules/@ai-sdk/anthropic/dist/index.mjs': input(50),
            'node_modules/workers-ai-provider/node_modules/@ai-sdk/provider/dist/index.mjs': input(40),
            'lib/session/log.ts': input(120),
            'lib/session/view/writer.ts': input(30),
            'lib/items.ts': input(70),
            'functions/worker.ts': input(60),
            'node_modules/zod/v4/locales/en.js': input(0),
          },
        },
      },
    });
    expect(inputs).toEqual([
      { name: 'ai', bytes: 300 },
      { name: '@ai-sdk/anthropic', bytes: 250 },
      { name: 'lib/session', bytes: 150 },
      { name: 'lib', bytes: 70 },
      { name: 'functions', bytes: 60 },
      { name: '@ai-sdk/provider', bytes: 40 },
    ]);
  });

  it('lists the 300 KiB goal, missed above it, met below it, and why when the section did not run', () => {
    const over = resultsMarkdown({ ...header(), bundle: figures(396.4 * 1024), notMeasured: notRunExcept('bundle') });
    expect(goalLine(over)).toBe(
      '| Worker bundle, gzipped (as wrangler measures its upload) | < 300 KiB | 396.4 KiB | **no** |',
    );
    expect(over).toContain('goal < 300 KiB (96.4 KiB over)');
    expect(over).toMatch(/Missed in this run.*Worker bundle, gzipped/);
    const under = resultsMarkdown({ ...header(), bundle: figures(299.5 * 1024), notMeasured: notRunExcept('bundle') });
    expect(goalLine(under)).toBe(
      '| Worker bundle, gzipped (as wrangler measures its upload) | < 300 KiB | 299.5 KiB | yes |',
    );
    const notRun = resultsMarkdown({ ...header(), notMeasured: notRunExcept('memory') });
    expect(goalLine(notRun)).toBe(
      '| Worker bundle, gzipped (as wrangler measures its upload) | < 300 KiB | ' +
        'not measured (not run: the run had --only=memory) | - |',
    );
  });

  it('fails a quick run whose bundle section built nothing, not one that misses the goal', () => {
    const run = (bundle: BundleFigures | undefined) =>
      quickCheckFailures({ ...header(), ...(bundle ? { bundle } : {}), notMeasured: notRunExcept('bundle') });
    expect(run(figures(396.4 * 1024))).toEqual([]);
    expect(run(undefined)).toEqual(['bundle: nothing built']);
  });
});
