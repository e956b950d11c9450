import { describe, expect, it } from 'vitest';
import { pollDelay, pollFailure } from '../../functions/ui/client/poll.ts';
import { ApiError } from '../../functions/ui/client/view.ts';

/** The live updates' schedule and failure text (functions/ui/client/poll.ts); the polling is tested in Chromium. */
describe("the inspector's polling schedule", () => {
  it('polls every 5 s while shown, every 60 s while hidden, backing off after failures up to 60 s', () => {
    expect([0, 1, 2, 3, 4, 9].map((failures) => pollDelay(false, failures))).toEqual([
      5_000, 10_000, 20_000, 40_000, 60_000, 60_000,
    ]);
    expect([0, 1, 4].map((failures) => pollDelay(true, failures))).toEqual([60_000, 60_000, 60_000]);
  });

  it('says why updates paused and when they are tried again', () => {
    expect(pollFailure(new TypeError('Failed to fetch'), 10_000)).toBe(
      'Live updates paused: the API could not be reached. Trying again in 10 s.',
    );
    expect(pollFailure(new ApiError('storage failed', 503), 20_000)).toBe(
      'Live updates paused: the API answered 503 (storage failed). Trying again in 20 s.',
    );
  });
});
