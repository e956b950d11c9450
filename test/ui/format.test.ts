import { describe, expect, it } from 'vitest';
import {
  budgetCostText,
  costText,
  counted,
  countsText,
  durationText,
  imagePruned,
  itemText,
  relativeTime,
  sizeText,
  turnSummary,
} from '../../functions/ui/client/format.ts';

/** The inspector's text for times and rows (functions/ui/client/format.ts); the page itself is tested in Chromium. */
describe("the inspector's formatting", () => {
  const now = new Date('2026-03-10T12:00:00Z');
  const ago = (seconds: number) => relativeTime(new Date(now.getTime() - seconds * 1000), now);

  it('says how long ago a time was, in the largest whole unit', () => {
    expect(ago(0)).toBe('just now');
    expect(ago(59)).toBe('just now');
    expect(ago(60)).toBe('1 min ago');
    expect(ago(3 * 60 + 59)).toBe('3 min ago');
    expect(ago(3_600 * 5)).toBe('5 h ago');
    expect(ago(86_400 * 2)).toBe('2 d ago');
    expect(ago(86_400 * 45)).toBe('1 mo ago');
    expect(ago(86_400 * 800)).toBe('2 y ago');
    expect(ago(-120)).toBe('in 2 min');
  });

  it('writes a cost in cents, or in two significant digits under a cent', () => {
    expect(costText(0)).toBe('$0.00');
    expect(costText(0.4123)).toBe('$0.41');
    expect(costText(12)).toBe('$12.00');
    expect(costText(0.001234)).toBe('$0.0012');
  });

  it("writes a cost limit's spend so that it reads reached only when it is", () => {
    expect(budgetCostText(0.41, 1)).toBe('$0.41 / $1.00');
    expect(budgetCostText(1, 1)).toBe('$1.00 / $1.00');
    // Equal in cents (or two digits under a cent) but not equal: written as the counts line writes a cost.
    expect(budgetCostText(0.00855, 0.0086)).toBe('$0.008550 / $0.008600');
    expect(budgetCostText(0.021825, 0.02)).toBe('$0.021825 / $0.020000');
    expect(budgetCostText(0.020000001, 0.02)).toBe('$0.020000001 / $0.020000000');
  });

  it("labels a session's token totals as what was billed, failed turns' estimates included", () => {
    // One completed turn (10 input tokens) and a failed one billed its estimate (5): the totals are 15.
    const usage = {
      turns: 1,
      input_tokens: 15,
      cached_input_tokens: 0,
      cache_write_tokens: 0,
      output_tokens: 4,
      reasoning_tokens: 0,
      cost_usd: null,
    };
    const text = countsText({ counts: { items: 4, turns: 2, tool_calls: 0 }, model: 'echo', usage });
    expect(text).not.toContain('1 completed turns');
    expect(text).toContain(
      "billed (1 completed turn, failed turns' estimates, summaries): 15 input tokens " +
        '(0 cached, 0 written to cache), 4 output (0 reasoning)',
    );
  });

  it('writes a count of one in the singular, any other in the plural', () => {
    expect(counted(1, 'turn')).toBe('1 turn');
    expect(counted(0, 'turn')).toBe('0 turns');
    expect(counted(2, 'tool call')).toBe('2 tool calls');
    const usage = {
      turns: 1,
      input_tokens: 1,
      cached_input_tokens: 0,
      cache_write_tokens: 0,
      output_tokens: 1,
      reasoning_tokens: 0,
      cost_usd: null,
    };
    expect(countsText({ counts: { items: 1, turns: 1, tool_calls: 1 }, model: 'echo', usage })).toBe(
      '1 item · 1 turn · 1 tool call · model echo · cost unknown · 0% cache read · ' +
        "billed (1 completed turn, failed turns' estimates, summaries): " +
        '1 input token (0 cached, 0 written to cache), 1 output (0 reasoning)',
    );
  });

  it('writes durations in ms, s, or min and s', () => {
    expect(durationText(850)).toBe('850 ms');
    expect(durationText(1_440)).toBe('1.4 s');
    expect(durationText(185_000)).toBe('3 min 5 s');
  });

  it("reads an aborted turn's row as its notice and reason, a completed one's as its counts", () => {
    const aborted = {
      turn: 7,
      status: 'aborted',
      model: null,
      context: null,
      error: { code: 'aborted', message: 'aborted: wrap up', details: { reason: 'wrap up', notice: 'abort' } },
    };
    expect(turnSummary(aborted)).toBe('Turn 7 · aborted by notice abort: “wrap up”');
    const completed = {
      turn: 8,
      status: 'completed',
      model: 'echo',
      context: { prompt_chars: 200 },
      prefix_reused_chars: 150,
      usage: null,
    };
    expect(turnSummary(completed)).toBe('Turn 8 · completed · echo · 200 chars · 75% reused');
    // A turn cancelled before its prompt was built has no model nor prompt: the row leaves them out.
    const cancelled = {
      turn: 9,
      status: 'cancelled',
      model: null,
      context: null,
      prefix_reused_chars: null,
      usage: null,
    };
    expect(turnSummary(cancelled)).toBe('Turn 9 · cancelled');
  });

  it('reads parts as their text (images and files show beside it), and sizes in B, KB, MB', () => {
    const image = { type: 'input_image', blob: 'ab', media_type: 'image/png', bytes: 2048 };
    const content = [{ type: 'input_text', text: 'look' }, image, { type: 'input_text', text: 'here' }];
    expect(itemText({ type: 'message', role: 'user', content })).toBe('user: look\nhere');
    expect(itemText({ type: 'function_call_output', call_id: 'c1', output: [image] })).toBe('output c1: ');
    expect(itemText({ type: 'function_call_output', call_id: 'c1', output: 'done' })).toBe('output c1: done');
    const reasoning = [{ type: 'reasoning', summary: [{ type: 'summary_text', text: 'Look first.' }] }];
    const redacted = { type: 'reasoning', summary: [], encrypted_content: '{}' };
    const call = { type: 'function_call', name: 'ls', arguments: '{}', reasoning: [...reasoning, redacted] };
    expect(itemText(call)).toBe('reasoning: Look first.\nreasoning: [redacted]\ncall ls({})');
    expect(itemText({ type: 'message', role: 'assistant', content: 'Hi.', reasoning })).toBe(
      'reasoning: Look first.\nassistant: Hi.',
    );
    expect(sizeText(850)).toBe('850 B');
    expect(sizeText(145_408)).toBe('142 KB');
    expect(sizeText(1_572_864)).toBe('1.5 MB');
  });

  it('marks an image pruned when what the model got holds a placeholder starting with "[image"', () => {
    expect(imagePruned(undefined)).toBe(false);
    expect(imagePruned({ output: '[compacted: 900 chars, md5 a1b2c. ...]\n[image/png 40x30, 1 KB]\npage 1' })).toBe(
      true,
    );
    const omitted = '[image omitted: image/png 1280x800, 142 KB, turn 12]';
    expect(imagePruned({ output: [{ type: 'input_text', text: omitted }] })).toBe(true);
    expect(imagePruned({ output: '[compacted: 900 chars, md5 a1b2c. ...]\npage 1' })).toBe(false);
    expect(imagePruned({ arguments: '{"n":1}' })).toBe(false);
  });
});
