import { createExecutionContext, env, waitOnExecutionContext } from 'cloudflare:test';
import { inject } from 'vitest';
import worker from '../../functions/worker.ts';
import { R2Store } from '../../lib/store/r2.ts';
import type { HttpHarness } from '../http/http-suite.ts';
import { defineTracingSuite } from '../http/tracing-suite.ts';

// OpenTelemetry traces inside workerd, through the real worker: the spans are exported with
// the exporter's fetch transport, through waitUntil, to the loopback OTLP receiver the
// workers project's global setup starts (test/support/workers-global-setup.ts).
const bindings = env as unknown as Record<string, unknown> & { BUCKET: R2Bucket };
const origin = 'https://tailgate.test';
const logged: string[] = [];

const harness: HttpHarness = {
  fetch: (path, init) => harness.fetchWithEnv({}, path, init),
  fetchWithEnv: async (overrides, path, init) => {
    const context = createExecutionContext();
    // The turn's log line and a failing model's error go to `logged` instead of the output.
    const { log, error } = console;
    console.log = console.error = (message?: unknown) => logged.push(String(message));
    let response: Response;
    try {
      response = await worker.fetch(
        new Request(`${origin}${path}`, init) as never,
        { ...bindings, ...overrides } as never,
        context,
      );
    } finally {
      Object.assign(console, { log, error });
    }
    // A streamed turn finishes under waitUntil: the body is read by the test, so it is not awaited here.
    if (!response.headers.get('content-type')?.includes('text/event-stream')) await waitOnExecutionContext(context);
    return response;
  },
  store: new R2Store(bindings.BUCKET),
  keyPrefix: '',
  logged,
};

defineTracingSuite('workerd', harness, inject('otlpEndpoint'), inject('failingModelBaseUrl'));
