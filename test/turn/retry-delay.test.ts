import { describe, expect, it } from 'vitest';
import { retryDelaySeconds } from '../../lib/turn/index.ts';

// A queue's delaySeconds is a whole number of seconds up to 12 hours (Cloudflare Queues).

describe('the delay before a background turn left open is delivered again', () => {
  it('stays within what a queue accepts, however long the lease', () => {
    const day = 24 * 3600 * 1000;
    expect(retryDelaySeconds(16, 30 * day)).toBe(43_200);
    expect(retryDelaySeconds(100, 30 * day)).toBe(43_200);
    expect(retryDelaySeconds(3, 30 * day)).toBe(8);
    expect(Number.isInteger(retryDelaySeconds(5, 9999))).toBe(true);
  });
});
