import { expect } from 'vitest';

/**
 * Reads a streamed answer as it comes: `until` reads on until its text holds `marker` (the
 * stream must not end before), `rest` to its end; each answers all the text read so far.
 */
export function sseReader(response: Response): { until(marker: string): Promise<string>; rest(): Promise<string> } {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  return {
    async until(marker) {
      while (!text.includes(marker)) {
        const chunk = await reader.read();
        expect(chunk.done).toBe(false);
        text += decoder.decode(chunk.value, { stream: true });
      }
      return text;
    },
    async rest() {
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read())
        text += decoder.decode(chunk.value, { stream: true });
      return text;
    },
  };
}
