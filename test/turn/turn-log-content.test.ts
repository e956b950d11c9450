import { describe, expect, it } from 'vitest';
import { noStorageOps, turnLogLine } from '../../functions/turn-log.ts';
import type { TurnObservation } from '../../lib/turn/index.ts';

/** The LOG_CONTENT part of a turn's log line (functions/turn-log.ts) for an input of `content`. */
function loggedContent(content: unknown[]): any[] {
  const outcome = {
    session_id: 's',
    turn: 1,
    status: 'completed',
    error_code: null,
    model: null,
    usage: null,
    compaction: null,
    duration_ms: 1,
    first_output_ms: null,
    request: { input: [{ type: 'message', role: 'user', content }] },
    output: [],
  } as unknown as TurnObservation;
  return JSON.parse(turnLogLine(outcome, noStorageOps(), true, null)).input[0].content;
}

describe('the turn log line under LOG_CONTENT', () => {
  it('counts the bytes of base64 written across lines, not its line breaks', () => {
    const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
    const wrapped = png.match(/.{1,16}/g)!.join('\r\n');
    const [image] = loggedContent([{ type: 'input_image', image_url: `data:image/png;base64,${wrapped}` }]);
    expect(image.image_url).toBe(`[data:image/png, ${atob(png).length} bytes]`);
  });

  it('sizes base64 of many padding characters in one pass over it', () => {
    // A run of "=" not at the end: a search for trailing padding from each of them is quadratic.
    const data = `${'='.repeat(100_000)}QQ==`;
    const [text] = loggedContent([{ type: 'input_text', text: `data:text/plain;base64,${data}` }]);
    expect(text.text).toBe('[data:text/plain, 1 bytes]');
  });

  it('counts the decoded bytes of percent-encoded data, not its encoded length', () => {
    const png = '%89PNG%0D%0A%1a%0A';
    const [image, text, raw, stray] = loggedContent([
      { type: 'input_image', image_url: `data:image/png,${png}` },
      { type: 'input_text', text: 'data:text/plain;charset=utf-8,h%C3%A9llo%20w' },
      { type: 'input_text', text: 'data:,h\u00e9llo \u{1F600}' },
      { type: 'input_text', text: 'data:text/plain,100%25 %zz %4' },
    ]);
    expect(image.image_url).toBe('[data:image/png, 8 bytes]');
    expect(text.text).toBe('[data:text/plain, 8 bytes]');
    // Not percent-encoded, a character is its UTF-8 bytes.
    expect(raw.text).toBe(`[data:text/plain, ${new TextEncoder().encode('h\u00e9llo \u{1F600}').length} bytes]`);
    // A "%" not followed by two hex digits is itself.
    expect(stray.text).toBe(`[data:text/plain, ${'100% %zz %4'.length} bytes]`);
  });
});
