import { describe, expect, it } from 'vitest';
import { planCompaction, summarizeContext } from '../../lib/compaction/index.ts';
import { clientError } from '../../lib/error-codes.ts';
import type { PromptItem } from '../../lib/items.ts';
import { resolveModel } from '../../lib/models/resolve-model.ts';
import { approximateTokenCounter } from '../../lib/tokens/index.ts';
import { jsonAnswer, scriptedFetch } from '../support/fake-providers/scripted-fetch.ts';

// A summary model that answers with no text (a tool call though it was offered none, or nothing)
// fails the compaction as a model failure that names the model, as docs/API.md has every
// `model_error`: the summary model may be another than the session's (SUMMARY_MODEL).

const items: PromptItem[] = ['plan the trip', 'to Paris'].map((content, index) => ({
  type: 'message',
  role: 'user',
  content,
  seq: index + 1,
}));
const plan = planCompaction(items, { keepTokens: 0, counter: approximateTokenCounter })!;

const completion = (message: object) => ({
  id: 'c',
  object: 'chat.completion',
  created: 1,
  model: 'm',
  choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 10, completion_tokens: 2, total_tokens: 12 },
});

describe('a summary model that answers without text', () => {
  it.each([
    [
      'a tool call',
      { content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'x', arguments: '{}' } }] },
    ],
    ['blank text', { content: '  ' }],
  ])('%s: model_error naming the model', async (_name, message) => {
    const script = scriptedFetch([jsonAnswer(200, completion(message))]);
    const model = resolveModel('openai-compatible:m', {
      OPENAI_COMPATIBLE_BASE_URL: 'http://provider.test/v1',
      fetch: script.fetch,
    });
    const error = await summarizeContext(model, null, plan, { maxSummaryTokens: 100 }).then(
      () => expect.fail('the summary was made'),
      (failure: any) => failure,
    );
    expect(clientError(error)).toEqual({
      code: 'model_error',
      message: 'the model call failed',
      details: { model: 'openai-compatible:m' },
    });
  });
});
