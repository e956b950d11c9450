import type { PromptItem } from '../lib/items.ts';
import { computeAggregates, type SequencedItem } from '../lib/strategies/aggregates.ts';
import { preparePrompt } from '../lib/strategies/prepare-prompt.ts';
import { selectTail, tailRequirement } from '../lib/strategies/select-tail.ts';
import { defaultStrategyConfig } from '../lib/strategies/strategy-config.ts';

export interface StrategyBenchFigure {
  /** The strategy list measured. */
  strategies: string;
  /** `full`: the whole history; `tail`: the tail view with aggregates. */
  input: 'full' | 'tail';
  items: number;
  toolCalls: number;
  medianMs: number;
  p90Ms: number;
  /** The fastest run: the least disturbed by other processes on a shared machine. */
  minMs: number;
}

/**
 * A deterministic agent-like history: `toolCalls` calls with outputs, and enough user and
 * assistant messages to reach `items`. Outputs vary from a few characters to several KiB,
 * some arguments carry long strings, and one call in seven repeats an earlier one.
 */
export function benchHistory(items = 10_000, toolCalls = 2_000): SequencedItem[] {
  const history: PromptItem[] = [];
  const messages = items - toolCalls * 2;
  const messagesPerCall = messages / toolCalls;
  let messageBudget = 0;
  let random = 12345;
  const next = () => {
    random = (random * 1103515245 + 12345) % 2147483648;
    return random / 2147483648;
  };
  for (let index = 1; index <= toolCalls; index += 1) {
    messageBudget += messagesPerCall;
    while (messageBudget >= 1) {
      messageBudget -= 1;
      const role = next() < 0.5 ? 'user' : 'assistant';
      history.push({
        type: 'message',
        role,
        content: `message ${history.length}: ${'lorem ipsum '.repeat(Math.floor(next() * 20))}`,
      });
    }
    const repeat = index % 7 === 0 ? Math.floor(next() * index) : index;
    const argumentsText =
      next() < 0.2
        ? JSON.stringify({ path: `src/file-${repeat}.ts`, content: 'x'.repeat(300 + Math.floor(next() * 2000)) })
        : JSON.stringify({ path: `src/file-${repeat}.ts`, line: repeat % 100 });
    history.push({
      type: 'function_call',
      call_id: `call_${index}`,
      name: index % 3 === 0 ? 'write_file' : 'read_file',
      arguments: argumentsText,
    });
    history.push({
      type: 'function_call_output',
      call_id: `call_${index}`,
      output: `result ${index} `.padEnd(20 + Math.floor(next() * 4000), 'r'),
    });
  }
  while (history.length < items) history.push({ type: 'message', role: 'assistant', content: 'done' });
  return history.map((item, index) => ({ ...item, seq: index + 1 }));
}

function measure(run: () => unknown, iterations: number): { medianMs: number; p90Ms: number; minMs: number } {
  for (let warmup = 0; warmup < 30; warmup += 1) run();
  const samples: number[] = [];
  for (let iteration = 0; iteration < iterations; iteration += 1) {
    const start = performance.now();
    run();
    samples.push(performance.now() - start);
  }
  samples.sort((a, b) => a - b);
  return {
    medianMs: samples[Math.floor(samples.length / 2)]!,
    p90Ms: samples[Math.floor(samples.length * 0.9)]!,
    minMs: samples[0]!,
  };
}

/**
 * Strategy CPU per prompt on a 10,000-item history with 2,000 tool calls: the median (and
 * p90) of `preparePrompt` per strategy list, on the full history and on the tail view
 * with aggregates (what a turn actually runs). Goal: the default list under 5 ms.
 */
export function benchStrategies(options: { iterations?: number } = {}): StrategyBenchFigure[] {
  const iterations = options.iterations ?? 101;
  const history = benchHistory();
  const toolCalls = history.filter((item) => item.type === 'function_call').length;
  const config = defaultStrategyConfig();
  const aggregates = computeAggregates(history);
  const inbox = (items: PromptItem[]) => items;
  const lists = ['shorten_tools_epoch_increment,inbox', 'shorten_tools_epoch', 'shorten_tools', 'none'];
  const figures: StrategyBenchFigure[] = [];
  for (const strategies of lists) {
    const full = measure(() => preparePrompt(history, strategies, { config, inbox }), iterations);
    figures.push({ strategies, input: 'full', items: history.length, toolCalls, ...full });
    const view = selectTail(history, tailRequirement(strategies, config, aggregates));
    const tail = measure(() => preparePrompt(view, strategies, { config, aggregates, inbox }), iterations);
    figures.push({ strategies, input: 'tail', items: view.length, toolCalls, ...tail });
  }
  return figures;
}

const invokedDirectly =
  typeof process !== 'undefined' &&
  process.argv[1] !== undefined &&
  import.meta.url.endsWith(process.argv[1].replace(/\\/g, '/'));
if (invokedDirectly) {
  console.log('strategy CPU per prompt (10,000 items, 2,000 tool calls; goal: default list median < 5 ms)');
  for (const figure of benchStrategies()) {
    console.log(
      `${figure.strategies.padEnd(38)} ${figure.input.padEnd(4)} ${String(figure.items).padStart(6)} items  ` +
        `median ${figure.medianMs.toFixed(2)} ms  p90 ${figure.p90Ms.toFixed(2)} ms  min ${figure.minMs.toFixed(2)} ms`,
    );
  }
}
