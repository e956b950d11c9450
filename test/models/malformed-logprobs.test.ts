import { describe, expect, it } from 'vitest';
import { malformedCompletionError } from '../support/fake-providers/malformed-completion.ts';

// A provider's log probabilities that are no list of tokens fail the call as a model failure that
// names the model, as docs/API.md has every `model_error`.

describe('malformed log probabilities', () => {
  it('are a model_error naming the model', async () => {
    const error = await malformedCompletionError(
      {
        message: { role: 'assistant', content: 'hi' },
        logprobs: { content: [{ token: 'hi', logprob: 'high' }] },
        finish_reason: 'stop',
      },
      { logprobs: 0 },
    );
    expect(error).toEqual({
      code: 'model_error',
      message: 'the model call failed',
      details: { model: 'openai-compatible:m', issues: expect.any(Array) },
    });
  });
});
