import { APICallError, wrapLanguageModel, type LanguageModelMiddleware } from 'ai';

type CallOptions = Parameters<NonNullable<LanguageModelMiddleware['transformParams']>>[0]['params'];
type WrappedModel = Parameters<typeof wrapLanguageModel>[0]['model'];

/**
 * Anthropic's refusal of a thinking block whose signature (or a redacted block whose data) it
 * did not issue: a client's forged or corrupted reasoning sent back (`encrypted_content`), e.g.
 * "messages.1.content.0: Invalid `signature` in `thinking` block" (400 invalid_request_error).
 */
const INVALID_THINKING = /invalid\W{0,2}(signature|data)\W{0,2} in\W{0,2}(redacted_)?thinking\W{0,2} block/i;

export function refusesThinkingBlock(error: unknown): boolean {
  if (!APICallError.isInstance(error) || error.statusCode !== 400) return false;
  return INVALID_THINKING.test(error.message) || INVALID_THINKING.test(error.responseBody ?? '');
}

/**
 * The call without its thinking: no reasoning part in any assistant message (one left empty is
 * left out), and no `reasoning` setting (Anthropic refuses thinking in a tool loop whose blocks
 * are missing).
 */
export function withoutThinking(params: CallOptions): CallOptions {
  const { reasoning: _reasoning, ...rest } = params;
  const prompt: CallOptions['prompt'] = [];
  for (const message of params.prompt) {
    if (message.role !== 'assistant') prompt.push(message);
    else {
      const content = message.content.filter((part) => part.type !== 'reasoning' && part.type !== 'reasoning-file');
      if (content.length > 0) prompt.push({ ...message, content });
    }
  }
  return { ...rest, prompt };
}

/**
 * Anthropic's model, sending a call it refused for a thinking block's signature once more
 * without thinking (`withoutThinking`), streamed or not: the thinking blocks a client sent back
 * (its reasoning items' `encrypted_content`) would otherwise fail every call of their tool loop
 * until the next user message. Any other failure, and a second refusal, are the call's.
 */
export function retryingWithoutThinking(model: WrappedModel) {
  return wrapLanguageModel({
    model,
    middleware: {
      wrapGenerate: ({ doGenerate, params, model: inner }) =>
        orAgain(doGenerate, () => inner.doGenerate(withoutThinking(params))),
      wrapStream: ({ doStream, params, model: inner }) =>
        orAgain(doStream, () => inner.doStream(withoutThinking(params))),
    },
  });
}

/** `call`, or `again` when the provider refused it for a thinking block. */
async function orAgain<T>(call: () => PromiseLike<T>, again: () => PromiseLike<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (!refusesThinkingBlock(error)) throw error;
    return again();
  }
}
