import type { WorkersAiBinding } from '../../../lib/models/workers-ai-model.ts';

export interface RecordedRun {
  model: string;
  inputs: any;
  options: any;
}

/**
 * A stand-in for the Workers AI binding (`env.AI`) with the real binding's answer shapes: a
 * plain object (`{response, tool_calls, usage}`) without `stream`, and a ReadableStream of SSE
 * bytes (`data: {...}` lines, then `data: [DONE]`) with `inputs.stream: true`.
 */
export function fakeAiBinding(
  answer: (run: RecordedRun) => unknown | Promise<unknown>,
): WorkersAiBinding & { runs: RecordedRun[] } {
  const runs: RecordedRun[] = [];
  return {
    runs,
    async run(model: string, inputs: unknown, options?: unknown) {
      const run = { model, inputs, options };
      runs.push(run);
      return answer(run);
    },
  };
}

/** An SSE body as the binding streams it: one chunk per event. */
export function sseStream(text: string): ReadableStream<Uint8Array> {
  const events = text.split(/(?<=\n\n)/).filter((event) => event.trim() !== '');
  const encoder = new TextEncoder();
  return new ReadableStream({
    pull(controller) {
      const event = events.shift();
      if (event === undefined) controller.close();
      else controller.enqueue(encoder.encode(event));
    },
  });
}
