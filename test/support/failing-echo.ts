import { echoModel } from '../../lib/models/echo.ts';
import { ModelError, ModelTimeoutError } from '../../lib/models/errors.ts';
import type { Model, ModelRequest, ModelStreamEvent } from '../../lib/models/model.ts';

/**
 * The echo model, but a last message that says `times out` times out (after a first delta,
 * streamed) and one that says `breaks` fails (streamed: after a first delta); with
 * `summaries.timeOut`, a summary's call times out too (its prompt opens with its instructions,
 * a system message). One per test file: `summaries` is that file's to set.
 */
export function failingEcho(): { model: Model; summaries: { timeOut: boolean } } {
  const summaries = { timeOut: false };
  const model: Model = {
    ...echoModel,
    async generate(request) {
      if (summaries.timeOut && (request.prompt[0] as { role?: string }).role === 'system')
        throw new ModelTimeoutError('the summary model did not answer in time');
      const said = lastText(request);
      if (said.includes('times out')) throw new ModelTimeoutError('the model did not answer in time');
      if (said.includes('breaks')) throw new ModelError('the model call failed', { model: 'echo', status: 500 });
      return echoModel.generate(request);
    },
    async *stream(request): AsyncIterable<ModelStreamEvent> {
      const said = lastText(request);
      if (said.includes('times out') || said.includes('breaks')) {
        yield { type: 'text_delta', delta: 'partial ' };
        throw said.includes('breaks')
          ? new ModelError('the model stream broke off', { model: 'echo' })
          : new ModelTimeoutError('the model did not answer in time');
      }
      yield* echoModel.stream(request);
    },
  };
  return { model, summaries };
}

function lastText(request: ModelRequest): string {
  return JSON.stringify(request.prompt.at(-1));
}
