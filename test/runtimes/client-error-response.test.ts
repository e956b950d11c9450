import { describe, expect, it } from 'vitest';
import { clientErrorResponse } from '../../functions/client-error.ts';

// What the Node and Deno servers write for a request their parser refused never reaches the
// app, yet it names a request as every other answer does (docs/API.md, Headers: x-request-id).
const REQUEST_ID = /\r\nx-request-id: req_[0-9a-f]{24}\r\n/;

function refusal(code: string): Error & { code: string } {
  return Object.assign(new Error(`Parse Error: ${code}`), { code });
}

describe('the answer to a request the parser refused', () => {
  it('carries a fresh x-request-id, a timeout included', () => {
    const answers = [
      'HPE_INVALID_METHOD',
      'HPE_HEADER_OVERFLOW',
      'HPE_CHUNK_EXTENSIONS_OVERFLOW',
      'ERR_HTTP_REQUEST_TIMEOUT',
    ].map((code) => clientErrorResponse(refusal(code)));
    for (const answer of answers) expect(answer.split('\r\n\r\n')[0] + '\r\n').toMatch(REQUEST_ID);
    const ids = answers.map((answer) => /x-request-id: (\S+)/.exec(answer)?.[1]);
    expect(new Set(ids).size).toBe(answers.length);
  });
});
