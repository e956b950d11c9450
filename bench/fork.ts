/**
 * Forks of a long session (`npm run bench -- --only=fork`): a session of `items` items of the
 * agent mix (bench/agent-session.ts) on the memory store, forked at its end and at a turn in
 * its middle that packing has put inside a segment, through POST /v1/sessions/{id}/fork's code
 * (lib/turn/fork.ts, its background pack included). Each fork's first turn is measured against
 * the parent's turn with the same input after the same point (an ordinary turn of a session
 * that long): storage operations, bytes read, and the prompt's shape (lib/prompt-shape.ts):
 * how many of the parent's prompt characters the fork's prompt repeats from its start.
 */
import type { PromptItem, Tool } from '../lib/items.ts';
import { BLOCK_ITEMS, promptShape, reusedPrefixChars, type PromptShapeV2 } from '../lib/prompt-shape.ts';
import type { TurnRequest } from '../lib/turn/index.ts';
import { agentItems } from './agent-session.ts';
import { MemoryTurnDriver } from './memory-driver.ts';
import { loadHistory } from './turn-overhead.ts';

export interface ForkOptions {
  items: number;
  seed: number;
  log: (line: string) => void;
}

/** One fork point: the fork's first turn next to the parent's turn after the same point. */
export interface ForkRow {
  point: 'end' | 'middle';
  /** The fork point's seq, and whether its record was inside a segment when forked. */
  seq: number;
  packed: boolean;
  fork: TurnFigures;
  parent: TurnFigures;
  /** Characters of the parent's prompt the fork's first prompt repeats from its start. */
  reusedChars: number;
  /** The parent's prompt's characters (as prompt-shape counts them). */
  parentPromptChars: number;
}

export interface TurnFigures {
  operations: number;
  bytesRead: number;
  promptItems: number;
}

export interface ForkFigures {
  items: number;
  rows: ForkRow[];
}

const PARENT = 'parent';
const NEXT: TurnRequest = { input: 'go on from here' };

export async function measureForks(options: ForkOptions): Promise<ForkFigures> {
  const driver = new MemoryTurnDriver();
  const load = { appendBatch: 100, turnEveryAppends: 8 };
  const source = agentItems({ seed: options.seed });
  await driver.createSession(PARENT, 'You are a coding agent.');
  options.log(`  loading ${options.items} items`);
  await loadHistory(driver, PARENT, Math.floor(options.items / 2), source, load);
  await driver.turn(PARENT, { input: 'the middle turn' });
  const middleSeq = (await driver.session(PARENT)).counts.items;
  const afterMiddle = await figures(driver, () => driver.turn(PARENT, NEXT));
  await loadHistory(driver, PARENT, options.items, source, load);
  await driver.turn(PARENT, { input: 'the last turn' });
  const endSeq = (await driver.session(PARENT)).counts.items;
  const rows: ForkRow[] = [];
  for (const [point, seq, parent] of [
    ['end', endSeq, null],
    ['middle', middleSeq, afterMiddle],
  ] as const) {
    const packed = await driver.isPacked(PARENT, seq);
    const id = `fork-${point}`;
    await driver.fork(PARENT, { at_seq: seq, fields: { id } });
    const fork = await figures(driver, () => driver.turn(id, NEXT));
    // The end's ordinary turn: the parent's own next one, with the same input.
    const ordinary = parent ?? (await figures(driver, () => driver.turn(PARENT, NEXT)));
    rows.push({
      point,
      seq,
      packed,
      fork: fork.turn,
      parent: ordinary.turn,
      reusedChars: reusedPrefixChars(fork.shape, ordinary.shape) ?? 0,
      parentPromptChars: promptChars(ordinary.shape),
    });
    options.log(`  fork at ${point} (seq ${seq}${packed ? ', packed' : ''}): ${JSON.stringify(rows.at(-1))}`);
  }
  return { items: endSeq, rows };
}

/** A turn's storage figures and the shape of its prompt. */
async function figures(driver: MemoryTurnDriver, run: () => ReturnType<MemoryTurnDriver['turn']>) {
  const turn = await run();
  const prompt = driver.lastPrompt as PromptItem[];
  const tools: Tool[] = [];
  return {
    turn: {
      operations: turnOperations(turn.storage!),
      bytesRead: turn.storage!.bytesRead,
      promptItems: prompt.length,
    },
    shape: promptShape(prompt, tools, []),
  };
}

function turnOperations(counts: { get: number; head: number; put: number; list: number; delete: number }): number {
  return counts.get + counts.head + counts.put + counts.list + counts.delete;
}

function promptChars(shape: PromptShapeV2): number {
  const blocks = shape.block_chars.reduce((sum, chars) => sum + chars, 0);
  const past = shape.tail_chars.slice(Math.max(0, shape.block_chars.length * BLOCK_ITEMS - shape.tail_start));
  return blocks + past.reduce((sum, chars) => sum + chars, 0);
}

/** bench/RESULTS.md's section of the fork figures. */
export function forkSection(figures: ForkFigures | undefined, notMeasured: string): string[] {
  const title = '## 12. Forks of a long session';
  if (!figures) return [title, '', `${notMeasured}.`, ''];
  const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;
  return [
    title,
    '',
    'Command: `npm run bench -- --only=fork` (bench/fork.ts). A session of ' +
      `${figures.items.toLocaleString('en-US')} items of the agent mix on the memory store, forked ` +
      '(lib/turn/fork.ts, with its background pack) at its end and at a turn in its middle that packing put ' +
      "inside a segment. Each fork's first turn next to the parent's turn with the same input after the same " +
      "point (an ordinary turn of a session that long); prefix reused = characters of the parent turn's prompt " +
      "that the fork's repeats from its start, by the prompt shape's block and tail hashes (lib/prompt-shape.ts).",
    '',
    '| fork point | seq | packed | fork: ops / bytes read | parent: ops / bytes read | ' +
      'prompt items (fork / parent) | prefix reused / parent prompt chars |',
    '|---|---|---|---|---|---|---|',
    ...figures.rows.map(
      (row) =>
        `| ${row.point} | ${row.seq.toLocaleString('en-US')} | ${row.packed ? 'yes' : 'no'} | ` +
        `${row.fork.operations} / ${kib(row.fork.bytesRead)} | ` +
        `${row.parent.operations} / ${kib(row.parent.bytesRead)} | ` +
        `${row.fork.promptItems} / ${row.parent.promptItems} | ` +
        `${row.reusedChars.toLocaleString('en-US')} / ${row.parentPromptChars.toLocaleString('en-US')} |`,
    ),
    '',
  ];
}

/** What `--quick` requires of the fork figures (bench/quick-check.ts): a fork's first turn is an ordinary one. */
export function forkFailures(figures: ForkFigures | undefined): string[] {
  if (figures?.rows.length !== 2) return ['fork: no figures'];
  const failures: string[] = [];
  for (const row of figures.rows) {
    const name = `fork at ${row.point}`;
    if (row.point === 'middle' && !row.packed) failures.push(`${name}: the point was not packed`);
    if (row.fork.operations > row.parent.operations)
      failures.push(`${name}: ${row.fork.operations} operations, the parent's turn ${row.parent.operations}`);
    if (row.fork.bytesRead > row.parent.bytesRead)
      failures.push(`${name}: ${row.fork.bytesRead} bytes read, the parent's turn ${row.parent.bytesRead}`);
    if (row.parentPromptChars === 0 || row.reusedChars !== row.parentPromptChars)
      failures.push(`${name}: ${row.reusedChars} of ${row.parentPromptChars} prompt characters reused`);
  }
  return failures;
}
