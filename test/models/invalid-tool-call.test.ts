import { describe, expect, it } from 'vitest';
import { malformedCompletionError } from '../support/fake-providers/malformed-completion.ts';

// A provider's tool call that is no valid function_call (an empty name) fails the call as a
// model failure that names the model, as docs/API.md has every `model_error`.

const call = { id: 'call_1', type: 'function', function: { name: '', arguments: '{}' } };
describe('a tool call that is no valid function_call', () => {
  it('is a model_error naming the model', async () => {
    const error = await malformedCompletionError({
      message: { role: 'assistant', content: null, tool_calls: [call] },
      finish_reason: 'tool_calls',
    });
    expect(error).toMatchObject({
      code: 'model_error',
      message: 'the model call failed',
      details: { model: 'openai-compatible:m' },
    });
  });
});
