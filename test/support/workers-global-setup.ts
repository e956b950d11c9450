import type { TestProject } from 'vitest/node';
import { startFakeProvider } from './fake-providers/fake-provider-server.ts';
import { startOtlpReceiver } from './otlp-receiver.ts';
import { startWebhookReceiver } from './webhook-receiver.ts';

/**
 * The workers project's global setup: an OpenAI-compatible provider on loopback that answers
 * every request with a 500, for the HTTP suite's failing-model test inside workerd. (Pointing
 * workerd at a closed port fails the same way, but workerd prints the refused connection with
 * a native stack that no test can silence; test/http/http.test.ts keeps that case in Node.)
 * Another that never answers, for a turn held running while another request closes it
 * (test/workers/local-close.test.ts).
 * And an OTLP receiver on loopback that the tracing suite's workers export spans to
 * (test/workers/tracing.test.ts), read back through its `GET /spans`.
 */
export default async function setup(project: TestProject) {
  const provider = await startFakeProvider(() => ({
    status: 500,
    json: { error: { message: 'upstream exploded', type: 'server_error' } },
  }));
  project.provide('failingModelBaseUrl', provider.baseURL);
  const hanging = await startFakeProvider(() => ({ hang: true }));
  project.provide('hangingModelBaseUrl', hanging.baseURL);
  const otlp = await startOtlpReceiver();
  project.provide('otlpEndpoint', otlp.endpoint);
  const webhooks = await startWebhookReceiver();
  project.provide('webhookReceiverUrl', webhooks.url);
  return async () => {
    await provider.close();
    await hanging.close();
    await otlp.close();
    await webhooks.close();
  };
}

declare module 'vitest' {
  export interface ProvidedContext {
    failingModelBaseUrl: string;
    hangingModelBaseUrl: string;
    otlpEndpoint: string;
    webhookReceiverUrl: string;
  }
}
