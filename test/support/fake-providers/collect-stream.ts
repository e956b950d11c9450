import type { ModelStreamEvent } from '../../../lib/models/model.ts';

/** Reads a model stream to its end. */
export async function collectStream(stream: AsyncIterable<ModelStreamEvent>): Promise<ModelStreamEvent[]> {
  const events: ModelStreamEvent[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

/** The concatenated text deltas of a stream. */
export function streamedText(events: ModelStreamEvent[]): string {
  return events.map((event) => (event.type === 'text_delta' ? event.delta : '')).join('');
}
