import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { TailgateError, TurnInProgressError } from '../../lib/errors.ts';
import { ModelConfigurationError } from '../../lib/models/errors.ts';
import { resolveModel } from '../../lib/models/resolve-model.ts';
import { resolveStrategyNames } from '../../lib/turn/plan.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const api = readFileSync(join(root, 'docs/API.md'), 'utf8');

/** The keys the row of docs/API.md's error table for `code` names in its `details: {...}`. */
function documentedDetails(code: string): string[] {
  const row = api.split('\n').find((line) => line.startsWith(`| \`${code}\` |`));
  if (!row) throw new Error(`docs/API.md has no error row for ${code}`);
  return [...row.matchAll(/`details: \{([^}]*)\}`/g)].flatMap((m) => m[1]!.split(',').map((key) => key.trim()));
}

describe("docs/API.md's error table", () => {
  it('names every detail a turn_in_progress answer carries about the turn holding the session', () => {
    // A client that finds a dead turn's lease still running learns from these when to send again.
    const { details } = new TurnInProgressError('s', 3, '2030-01-01T00:00:00.000Z');
    expect(documentedDetails('turn_in_progress')).toEqual(expect.arrayContaining(Object.keys(details ?? {})));
  });

  it("names every detail an unknown strategy's answer carries, the request's field among them", () => {
    let refused: unknown;
    try {
      resolveStrategyNames(['inbox', 'nosuch'], {}, 'strategies');
    } catch (error) {
      refused = error;
    }
    expect(refused).toBeInstanceOf(TailgateError);
    const details = (refused as TailgateError).details as object;
    expect(details).toMatchObject({ field: 'strategies.1', strategy: 'nosuch' });
    expect(documentedDetails('unknown_strategy')).toEqual(expect.arrayContaining(Object.keys(details)));
  });

  it("names every detail the not_configured of a model without its setting carries, and its message's field", () => {
    let refused: unknown;
    try {
      resolveModel('anthropic:claude-sonnet-4-5', {});
    } catch (error) {
      refused = error;
    }
    expect(refused).toBeInstanceOf(ModelConfigurationError);
    const { details, message } = refused as ModelConfigurationError;
    expect(documentedDetails('not_configured')).toEqual(expect.arrayContaining(Object.keys(details as object)));
    expect(message.startsWith('model: ')).toBe(true);
    const row = api.split('\n').find((line) => line.startsWith('| `not_configured` |'));
    expect(row).toContain('`model: ');
  });
});
