import { computerUseGoalRows } from './computer-use.ts';
import type { BenchResults } from './results-markdown.ts';
import type { TurnOverheadRow } from './turn-overhead.ts';
import { storageUnchanged } from './tracing.ts';
import { forkFailures } from './fork.ts';
import { fileSmallPromptFailures } from './file-small-prompt.ts';

/**
 * What `npm run bench -- --quick` (run by CI) requires of its figures, so that a broken
 * harness fails the run instead of printing a table with holes: every section that ran has
 * figures, every size was measured, turns cost at most 8 storage operations (plus 3 per
 * delivered notice), and each figure is one a working measurement gives. Returns the
 * failures, empty when the run is sound.
 */
export function quickCheckFailures(results: BenchResults): string[] {
  const failures: string[] = [];
  const check = (ok: boolean, failure: string) => {
    if (!ok) failures.push(failure);
  };
  for (const [section, why] of Object.entries(results.notMeasured ?? {}))
    if (why && !why.startsWith('not run:')) failures.push(`${section}: ${why}`);
  if (results.workerdError) failures.push(`workerd: ${results.workerdError}`);

  const ran = (section: string) => !results.notMeasured?.[section]?.startsWith('not run:');
  const overhead = (runtime: string, rows: TurnOverheadRow[] | undefined, recordsCalls: boolean) => {
    check((rows?.length ?? 0) > 0, `${runtime}: no rows`);
    for (const row of rows ?? []) {
      const name = `${runtime} ${row.size}`;
      if (row.skipped) {
        failures.push(`${name}: ${row.skipped}`);
        continue;
      }
      check(row.turns > 0 && row.p50Ms > 0, `${name}: no measured turns`);
      check((row.storage?.operationsMedian ?? 0) > 0, `${name}: no storage operations counted`);
      check(
        (row.storage?.operationsMax ?? Infinity) <= 8,
        `${name}: a turn took ${row.storage?.operationsMax} operations`,
      );
      check((row.storage?.promptBytesMedian ?? 0) > 0, `${name}: no prompt bytes`);
      const notice = row.notice;
      check(notice !== undefined && notice.delivered > 0, `${name}: no notice delivered`);
      if (notice?.operations !== undefined)
        check(
          notice.operations <= notice.operationsLimit,
          `${name}: a notice turn took ${notice.operations} operations`,
        );
      if (recordsCalls)
        check(
          row.append?.byKind.find((entry) => entry.label === 'put turn record')?.count === 1,
          `${name}: an append did not put one turn record`,
        );
    }
  };
  if (ran('memory')) overhead('memory', results.overheadMemory, true);
  if (ran('workerd')) overhead('workerd', results.overheadWorkerd, false);
  if (ran('strategies'))
    check(
      (results.strategies?.length ?? 0) > 0 && results.strategies!.every((figure) => figure.minMs >= 0),
      'strategies: no figures',
    );
  if (ran('cache'))
    check(
      (results.cache?.runs.length ?? 0) > 0 && results.cache!.runs.every((run) => run.totals.costCached > 0),
      'cache: no simulated runs',
    );
  if (ran('computer-use')) {
    const figures = results.computerUse;
    check(figures?.storage.every((storage) => storage.turns.length > 0) ?? false, 'computer-use: no turns measured');
    // Deterministic (seeded, billed by the model of bench/cache-billing.ts), so the goals themselves.
    for (const row of figures ? computerUseGoalRows(figures) : [])
      check(row.met, `computer-use: ${row.goal}: ${row.measured}, goal ${row.target}`);
  }
  if (ran('heap')) {
    const heap = results.heap?.result;
    check(
      heap !== undefined && heap.peakGrowthBytes.length > 0 && heap.peakGrowthBytes.every((bytes) => bytes > 0),
      'heap: no peak measured',
    );
    check(heap?.samplesPerTurn.every((samples) => samples > 0) ?? false, 'heap: no samples during a turn');
  }
  if (ran('compaction'))
    check(
      (results.compaction?.length ?? 0) > 0 && results.compaction!.every((figure) => figure.bytesRead > 0),
      'compaction: no reads measured',
    );
  if (ran('reliability')) {
    const reliability = results.reliability;
    check((reliability?.simulation.interleavings ?? 0) > 0, 'reliability: no interleavings simulated');
    check((reliability?.recovery.recoveryMs ?? 0) > 0, 'reliability: no recovery after kill -9 measured');
  }
  if (ran('transfer')) {
    const transfer = results.transfer;
    check((transfer?.storedItems ?? 0) >= (transfer?.items ?? 1), 'transfer: the import stored too few items');
    check(transfer?.exact ?? false, 'transfer: the export differs from the imported stream');
    check((transfer?.exportPeakBytes ?? 0) > 0 && (transfer?.loadedItems ?? 0) > 0, 'transfer: nothing measured');
  }
  if (ran('tracing')) {
    const tracing = results.tracing;
    check(tracing !== undefined && tracing.on.p50Ms > 0 && tracing.off.p50Ms > 0, 'tracing: no turns measured');
    check(
      tracing !== undefined && storageUnchanged(tracing),
      'tracing: a traced turn made other storage calls than an untraced one',
    );
    check(tracing?.turnSpans === tracing?.tracedTurns, 'tracing: not every traced turn exported its span');
  }
  if (ran('resume')) {
    const resume = results.resume;
    check((resume?.events ?? 0) > 0 && (resume?.lagP50Ms ?? 0) > 0, 'resume: no event reached a resumed reader');
    check((resume?.journalWrites ?? 0) > 0, 'resume: no journal written');
    check(
      resume !== undefined &&
        resume.operationsStreamed - resume.operationsPlain <= Math.ceil(resume.streamedSeconds) + 2,
      `resume: a streamed turn added more than one write a second plus 2`,
    );
  }
  if (ran('fork')) failures.push(...forkFailures(results.fork));
  if (ran('file-small-prompt')) failures.push(...fileSmallPromptFailures(results.fileSmallPrompt, 2));
  if (ran('bundle'))
    check((results.bundle?.gzippedBytes ?? 0) > 0 && (results.bundle?.inputs.length ?? 0) > 0, 'bundle: nothing built');
  if (ran('cold-turn'))
    check(
      (results.coldTurn?.length ?? 0) > 0 && results.coldTurn!.every((row) => row.first.operations > 0),
      'cold-turn: no turns measured',
    );
  return failures;
}
