import type { Item } from '../lib/items.ts';
import { SeededRandom } from './random.ts';

/** How a simulated agent session looks (the goals in bench/RESULTS.md). */
export interface AgentSessionOptions {
  seed: number;
  /** Tool calls between two user messages, on average (drawn from [0.6x, 1.4x]). */
  callsPerUserMessage?: number;
  /** Share of calls that repeat an earlier call (same name and arguments, new call_id). */
  repeatShare?: number;
  /** 1st and 99th percentile of a tool output's size in bytes (log-normal). */
  outputBytes?: [number, number];
  /** 1st and 99th percentile of a call's arguments in bytes (log-normal). */
  argumentBytes?: [number, number];
  /** 1st and 99th percentile of user and assistant message sizes in bytes (log-normal). */
  messageBytes?: [number, number];
}

const TOOL_NAMES = ['read_file', 'run_shell', 'grep', 'list_dir', 'edit_file', 'web_fetch'] as const;
const WORDS = [
  'error',
  'warning',
  'src',
  'test',
  'function',
  'return',
  'const',
  'await',
  'module',
  'export',
  'import',
  'value',
  'session',
  'request',
  'response',
  'status',
  'passed',
  'failed',
  'line',
  'column',
  'build',
  'cache',
  'index',
  'the',
  'of',
  'and',
  'to',
  'in',
  'is',
  'for',
  'with',
  'at',
  'node',
  'deno',
  'worker',
  'bucket',
  'object',
  'key',
  'stream',
];

/** ASCII text of exactly `length` characters, drawn from a seeded word pool. */
export class TextSource {
  readonly #pool: string;
  readonly #random: SeededRandom;

  /** `pool`: its size, or the pool itself (see withRandom). */
  constructor(random: SeededRandom, pool: number | string = 1 << 18) {
    this.#random = random;
    if (typeof pool === 'string') {
      this.#pool = pool;
      return;
    }
    const words: string[] = [];
    let size = 0;
    while (size < pool) {
      const word = random.pick(WORDS) + (random.next() < 0.08 ? '\n' : ' ');
      words.push(word);
      size += word.length;
    }
    this.#pool = words.join('');
  }

  /** The same pool drawn from with `random`. */
  withRandom(random: SeededRandom): TextSource {
    return new TextSource(random, this.#pool);
  }

  text(length: number): string {
    let result = '';
    while (result.length < length) {
      const start = this.#random.integer(0, this.#pool.length - 1);
      result += this.#pool.slice(start, start + (length - result.length));
    }
    return result;
  }
}

/**
 * An endless agent session: a user message, then about `callsPerUserMessage` tool calls each
 * followed by its output, then an assistant message, and again. Sizes are log-normal; a share
 * of calls repeats an earlier call's name and arguments (and gets the same output, as a
 * re-read file would). Deterministic for a seed.
 */
export function* agentItems(options: AgentSessionOptions): Generator<Item> {
  const random = new SeededRandom(options.seed);
  const text = new TextSource(random);
  const callsPerUserMessage = options.callsPerUserMessage ?? 25;
  const repeatShare = options.repeatShare ?? 0.05;
  const [outputMin, outputMax] = options.outputBytes ?? [200, 20_000];
  const [argumentMin, argumentMax] = options.argumentBytes ?? [50, 2_000];
  const [messageMin, messageMax] = options.messageBytes ?? [40, 1_500];
  // Each new call is drawn from `random` as it stood before it, so the state kept replays it: a
  // repeat draws it again instead of the session holding every call's strings (at a million
  // items they were over 80 MiB of the load's own RSS, bench/append-load.ts).
  const earlier: number[] = [];
  const drawCall = (from: SeededRandom, source: TextSource) => {
    const name = from.pick(TOOL_NAMES);
    return {
      name,
      arguments: callArguments(name, from.logNormalBetween(argumentMin, argumentMax), source),
      output: source.text(from.logNormalBetween(outputMin, outputMax)),
    };
  };
  let callNumber = 0;
  for (;;) {
    yield { type: 'message', role: 'user', content: text.text(random.logNormalBetween(messageMin, messageMax)) };
    const calls = random.integer(Math.round(callsPerUserMessage * 0.6), Math.round(callsPerUserMessage * 1.4));
    for (let index = 0; index < calls; index++) {
      callNumber += 1;
      const suffix = random.integer(0, 0xffffff).toString(16).padStart(6, '0');
      const callId = `call_${callNumber.toString(36).padStart(6, '0')}${suffix}`;
      let call: { name: string; arguments: string; output: string };
      if (earlier.length > 0 && random.next() < repeatShare) {
        const replay = new SeededRandom(random.pick(earlier));
        call = drawCall(replay, text.withRandom(replay));
      } else {
        earlier.push(random.state);
        call = drawCall(random, text);
      }
      yield { type: 'function_call', call_id: callId, name: call.name, arguments: call.arguments };
      yield { type: 'function_call_output', call_id: callId, output: call.output };
    }
    yield { type: 'message', role: 'assistant', content: text.text(random.logNormalBetween(messageMin, messageMax)) };
  }
}

/** JSON arguments of about `length` bytes (at least the fixed part). */
function callArguments(name: string, length: number, text: TextSource): string {
  const base = { path: `src/${text.text(12).replace(/\W/g, '_')}.ts` };
  const fixed = JSON.stringify({ ...base, [name === 'edit_file' ? 'content' : 'query']: '' }).length;
  return JSON.stringify({
    ...base,
    [name === 'edit_file' ? 'content' : 'query']: text.text(Math.max(0, length - fixed)).replace(/\n/g, ' '),
  });
}

/** The first `count` items of an agent session, ending on a complete call/output pair or message. */
export function agentHistory(count: number, options: AgentSessionOptions): Item[] {
  const items: Item[] = [];
  for (const item of agentItems(options)) {
    if (items.length >= count) break;
    items.push(item);
  }
  if (items.at(-1)?.type === 'function_call')
    items[items.length - 1] = { type: 'message', role: 'assistant', content: 'working on it' };
  return items;
}

/** The first items of an agent session up to and including its `toolCalls`-th output. */
export function agentHistoryWithCalls(toolCalls: number, options: AgentSessionOptions): Item[] {
  const items: Item[] = [];
  let outputs = 0;
  for (const item of agentItems(options)) {
    items.push(item);
    if (item.type === 'function_call_output' && ++outputs >= toolCalls) break;
  }
  return items;
}
