import { expect, inject, it } from 'vitest';
import { createTestS3Store } from '../support/s3-store.ts';
import { conditionalGatewayForFile } from '../support/s3-gateway-hooks.ts';
import { SessionLog } from '../support/session-log.ts';
import { contents, turnOf } from './rewind-simulation-suite.ts';

// A delete of the newest turn that flattens the history (lib/session/log/flatten.ts) on S3
// (fauxqs through the loopback gateway, test/support/s3-store.ts): its listings, conditional
// puts and copies as the memory and file stores' runs check them.
const gateway = conditionalGatewayForFile();

it('a session that went back past the generations a config names reads its history on s3', async () => {
  const store = createTestS3Store(gateway().endpoint, inject('s3Bucket'));
  const log = new SessionLog(store, { packMinRecords: 2, keepRecords: 1, segmentTargetBytes: 600 });
  const id = `flat-${crypto.randomUUID().slice(0, 8)}`;
  await log.create({ id });
  const kept: string[] = [];
  for (let n = 1; n <= 10; n++) {
    await turnOf(log, id, `kept ${n}`);
    kept.push(`kept ${n}`, `re kept ${n}`);
    await turnOf(log, id, `gone ${n}`);
    await log.deleteTurn(id, n + 1);
  }
  expect(await contents(log, id)).toEqual(kept);
  await turnOf(log, id, 'next');
  expect(await contents(log, id)).toEqual([...kept, 'next', 're next']);
  await log.delete(id);
});
