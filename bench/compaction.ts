import { compactSession } from '../lib/turn/compact-session.ts';
import { sessionExistsIn } from '../lib/session/log/config-object.ts';
import { parseServiceConfig } from '../lib/config.ts';
import { Inbox } from '../lib/inbox/inbox.ts';
import { echoModel } from '../lib/models/echo.ts';
import { SessionLog } from '../lib/session/session-log.ts';
import { CountingStore } from '../test/support/counting-store.ts';
import { MemoryStore } from '../lib/store/memory.ts';
import { runInProcess, runTurn, type TurnServices } from '../lib/turn/index.ts';
import { viewPolicy } from '../lib/turn/view-policy.ts';

/** Bytes read by one turn after a compaction, for a session of `turns` earlier turns. */
export interface CompactionReadFigure {
  historyTurns: number;
  historyItems: number;
  /** Bytes the measured turn read from storage (CountingStore.bytesRead). */
  bytesRead: number;
  getRequests: number;
  listRequests: number;
  promptChars: number;
}

/**
 * Bytes read per turn after compaction, at several history lengths (memory store, echo): a
 * session of `turns` turns with tool traffic (packed into segments as the service does), a
 * manual compaction that keeps the newest few thousand tokens, three turns in the new
 * context, then one measured turn. With reads stopping at the context start the figure must
 * not grow with the history; the summary's size is capped, so it reaches a plateau.
 *
 * @example await measureCompactionReads([200, 2000])
 */
export async function measureCompactionReads(
  histories: readonly number[] = [200, 2000],
): Promise<CompactionReadFigure[]> {
  const figures: CompactionReadFigure[] = [];
  for (const turns of histories) {
    const counting = new CountingStore(new MemoryStore());
    const log = new SessionLog(counting, { viewPolicy });
    // The background pack a turn starts is run between turns here, not during the measured one.
    const pack = () => SessionLog.prototype.pack.call(log, 'bench');
    log.pack = async () => ({ packed: false, deleted: 0 });
    const services: TurnServices & { sessions: SessionLog } = {
      sessions: log,
      inbox: new Inbox(counting, { sessionExists: sessionExistsIn(counting, '') }),
      config: parseServiceConfig({}),
      clock: () => new Date(),
      env: {},
      model: () => echoModel,
      background: () => undefined,
      startBackground(run) {
        return runInProcess(this, run);
      },
      log: () => {},
      info: () => {},
    };
    await log.create({ id: 'bench', model: 'echo', strategies: 'shorten_tools_epoch_increment,compact,inbox' });
    for (let turn = 0; turn < turns; turn++) {
      if (turn % 3 === 2) {
        await log.append('bench', [
          {
            type: 'function_call',
            call_id: `c${turn}`,
            name: 'read_file',
            arguments: JSON.stringify({ path: `src/file-${turn}.ts` }),
          },
          { type: 'function_call_output', call_id: `c${turn}`, output: `contents of file ${turn} `.repeat(40) },
        ]);
      }
      await runTurn(services, 'bench', { input: `step ${turn}: ${'please continue with the task '.repeat(8)}` });
      if (turn % 4 === 3) await pack();
    }
    await compactSession(services, 'bench', { keep_tokens: 2000 });
    for (let turn = 0; turn < 3; turn++) await runTurn(services, 'bench', { input: `after compaction ${turn}` });
    await pack();
    counting.reset();
    const response = await runTurn(services, 'bench', { input: 'measured turn' });
    const counts = counting.counts;
    figures.push({
      historyTurns: turns,
      historyItems: (await log.get('bench')).counts.items,
      bytesRead: counts.bytesRead,
      getRequests: counts.get,
      listRequests: counts.list,
      promptChars: response.context.prompt_chars,
    });
  }
  return figures;
}

// `npx tsx bench/compaction.ts`: prints the figures and the ratio longest / shortest.
if (import.meta.url === `file://${process.argv[1]}`) {
  const figures = await measureCompactionReads();
  for (const figure of figures) console.log(JSON.stringify(figure));
  const ratio = figures[figures.length - 1]!.bytesRead / figures[0]!.bytesRead;
  console.log(`bytes read per turn after compaction, longest / shortest history: ${ratio.toFixed(3)}`);
}
