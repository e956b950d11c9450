import { describe, expect, it } from 'vitest';
import { clientError } from '../../lib/errors.ts';
import { resolveModel } from '../../lib/models/resolve-model.ts';
import { jsonAnswer, scriptedFetch } from '../support/fake-providers/scripted-fetch.ts';

// A provider's log probabilities that are no list of tokens fail the call as a model failure that
// names the model, as docs/API.md has every `model_error`.

const completion = {
  id: 'c',
  object: 'chat.completion',
  created: 1,
  model: 'm',
  choices: [
    {
      index: 0,
      message: { role: 'assistant', content: 'hi' },
      logprobs: { content: [{ token: 'hi', logprob: 'high' }] },
      finish_reason: 'stop',
    },
  ],
  usage: { prompt_tokens: 10, completion_tokens: 2, total_tokens: 12 },
};
describe('malformed log probabilities', () => {
  it('are a model_error naming the model', async () => {
    const model = resolveModel('openai-compatible:m', {
      OPENAI_COMPATIBLE_BASE_URL: 'http://provider.test/v1',
      fetch: scriptedFetch([jsonAnswer(200, completion)]).fetch,
    });
    const request = {
      prompt: [{ type: 'message' as const, role: 'user' as const, content: 'hi' }],
      tools: [],
      settings: { logprobs: 0 },
    };
    const error = await model.generate(request).then(
      () => expect.fail('the call ended'),
      (failure: any) => failure,
    );
    expect(clientError(error)).toEqual({
      code: 'model_error',
      message: 'the model call failed',
      details: { model: 'openai-compatible:m', issues: expect.any(Array) },
    });
  });
});
