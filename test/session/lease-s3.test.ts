import { expect, inject, it } from 'vitest';
import { createTestS3Store } from '../support/s3-store.ts';
import { conditionalGatewayForFile } from '../support/s3-gateway-hooks.ts';
import { SessionLog } from '../support/session-log.ts';

const gateway = conditionalGatewayForFile();

it('a lease given up is taken over on S3 by one of two runners taking it as it was given up', async () => {
  // The clock stands still: each takeover would write the lease as the release wrote it.
  const at = new Date();
  const store = createTestS3Store(gateway().endpoint, inject('s3Bucket'));
  const sessions = new SessionLog(store, { keyPrefix: `lease-${crypto.randomUUID()}/`, clock: () => at });
  await sessions.create({ id: 's' });
  const attempt = await sessions
    .claimTurn('s', { input: [{ type: 'message', role: 'user', content: 'hello' }], writer: 'runner' })
    .next();
  if (attempt.kind !== 'claimed') throw new Error('expected a claimed turn');
  const { etag } = await sessions.takeLease(attempt.turn);
  expect(await sessions.releaseHeldLease(attempt.turn, etag)).toBe(true);
  const taken = await Promise.allSettled([sessions.takeLease(attempt.turn), sessions.takeLease(attempt.turn)]);
  expect(taken.map((outcome) => outcome.status).sort()).toEqual(['fulfilled', 'rejected']);
});
