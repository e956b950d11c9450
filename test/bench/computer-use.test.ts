import { describe, expect, it } from 'vitest';
import {
  computerUseGoalRows,
  computerUseSection,
  computerUseSteps,
  measureComputerUseStorage,
  simulateComputerUse,
  type ComputerUseFigures,
} from '../../bench/computer-use.ts';
import { notRunExcept } from '../../bench/sections.ts';
import { quickCheckFailures } from '../../bench/quick-check.ts';
import { imageSize, sniffMediaType } from '../../lib/media.ts';

describe('bench: computer use', () => {
  it('makes real PNG screenshots of 100-300 KB that do not compress, the same for a seed', async () => {
    const [first, second] = [...computerUseSteps(2, 9)];
    const again = [...computerUseSteps(2, 9)];
    for (const step of [first!, second!]) {
      expect(sniffMediaType(step.png)).toBe('image/png');
      expect(imageSize(step.png)).toEqual({ width: 1280, height: 800 });
      expect(step.png.length).toBeGreaterThanOrEqual(100 * 1024);
      expect(step.png.length).toBeLessThanOrEqual(300 * 1024);
      expect(step.call).toMatchObject({ type: 'function_call', name: 'computer' });
    }
    expect(again[1]!.png).toEqual(second!.png);
    expect(first!.png).not.toEqual(second!.png);
    const { deflateSync } = await import('node:zlib');
    expect(deflateSync(first!.png).length).toBeGreaterThan(first!.png.length * 0.99);
  });

  it('bills and measures the three configurations, renders them, and the quick check judges the goals', async () => {
    const billing = simulateComputerUse(40, 9);
    expect(billing.map((figure) => figure.name)).toEqual(['keep-all', 'drop-all', 'default']);
    const [keepAll, dropAll, defaults] = billing;
    // 40 images: keep-all sends them all, drop-all none, the defaults 3 + 37 mod 16 = 8.
    expect([keepAll!.lastWholeImages, dropAll!.lastWholeImages, defaults!.lastWholeImages]).toEqual([40, 0, 8]);
    expect(keepAll!.cost).toBeGreaterThan(defaults!.cost);
    expect(defaults!.cost).toBeGreaterThan(dropAll!.cost);

    const lines: string[] = [];
    const storage = await measureComputerUseStorage(8, 9, 4, (line) => lines.push(line));
    const [keptTurns, droppedTurns, defaultTurns] = storage.map((figure) => figure.turns);
    expect(keptTurns!.map((turn) => turn.step)).toEqual([4, 8]);
    // A turn gets the blob of each image it sends whole, and no other.
    expect(keptTurns!.map((turn) => turn.blobGets)).toEqual([4, 8]);
    expect(droppedTurns!.map((turn) => turn.blobGets)).toEqual([0, 0]);
    expect(defaultTurns!.map((turn) => turn.blobGets)).toEqual([4, 8]);
    expect(droppedTurns![1]!.bytesRead).toBeLessThan(100 * 1024);
    expect(keptTurns![1]!.bytesRead).toBeGreaterThan(8 * 100 * 1024);

    const figures: ComputerUseFigures = {
      steps: 40,
      storageSteps: 8,
      seed: 9,
      measureEvery: 4,
      command: 'npm run bench -- --only=computer-use',
      billing,
      storage,
    };
    const markdown = computerUseSection(figures, 'not measured').join('\n');
    expect(markdown).toContain('## Computer use: old screenshots pruned');
    expect(markdown).toContain('| default: `shorten_tools_epoch_increment,shorten_images,inbox` |');
    const rows = computerUseGoalRows(figures);
    expect(rows).toHaveLength(2);
    // At 40 steps keep-all's prompts are still small: the cost goal is not met, and the check says so.
    const failures = quickCheckFailures({
      startedAt: '',
      durationMs: 0,
      machine: { cores: 2, cpuModel: '', memoryGiB: 1, platform: '', node: '', loadAverage: '' },
      commit: '',
      commands: { overheadMemory: '', overheadWorkerd: '', strategies: '', cache: '', heap: '', compaction: '' },
      computerUse: figures,
      notMeasured: notRunExcept('computer-use'),
    });
    expect(failures).toEqual(rows.filter((row) => !row.met).map((row) => expect.stringContaining(row.goal)));
    expect(failures.length).toBeGreaterThan(0);
  });
});
