import { describe, expect, it } from 'vitest';
import { clientError } from '../../lib/error-codes.ts';
import type { Model, ModelStreamEvent } from '../../lib/models/model.ts';
import { callModel } from '../../lib/turn/model-call.ts';

// A model stream that ends without its result (no `done` event) fails the turn as a model failure
// that names the model, as docs/API.md has every `model_error`.

describe('a model stream that ends without a result', () => {
  it('is a model_error naming the model', async () => {
    const model = {
      id: 'openai:gpt-4.1-mini',
      generate: () => Promise.reject(new Error('not called')),
      async *stream(): AsyncIterable<ModelStreamEvent> {
        yield { type: 'text_delta', delta: 'partial' } as ModelStreamEvent;
      },
    } as unknown as Model;
    const error = await callModel(model, { prompt: [], tools: [] }, () => {}).then(
      () => expect.fail('the call ended'),
      (failure: any) => failure,
    );
    expect(clientError(error)).toEqual({
      code: 'model_error',
      message: 'the model call failed',
      details: { model: 'openai:gpt-4.1-mini' },
    });
  });
});
