import { describe, expect, it } from 'vitest';
import { clientError } from '../../lib/errors.ts';
import { resolveModel } from '../../lib/models/resolve-model.ts';
import { jsonAnswer, scriptedFetch } from '../support/fake-providers/scripted-fetch.ts';

// A provider's tool call that is no valid function_call (an empty name) fails the call as a
// model failure that names the model, as docs/API.md has every `model_error`.

const call = { id: 'call_1', type: 'function', function: { name: '', arguments: '{}' } };
const completion = {
  id: 'c',
  object: 'chat.completion',
  created: 1,
  model: 'm',
  choices: [
    { index: 0, message: { role: 'assistant', content: null, tool_calls: [call] }, finish_reason: 'tool_calls' },
  ],
  usage: { prompt_tokens: 10, completion_tokens: 2, total_tokens: 12 },
};
describe('a tool call that is no valid function_call', () => {
  it('is a model_error naming the model', async () => {
    const model = resolveModel('openai-compatible:m', {
      OPENAI_COMPATIBLE_BASE_URL: 'http://provider.test/v1',
      fetch: scriptedFetch([jsonAnswer(200, completion)]).fetch,
    });
    const request = { prompt: [{ type: 'message' as const, role: 'user' as const, content: 'hi' }], tools: [] };
    const error = await model.generate(request).then(
      () => expect.fail('the call ended'),
      (failure: any) => failure,
    );
    expect(clientError(error)).toMatchObject({
      code: 'model_error',
      message: 'the model call failed',
      details: { model: 'openai-compatible:m' },
    });
  });
});
