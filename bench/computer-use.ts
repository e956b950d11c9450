import { crc32 } from 'node:zlib';
import type { ContentPart } from '../lib/content.ts';
import { sha256Hex } from '../lib/hash.ts';
import type { FunctionCallOutputItem, Item, PromptItem } from '../lib/items.ts';
import { encodeBase64 } from '../lib/media.ts';
import type { SequencedItem } from '../lib/strategies/aggregates.ts';
import { preparePrompt } from '../lib/strategies/prepare-prompt.ts';
import { resolveStrategyConfig } from '../lib/strategies/strategy-config.ts';
import { mediaTokens } from '../lib/tokens/media-tokens.ts';
import { ANTHROPIC_LOOKBACK, AnthropicBilling, billingTotals, estimateTokens } from './cache-billing.ts';
import { MemoryTurnDriver } from './memory-driver.ts';
import { serializePrompt, TOOLS_CHARACTERS } from './prompt-cache.ts';
import { formatBytes } from './prompt-cache-chart.ts';
import { SeededRandom } from './random.ts';
import { median } from './stats.ts';

/**
 * The computer-use workload: an agent that answers every step with a `computer` call and gets
 * back a little text and a 100-300 KB PNG screenshot. Three strategy lists are compared:
 * keep-all (the tool strategy alone), drop-all (`shorten_images` keeping none) and the
 * defaults. Two measurements:
 *
 * - Billing (`simulate`): every model call of the session prepared by the strategies and billed
 *   as Anthropic bills it (bench/cache-billing.ts, images at Anthropic's rule of
 *   lib/tokens/media-tokens.ts), and the prompt's bytes with each image sent whole counted at
 *   its size.
 * - Storage (`measureStorage`): the same session through lib/turn/ on the memory store
 *   (bench/memory-driver.ts): steps appended as POST /items does, the log packed every 4 steps,
 *   and every `measureEvery`-th step a real turn whose input is the step's output, counted.
 */

export const SCREENSHOT_WIDTH = 1280;
export const SCREENSHOT_HEIGHT = 800;
export const CACHE_SHARE_GOAL = 0.85;
export const COST_RATIO_GOAL = 5;

export interface ComputerUseConfig {
  name: 'keep-all' | 'drop-all' | 'default';
  label: string;
  strategies?: string;
  strategyConfig: Record<string, number>;
}

export const COMPUTER_USE_CONFIGS: readonly ComputerUseConfig[] = [
  {
    name: 'keep-all',
    label: 'keep-all: `shorten_tools_epoch_increment,inbox`',
    strategies: 'shorten_tools_epoch_increment,inbox',
    strategyConfig: {},
  },
  {
    name: 'drop-all',
    label: 'drop-all: defaults with `full_images` 0, `image_epoch_size` 1',
    strategyConfig: { full_images: 0, image_epoch_size: 1 },
  },
  { name: 'default', label: 'default: `shorten_tools_epoch_increment,shorten_images,inbox`', strategyConfig: {} },
];

/** A PNG of `bytes` bytes: signature, IHDR (1280x800, RGBA), one IDAT of seeded random bytes, IEND. */
export function screenshotPng(random: SeededRandom, bytes: number): Uint8Array {
  const png = new Uint8Array(bytes);
  const view = new DataView(png.buffer);
  png.set([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  const chunk = (at: number, type: string, length: number) => {
    view.setUint32(at, length);
    for (let index = 0; index < 4; index += 1) png[at + 4 + index] = type.charCodeAt(index);
    return at + 8;
  };
  const seal = (at: number, length: number) => {
    view.setUint32(at + 8 + length, crc32(png.subarray(at + 4, at + 8 + length)));
    return at + 12 + length;
  };
  let at = chunk(8, 'IHDR', 13);
  view.setUint32(at, SCREENSHOT_WIDTH);
  view.setUint32(at + 4, SCREENSHOT_HEIGHT);
  png.set([8, 6, 0, 0, 0], at + 8);
  at = seal(8, 13);
  const idat = bytes - at - 12 - 12;
  const dataStart = chunk(at, 'IDAT', idat);
  for (let offset = dataStart; offset + 4 <= dataStart + idat; offset += 4)
    view.setUint32(offset, Math.floor(random.next() * 2 ** 32));
  at = seal(at, idat);
  chunk(at, 'IEND', 0);
  seal(at, 0);
  return png;
}

interface Step {
  call: Item & { type: 'function_call' };
  text: string;
  png: Uint8Array;
}

const ACTIONS = ['left_click', 'type', 'scroll', 'key', 'double_click', 'mouse_move'] as const;

/** The session's steps, the same bytes on every run for a seed. */
export function* computerUseSteps(steps: number, seed: number): Generator<Step> {
  const random = new SeededRandom(seed);
  for (let step = 1; step <= steps; step += 1) {
    const action = random.pick(ACTIONS);
    const x = random.integer(0, SCREENSHOT_WIDTH - 1);
    const y = random.integer(0, SCREENSHOT_HEIGHT - 1);
    const argumentsText = JSON.stringify(
      action === 'type' ? { action, text: `query ${step}` } : { action, coordinate: [x, y] },
    );
    yield {
      call: { type: 'function_call', call_id: `cu_${step}`, name: 'computer', arguments: argumentsText },
      text: `Step ${step}: ${action} done at (${x}, ${y}); the page shows ${random.integer(3, 40)} elements.`,
      png: screenshotPng(random, random.integer(100 * 1024, 300 * 1024)),
    };
  }
}

function outputItem(step: Step, image: ContentPart): FunctionCallOutputItem {
  return {
    type: 'function_call_output',
    call_id: step.call.call_id,
    output: [{ type: 'input_text', text: step.text }, image],
  };
}

const INSTRUCTIONS = 'You operate a computer through screenshots. '.repeat(90);
const TASK = 'Book the cheapest flight from Lisbon to Oslo next Friday and send me the receipt.';

/** Tokens of an item's images and files (Anthropic's rule), for the billing. */
function mediaTokensOf(item: PromptItem): number {
  return item.type === 'function_call' ? 0 : mediaTokens(item.type === 'message' ? item.content : item.output);
}

/** Image bytes the prompt sends whole (parts that still reference their blob). */
function wholeImageBytes(prompt: readonly PromptItem[]): { images: number; bytes: number } {
  let images = 0;
  let bytes = 0;
  for (const item of prompt) {
    const content = item.type === 'message' ? item.content : item.type === 'function_call_output' ? item.output : '';
    if (typeof content === 'string') continue;
    for (const part of content)
      if (part.type === 'input_image') {
        images += 1;
        bytes += part.bytes ?? 0;
      }
  }
  return { images, bytes };
}

export interface BillingFigures {
  name: ComputerUseConfig['name'];
  label: string;
  calls: number;
  /** Anthropic cache-read share of all input tokens over the session. */
  readShare: number;
  /** Input cost of the whole session in base-price tokens, and of the last 10% of its calls per call. */
  cost: number;
  lastCallsCost: number;
  meanPromptTokens: number;
  /** Prompt bytes (wire JSON, each whole image at its size), mean over the calls and at the last one. */
  meanPromptBytes: number;
  lastPromptBytes: number;
  lastWholeImages: number;
}

/** Bills every model call of the session (one after each step's output) under each configuration. */
export function simulateComputerUse(steps: number, seed: number): BillingFigures[] {
  const history: SequencedItem[] = [
    { type: 'message', role: 'system', content: INSTRUCTIONS, seq: 1 },
    { type: 'message', role: 'user', content: TASK, seq: 2 },
  ];
  const billings = COMPUTER_USE_CONFIGS.map((config) => ({
    config,
    strategyConfig: resolveStrategyConfig({ request: config.strategyConfig }),
    anthropic: new AnthropicBilling('adapter', estimateTokens(TOOLS_CHARACTERS), mediaTokensOf),
    promptBytes: [] as number[],
    lastWholeImages: 0,
  }));
  for (const step of computerUseSteps(steps, seed)) {
    const image: ContentPart = {
      type: 'input_image',
      blob: sha256Hex(step.png),
      media_type: 'image/png',
      bytes: step.png.length,
      width: SCREENSHOT_WIDTH,
      height: SCREENSHOT_HEIGHT,
    };
    history.push({ ...step.call, seq: history.length + 1 });
    history.push({ ...(outputItem(step, image) as SequencedItem), seq: history.length + 1 });
    for (const billing of billings) {
      const prepared = preparePrompt(history, billing.config.strategies, { config: billing.strategyConfig });
      const stableEnd = prepared.stablePrefixLength > 0 ? prepared.stablePrefixLength - 1 : undefined;
      billing.anthropic.bill(prepared.items, stableEnd);
      const whole = wholeImageBytes(prepared.items);
      billing.promptBytes.push(Buffer.byteLength(serializePrompt(prepared.items)) + whole.bytes);
      billing.lastWholeImages = whole.images;
    }
  }
  return billings.map(({ config, anthropic, promptBytes, lastWholeImages }) => {
    const totals = billingTotals(anthropic.calls);
    const last = anthropic.calls.slice(-Math.max(1, Math.floor(anthropic.calls.length / 10)));
    return {
      name: config.name,
      label: config.label,
      calls: totals.calls,
      readShare: totals.readShare,
      cost: totals.cost,
      lastCallsCost: last.reduce((total, call) => total + call.cost, 0) / last.length,
      meanPromptTokens: totals.tokens / Math.max(1, totals.calls),
      meanPromptBytes: promptBytes.reduce((total, bytes) => total + bytes, 0) / Math.max(1, promptBytes.length),
      lastPromptBytes: promptBytes.at(-1) ?? 0,
      lastWholeImages,
    };
  });
}

export interface StorageFigures {
  name: ComputerUseConfig['name'];
  /** One entry per measured turn. */
  turns: { step: number; bytesRead: number; operations: number; blobGets: number; promptBytes: number }[];
}

/** Runs the session through real turns on the memory store; every `measureEvery`-th step is a counted turn. */
export async function measureComputerUseStorage(
  steps: number,
  seed: number,
  measureEvery: number,
  log: (line: string) => void,
): Promise<StorageFigures[]> {
  const figures: StorageFigures[] = [];
  for (const config of COMPUTER_USE_CONFIGS) {
    const driver = new MemoryTurnDriver();
    const id = `computer-use-${config.name}`;
    await driver.createSession(id, INSTRUCTIONS, {
      ...(config.strategies === undefined ? {} : { strategies: config.strategies }),
      strategy_config: config.strategyConfig,
    });
    await driver.append(id, [{ type: 'message', role: 'user', content: TASK }]);
    const turns: StorageFigures['turns'] = [];
    for (const step of computerUseSteps(steps, seed)) {
      const number = turns.length + 1;
      const output = outputItem(step, {
        type: 'input_image',
        image_url: `data:image/png;base64,${encodeBase64(step.png)}`,
      });
      const stepNumber = Number(step.call.call_id.slice(3));
      if (stepNumber % measureEvery !== 0) {
        await driver.append(id, [step.call, output]);
        if (stepNumber % 4 === 0) await driver.pack(id);
        continue;
      }
      await driver.append(id, [step.call]);
      const turn = await driver.turn(id, { input: [output] });
      const storage = turn.storage!;
      turns.push({
        step: stepNumber,
        bytesRead: storage.bytesRead,
        operations: storage.get + storage.head + storage.put + storage.list + storage.delete,
        blobGets: (turn.operations ?? []).filter((entry) => entry.operation === 'get' && entry.kind.startsWith('blob'))
          .length,
        promptBytes: turn.promptBytes ?? 0,
      });
      if (number % 5 === 0) log(`  ${config.name}: step ${stepNumber}, ${formatBytes(storage.bytesRead)} read`);
    }
    await driver.close();
    figures.push({ name: config.name, turns });
  }
  return figures;
}

export interface ComputerUseFigures {
  /** Steps of the billing simulation and of the storage run. */
  steps: number;
  storageSteps: number;
  seed: number;
  measureEvery: number;
  command: string;
  billing: BillingFigures[];
  storage: StorageFigures[];
}

/**
 * The goals: the default's cache-read share, and keep-all's cost per call at the last step
 * (the mean of the last 10% of the calls) over the default's; beside it the same ratio of the
 * whole session's cost.
 */
export function computerUseGoals(figures: Pick<ComputerUseFigures, 'billing'>): {
  readShare: number;
  costRatio: number;
  sessionCostRatio: number;
} {
  const byName = (name: string) => figures.billing.find((figure) => figure.name === name)!;
  return {
    readShare: byName('default').readShare,
    costRatio: byName('keep-all').lastCallsCost / byName('default').lastCallsCost,
    sessionCostRatio: byName('keep-all').cost / byName('default').cost,
  };
}

/** The rows of "Goals at a glance". */
export function computerUseGoalRows(
  figures: ComputerUseFigures,
): { goal: string; target: string; measured: string; met: boolean }[] {
  const goals = computerUseGoals(figures);
  const steps = figures.steps.toLocaleString('en-US');
  return [
    {
      goal: `Anthropic cache-read share, computer use, ${steps} steps, default strategies`,
      target: `>= ${CACHE_SHARE_GOAL * 100}%`,
      measured: `${(goals.readShare * 100).toFixed(1)}%`,
      met: goals.readShare >= CACHE_SHARE_GOAL,
    },
    {
      goal: `Cost of a call at step ${steps}, computer use: keep-all / default (mean of the last 10% of the calls)`,
      target: `>= ${COST_RATIO_GOAL}`,
      measured: `${goals.costRatio.toFixed(2)} (whole session: ${goals.sessionCostRatio.toFixed(2)})`,
      met: goals.costRatio >= COST_RATIO_GOAL,
    },
  ];
}

/** Bytes read over the read budget (1.1 x prompt bytes, images at their size, + 64 KiB), worst turn. */
function worstBudget(storage: StorageFigures): number {
  return Math.max(...storage.turns.map((turn) => turn.bytesRead / (1.1 * turn.promptBytes + 64 * 1024)));
}

/** The RESULTS.md section. */
export function computerUseSection(figures: ComputerUseFigures | undefined, notMeasured: string): string[] {
  const title = '## Computer use: old screenshots pruned';
  if (!figures) return [title, '', `${notMeasured}.`, ''];
  const steps = figures.steps.toLocaleString('en-US');
  const lines = [
    title,
    '',
    `Command: \`${figures.command}\` (bench/computer-use.ts). ${steps} steps (seed ${figures.seed}), each a ` +
      '`computer` call and its output: one line of text and a PNG screenshot of ' +
      `${SCREENSHOT_WIDTH}x${SCREENSHOT_HEIGHT} and 100-300 KB (random bytes, so nothing compresses), ` +
      'after 3.9 KB of instructions and one user message. Billing: every model call (one after each output) ' +
      "billed as Anthropic bills it (section 3: the adapter's breakpoints, " +
      `a ${ANTHROPIC_LOOKBACK}-block lookback, reads 0.1x, writes 1.25x), an image at Anthropic's rule ` +
      `(${Math.min(1600, Math.ceil((SCREENSHOT_WIDTH * SCREENSHOT_HEIGHT) / 750))} tokens here), ` +
      'costs in million base-price tokens. Prompt bytes: the wire JSON with each image sent whole at its size. ' +
      `Storage: the first ${figures.storageSteps.toLocaleString('en-US')} steps of the same session on the memory ` +
      'store, appended as POST /items does, packed every 4 steps; ' +
      `every ${figures.measureEvery}th step is a real turn (echo) whose input is that step's output, counted ` +
      '(medians over those turns, and the last).',
    '',
    '| configuration | Anthropic read share | session cost | cost per call, last 10% | mean prompt tokens | ' +
      'prompt bytes, mean / last | whole images at the end |',
    '|---|---|---|---|---|---|---|',
  ];
  const thousands = (value: number) => `${(value / 1e3).toFixed(1)} k`;
  for (const figure of figures.billing)
    lines.push(
      `| ${figure.label} | ${(figure.readShare * 100).toFixed(1)}% | ${(figure.cost / 1e6).toFixed(2)} M | ` +
        `${thousands(figure.lastCallsCost)} | ${thousands(figure.meanPromptTokens)} | ` +
        `${formatBytes(figure.meanPromptBytes)} / ${formatBytes(figure.lastPromptBytes)} | ${figure.lastWholeImages} |`,
    );
  lines.push(
    '',
    '| configuration | bytes read per turn, median / last | storage operations per turn, median / max ' +
      '(of which blob gets, median) | ' +
      'prompt bytes per turn, median | read budget (1.1 x prompt bytes + 64 KiB), worst turn |',
    '|---|---|---|---|---|',
  );
  for (const storage of figures.storage) {
    const label = figures.billing.find((figure) => figure.name === storage.name)!.label;
    const column = (pick: (turn: StorageFigures['turns'][number]) => number) => storage.turns.map(pick);
    const operations = column((turn) => turn.operations);
    lines.push(
      `| ${label} | ${formatBytes(median(column((turn) => turn.bytesRead)))} / ` +
        `${formatBytes(storage.turns.at(-1)?.bytesRead ?? 0)} | ${median(operations)} / ${Math.max(...operations)} ` +
        `(${median(column((turn) => turn.blobGets))}) | ` +
        `${formatBytes(median(column((turn) => turn.promptBytes)))} | ${worstBudget(storage).toFixed(2)} |`,
    );
  }
  const goals = computerUseGoals(figures);
  lines.push(
    '',
    `Goals at ${steps} steps, default strategies: Anthropic cache-read share ${(goals.readShare * 100).toFixed(1)}% ` +
      `(goal >= ${CACHE_SHARE_GOAL * 100}%: ${goals.readShare >= CACHE_SHARE_GOAL ? 'met' : '**not met**'}); ` +
      `a call at step ${steps} (mean of the last 10%) costs ${goals.costRatio.toFixed(2)}x less than keep-all's ` +
      `(goal >= ${COST_RATIO_GOAL}x: ${goals.costRatio >= COST_RATIO_GOAL ? 'met' : '**not met**'}); ` +
      `the whole session up to step ${steps}, ${goals.sessionCostRatio.toFixed(2)}x less ` +
      `(${goals.sessionCostRatio >= COST_RATIO_GOAL ? 'met' : "**not met**: keep-all's prompts are small early on"}).`,
    '',
    'Why the default reads less from the cache than keep-all: every move of the image boundary (one in ' +
      '`image_epoch_size` steps) changes the prompt from the oldest newly pruned screenshot on. With tools offered, ' +
      "the adapter's four breakpoints are the last tool, the last two blocks and, since pruned screenshots follow " +
      "the tool strategy's context notice, the notice in place of the instructions " +
      '(lib/models/cache-breakpoints.ts), so a move re-writes the prompt from the notice on (the whole tool calls, ' +
      'their screenshots pruned but the newest), not from the instructions. No breakpoint ends at the image ' +
      "boundary itself: the previous boundary is 2 x `image_epoch_size` blocks back, beyond Anthropic's 20-block " +
      'lookback from the new one. Drop-all has no such moves (each screenshot is pruned in the ' +
      'call it arrives in, so nothing cached changes) and reads 98%. Storage operations per turn are ' +
      "the turn's 8, one get per image sent whole (keep-all: every screenshot the tool strategy keeps, up to 230), " +
      'and the records appended since the last pack (the log is packed every 4 steps, a turn is measured every ' +
      `${figures.measureEvery}th). Bytes read stay within the read budget with images counted at their size.`,
    '',
  );
  return lines;
}
