/**
 * Anthropic's prompt-cache matching, applied to the Messages request bodies a fake server
 * recorded: the prompt is read as blocks in cache order (tools, system, then each message's
 * content blocks); a request writes a cache entry for the prefix ending at each block that carries
 * `cache_control`, and reads the longest earlier entry that ends at a breakpoint or at one of the
 * 19 blocks before it (the 20-block lookback). Token minimums and lifetimes are left out.
 */

export interface CacheReplay {
  /** Blocks of each request, in cache order. */
  blocks: number[];
  /** Blocks of each request read from the cache (the matched prefix), 0 for none. */
  readBlocks: number[];
  /** Block indices carrying cache_control, per request. */
  breakpoints: number[][];
}

const LOOKBACK = 20;

/** The blocks of one request body, each as a key that names its position kind and its content. */
function blockKeys(body: any): { keys: string[]; breakpoints: number[] } {
  const keys: string[] = [];
  const breakpoints: number[] = [];
  const add = (kind: string, block: any) => {
    const { cache_control: marked, ...content } = block;
    if (marked !== undefined) breakpoints.push(keys.length);
    keys.push(`${kind}:${JSON.stringify(content)}`);
  };
  for (const tool of body.tools ?? []) add('tool', tool);
  for (const block of body.system ?? []) add('system', block);
  for (const message of body.messages) {
    const content = typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : message.content;
    for (const [index, block] of content.entries()) add(`${message.role}${index === 0 ? ' start' : ''}`, block);
  }
  return { keys, breakpoints };
}

/** Replays the requests in order against one cache. */
export function replayAnthropicCache(bodies: any[]): CacheReplay {
  const cached = new Set<string>();
  const replay: CacheReplay = { blocks: [], readBlocks: [], breakpoints: [] };
  for (const body of bodies) {
    const { keys, breakpoints } = blockKeys(body);
    const prefixes: string[] = [];
    for (const [index, key] of keys.entries()) prefixes.push(`${index === 0 ? '' : prefixes[index - 1]}\u0000${key}`);
    let read = 0;
    for (const breakpoint of breakpoints) {
      for (let end = breakpoint; end >= Math.max(0, breakpoint - LOOKBACK + 1); end--) {
        if (cached.has(prefixes[end]!)) {
          read = Math.max(read, end + 1);
          break;
        }
      }
    }
    for (const breakpoint of breakpoints) cached.add(prefixes[breakpoint]!);
    replay.blocks.push(keys.length);
    replay.readBlocks.push(read);
    replay.breakpoints.push(breakpoints);
  }
  return replay;
}
