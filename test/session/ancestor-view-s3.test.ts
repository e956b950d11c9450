import { expect, inject, it } from 'vitest';
import { adoptedView } from '../../lib/session/log/ancestor-view.ts';
import { logContext } from '../../lib/session/log/context.ts';
import { readConfig, scopeOf } from '../../lib/session/log/head.ts';
import { viewPolicy } from '../../lib/turn/view-policy.ts';
import { CountingStore } from '../support/counting-store.ts';
import { conditionalGatewayForFile } from '../support/s3-gateway-hooks.ts';
import { createTestS3Store } from '../support/s3-store.ts';
import { SessionLog } from '../support/session-log.ts';

// The ancestor's view a fork's first view starts from (lib/session/log/ancestor-view.ts), listed
// on S3 from the fork point down (a listing after a key, then its continuation): fauxqs through
// the loopback gateway (test/support/s3-store.ts).
const gateway = conditionalGatewayForFile();

it("a fork's first view finds its parent's view below the fork point on s3, in a page listed from there", async () => {
  const store = createTestS3Store(gateway().endpoint, inject('s3Bucket'));
  const log = new SessionLog(store, { packMinRecords: 2, keepRecords: 1 });
  const id = `anc-${crypto.randomUUID().slice(0, 8)}`;
  const fork = `${id}-f`;
  await log.create({ id });
  let at = 0;
  for (let n = 1; n <= 150; n++) {
    const call = { type: 'function_call', call_id: `c${n}`, name: 'read', arguments: `{"n":${n % 7}}` } as const;
    await log.append(id, [call, { type: 'function_call_output', call_id: `c${n}`, output: `o${n}` }]);
    if (n % 16 === 0 && n <= 40) await log.pack(id, { refresh: true });
    if (n === 40) at = (await log.get(id)).counts.items;
  }
  await log.fork(id, { at_seq: at, fields: { id: fork } });
  const scope = scopeOf('', (await readConfig(logContext(store, { viewPolicy }), fork)).config);
  const counting = new CountingStore(store);
  const view = await adoptedView(logContext(counting, { viewPolicy }), scope, scope.ancestors![0]!);
  expect(view?.record).toBe(32);
  expect(counting.counts.list).toBe(1);
  await log.delete(fork);
  await log.delete(id);
});
