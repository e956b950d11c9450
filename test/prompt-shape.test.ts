import { describe, expect, it } from 'vitest';
import type { PromptItem, Tool } from '../lib/items.ts';
import { deepFreeze } from '../lib/deep-readonly.ts';
import { BLOCK_ITEMS, promptShape, reusedPrefixChars, TAIL_ITEMS } from '../lib/prompt-shape.ts';

const TOOLS: Tool[] = [{ type: 'function', name: 'read_file', parameters: { type: 'object' } }];

function items(count: number, tag = ''): PromptItem[] {
  return Array.from({ length: count }, (_, index): PromptItem => {
    if (index % 3 === 0)
      return { type: 'message', role: 'user', content: `question ${index}${tag}`.repeat(1 + (index % 4)) };
    if (index % 3 === 1)
      return { type: 'function_call', call_id: `call_${index}`, name: 'read_file', arguments: `{"n":${index}}` };
    return { type: 'function_call_output', call_id: `call_${index - 1}`, output: `output ${index}`.repeat(index % 7) };
  });
}

/** Characters of the first `end` items, as `prompt_chars` counts them. */
function chars(prompt: PromptItem[], end = prompt.length): number {
  let total = 0;
  for (const item of prompt.slice(0, end))
    total +=
      item.type === 'message'
        ? item.content.length
        : item.type === 'function_call'
          ? item.name.length + item.arguments.length
          : item.output.length;
  return total;
}

describe('promptShape', () => {
  it('counts every item of a prompt that repeats the previous one and grows', () => {
    for (const size of [0, 5, BLOCK_ITEMS, 300, 1_000]) {
      const previous = items(size);
      const current = [...previous, ...items(3, 'new')];
      const reused = reusedPrefixChars(promptShape(current, TOOLS, []), promptShape(previous, TOOLS, []));
      expect(reused).toBe(chars(previous));
    }
  });

  it('stops where two prompts part: exactly within both tails, at the last whole block before', () => {
    const size = 2_000;
    const previous = items(size);
    const shapeBefore = promptShape(previous, TOOLS, []);
    for (const at of [0, 1, 63, 64, 65, 700, 1_500, size - TAIL_ITEMS, size - 100, size - 1]) {
      const current = [...previous];
      current[at] = { type: 'message', role: 'user', content: 'changed' };
      const reused = reusedPrefixChars(promptShape(current, TOOLS, []), shapeBefore)!;
      const blockStart = at - (at % BLOCK_ITEMS);
      if (blockStart >= size - TAIL_ITEMS) expect(reused).toBe(chars(previous, at));
      else expect(reused).toBe(chars(previous, blockStart));
    }
  });

  it('reuses nothing when the tools differ', () => {
    const prompt = items(200);
    const other: Tool[] = [{ type: 'function', name: 'grep', parameters: { type: 'object' } }];
    expect(reusedPrefixChars(promptShape(prompt, TOOLS, []), promptShape(prompt, other, []))).toBe(0);
  });

  it('hashes blocks as it always has: receipts stored before compare with new ones', () => {
    // Multi-byte characters, surrogate pairs and lone surrogates, each block's items hashed
    // part by part: the values the first release of this format stored.
    const prompt = Array.from(
      { length: 130 },
      (_, index): PromptItem =>
        index % 2 === 0
          ? { type: 'message', role: 'user', content: `é ${index} 🙂${index % 5 === 0 ? '\ud800' : ''}` }
          : { type: 'function_call_output', call_id: `call_${index}`, output: `ü${index}\udc00` },
    );
    const shape = promptShape(prompt, TOOLS, []);
    expect(shape.tools).toBe('5c2db9e2a6e4');
    expect(shape.blocks).toBe('185057dcda5472b26ef3d8c6');
    expect(shape.tail.slice(0, 24)).toBe('bce1f95d22932ad1492a4f43');
  });

  it('tells a message from a call with the same text', () => {
    const message: PromptItem[] = [{ type: 'message', role: 'user', content: 'read_file{}' }];
    const call: PromptItem[] = [{ type: 'function_call', call_id: '', name: 'read_file', arguments: '{}' }];
    expect(reusedPrefixChars(promptShape(message, TOOLS, []), promptShape(call, TOOLS, []))).toBe(0);
  });

  it('keeps a size that does not grow with the items', () => {
    const small = JSON.stringify(promptShape(items(TAIL_ITEMS), TOOLS, [])).length;
    const large = JSON.stringify(promptShape(items(50_000), TOOLS, [])).length;
    // 781 block hashes and sizes beside the same 256-item tail: about 20 bytes a block.
    expect(large - small).toBeLessThan(25 * (50_000 / BLOCK_ITEMS));
  });

  it('compares receipts of the first format with each other, and not with the new one', () => {
    const first = { hashes: 'aaaaaaaaaaaabbbbbbbbbbbb', chars: [3, 4] };
    expect(reusedPrefixChars(first, { hashes: 'aaaaaaaaaaaacccccccccccc', chars: [3, 9] })).toBe(3);
    expect(reusedPrefixChars(first, promptShape(items(2), TOOLS, []))).toBeNull();
  });

  it('places synthetic items and names delivered notices', () => {
    const prompt: PromptItem[] = [
      ...items(4),
      { type: 'message', role: 'user', content: 'notice text', synthetic: 'inbox' },
    ];
    expect(promptShape(prompt, TOOLS, ['build-done']).synthetic).toEqual([
      { index: 4, synthetic: 'inbox', chars: 'notice text'.length, name: 'build-done' },
    ]);
  });

  it('hashes the frozen items a later prompt repeats only once, and gives the same shape', () => {
    let reads = 0;
    // Messages whose content counts its reads, frozen as the view and record caches keep items.
    const counted = Array.from({ length: 2_000 }, (_, index) => {
      const content = `message ${index}`;
      const message = { type: 'message', role: 'user' } as PromptItem;
      const get = () => {
        reads++;
        return content;
      };
      Object.defineProperty(message, 'content', { enumerable: true, get });
      return deepFreeze(message) as PromptItem;
    });
    const instructions = (): PromptItem => ({ type: 'message', role: 'system', content: 'Be brief.' });
    promptShape([instructions(), ...counted], TOOLS, []);
    reads = 0;
    const next: PromptItem[] = [instructions(), ...counted, { type: 'message', role: 'user', content: 'new' }];
    const shape = promptShape(next, TOOLS, []);
    // The first block holds the new instructions: only its items are read again.
    expect(reads).toBeLessThanOrEqual(2 * BLOCK_ITEMS);
    expect(shape).toEqual(promptShape(structuredClone(next), TOOLS, []));
  });

  it('hashes again an item that is not frozen, whose content may have changed', () => {
    const prompt = items(700);
    const before = promptShape(prompt, TOOLS, []);
    // Changed in place: an output in the first block, a message in the tail.
    (prompt[5] as { output: string }).output = 'changed';
    (prompt[prompt.length - 1] as { content: string }).content = 'changed';
    const after = promptShape(prompt, TOOLS, []);
    expect(after).toEqual(promptShape(structuredClone(prompt), TOOLS, []));
    expect(after.blocks.slice(0, 12)).not.toBe(before.blocks.slice(0, 12));
    expect(after.tail).not.toBe(before.tail);
  });
});
