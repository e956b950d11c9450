import { describe, expect, it } from 'vitest';
import { InvalidRequestError, ReplayedError } from '../../lib/errors.ts';
import { clientError } from '../../lib/error-codes.ts';
import { bracketedField, bracketSegments, pathDetails } from '../../lib/field-path.ts';
import { namedInRequest } from '../../lib/openai/request.ts';

// A turn stores its failure as clientError answers it (lib/turn/receipt.ts errorRecord), and a
// replay answers that stored copy again (ReplayedError): a field whose path holds a key of digits
// (`metadata.0`, not a position) is named in the copy as in the first answer.
describe('a replayed refusal names its field as the first answer did', () => {
  const refusal = (path: (string | number)[], reason: string) => {
    const field = path.join('.');
    return new InvalidRequestError(`${field}: ${reason}`, pathDetails({ field }, bracketSegments(path)));
  };

  for (const path of [
    ['body', 'metadata', '0', 0],
    ['strategy_config', '0'],
    ['input', 3, 'content', 1],
    ['tools', 0, 'name'],
  ]) {
    it(`${path.join('.')}`, () => {
      const first = clientError(refusal(path, 'refused'));
      const stored = JSON.parse(JSON.stringify(first));
      const replayed = new ReplayedError(stored);
      expect(clientError(replayed)).toEqual(first);
      expect(bracketedField(replayed.details)).toBe(bracketSegments(path));
    });
  }

  it('a message that does not start with its field is answered as it is', () => {
    const stored = { code: 'invalid_request', message: 'unknown model "x"', details: { field: 'tools.0' } };
    expect(clientError(new ReplayedError(stored))).toEqual(stored);
    expect(bracketedField(new ReplayedError(stored).details)).toBe('tools[0]');
  });
});

// A refusal of a turn's input named again by the entry's position in the request
// (lib/openai/request.ts namedInRequest) keeps which segments of its path are keys.
describe('a refusal named again by its position in the request', () => {
  it('keeps a key of digits a key', () => {
    const field = 'input.1.content.0';
    const error = new InvalidRequestError(`${field}: refused`, pathDetails({ field }, 'input[1].content.0'));
    const named = namedInRequest(error, [0, 4]) as InvalidRequestError;
    expect(named.details).toEqual({ field: 'input.4.content.0' });
    expect(bracketedField(named.details)).toBe('input[4].content.0');
    expect(clientError(named).message).toBe('input[4].content.0: refused');
  });
});
