import { describe, expect, it } from 'vitest';
import { NotConfiguredError } from '../../lib/errors.ts';
import { parseModelAliases } from '../../lib/model-settings.ts';
import { itemId, parseItemId, parseReasoningId, parseResponseId, responseId } from '../../lib/openai/ids.ts';

describe('OpenAI-compatible ids', () => {
  it('round-trips a response id whose session holds underscores and digits', () => {
    const ref = { sessionId: 'a_1_2', turn: 12, inputSeq: 30, outputSeq: 33 };
    expect(responseId(ref)).toBe('resp_a_1_2_12_30_33');
    expect(parseResponseId(responseId(ref))).toEqual(ref);
    expect(parseItemId(itemId('function_call_output', 'x_9', 7))).toEqual({
      kind: 'function_call_output',
      sessionId: 'x_9',
      seq: 7,
    });
  });

  it('names the generation of a turn taken after a delete, and parses ids without one as before', () => {
    const ref = { sessionId: 'a_1_2', turn: 2, inputSeq: 3, outputSeq: 4, generation: 'g8234567890123abcdef01' };
    expect(responseId(ref)).toBe('resp_a_1_2_2_3_4_g8234567890123abcdef01');
    expect(parseResponseId(responseId(ref))).toEqual(ref);
    expect(parseResponseId('resp_a_1_2_2_3_4')).toEqual({ sessionId: 'a_1_2', turn: 2, inputSeq: 3, outputSeq: 4 });
    for (const id of ['resp_s_2_3_4_g1', 'resp_s_2_3_4_g8234567890123abcdef0G', 'resp_s_2_3_4_'])
      expect(parseResponseId(id), id).toBeUndefined();
  });

  it("names the generation of an item a delete's generation holds, its reasoning's before the place", () => {
    const generation = 'g8234567890123abcdef01';
    expect(itemId('message', 'a_1_g2', 5, generation)).toBe(`msg_a_1_g2_5_${generation}`);
    expect(parseItemId(`msg_a_1_g2_5_${generation}`)).toEqual({
      kind: 'message',
      sessionId: 'a_1_g2',
      seq: 5,
      generation,
    });
    expect(parseItemId('msg_a_1_g2_5')).toEqual({ kind: 'message', sessionId: 'a_1_g2', seq: 5 });
    const reasoning = `${itemId('reasoning', 'a_1', 5, generation)}_2`;
    expect(reasoning).toBe(`rs_a_1_5_${generation}_2`);
    expect(parseReasoningId(reasoning)).toEqual({ sessionId: 'a_1', seq: 5, n: 2, generation });
    expect(parseReasoningId('rs_a_1_5_2')).toEqual({ sessionId: 'a_1', seq: 5, n: 2 });
    expect(parseItemId(`msg_s_5_${generation}x`)).toBeUndefined();
  });

  it('refuses ids that name no turn or no items', () => {
    for (const id of [
      'resp_s_0_1_2',
      'resp_s_1_2_2',
      'resp_s_1_2',
      'resp__1_1_2',
      'resp_s/x_1_1_2',
      'msg_s_1',
      'resp_s_01_1_2',
    ])
      expect(parseResponseId(id), id).toBeUndefined();
    expect(parseItemId('msg_s_0')).toBeUndefined();
    expect(parseItemId('msg_s_01')).toBeUndefined();
    expect(parseItemId('resp_s_1')).toBeUndefined();
  });
});

describe('MODEL_ALIASES', () => {
  it('maps names to model ids, and refuses a malformed or repeated pair as not_configured', () => {
    expect(parseModelAliases(' gpt-4.1-mini=openai:gpt-4.1-mini, claude=anthropic:claude-sonnet-4-5 ,')).toEqual({
      'gpt-4.1-mini': 'openai:gpt-4.1-mini',
      claude: 'anthropic:claude-sonnet-4-5',
    });
    for (const text of ['claude', '=echo', 'a=', 'a=echo,a=echo'])
      expect(() => parseModelAliases(text), text).toThrow(NotConfiguredError);
  });
});
