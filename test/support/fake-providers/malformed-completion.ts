import { expect } from 'vitest';
import { clientError } from '../../../lib/error-codes.ts';
import type { ModelRequest } from '../../../lib/models/model.ts';
import { resolveModel } from '../../../lib/models/resolve-model.ts';
import { jsonAnswer, scriptedFetch } from './scripted-fetch.ts';

/**
 * The client error of a call to `openai-compatible:m` whose provider answers a chat completion of
 * one `choice` (its index added) that the adapter cannot take: the call must fail. `settings` are
 * the call's (ModelRequest.settings).
 */
export async function malformedCompletionError(
  choice: Record<string, unknown>,
  settings?: ModelRequest['settings'],
): Promise<ReturnType<typeof clientError>> {
  const completion = {
    id: 'c',
    object: 'chat.completion',
    created: 1,
    model: 'm',
    choices: [{ index: 0, ...choice }],
    usage: { prompt_tokens: 10, completion_tokens: 2, total_tokens: 12 },
  };
  const model = resolveModel('openai-compatible:m', {
    OPENAI_COMPATIBLE_BASE_URL: 'http://provider.test/v1',
    fetch: scriptedFetch([jsonAnswer(200, completion)]).fetch,
  });
  const request: ModelRequest = {
    prompt: [{ type: 'message', role: 'user', content: 'hi' }],
    tools: [],
    ...(settings && { settings }),
  };
  const error = await model.generate(request).then(
    () => expect.fail('the call ended'),
    (failure: any) => failure,
  );
  return clientError(error);
}
