import { afterAll, beforeAll, inject } from 'vitest';
import { startConditionalGateway, type ConditionalGateway } from './s3-store.ts';

/**
 * The conditional gateway over the suite's S3 server (test/support/s3-store.ts), started before
 * the calling file's tests and closed after them: the gateway, once started.
 */
export function conditionalGatewayForFile(): () => ConditionalGateway {
  let gateway: ConditionalGateway | undefined;
  beforeAll(async () => {
    gateway = await startConditionalGateway(inject('s3Endpoint'));
  });
  afterAll(async () => {
    await gateway?.close();
  });
  return () => {
    if (!gateway) throw new Error('the S3 gateway is started before the tests');
    return gateway;
  };
}
