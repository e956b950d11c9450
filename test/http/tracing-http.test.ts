import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { startOtlpReceiver, type OtlpReceiver } from '../support/otlp-receiver.ts';
import { freshId, SIGNING_KEY, TOKEN } from './http-suite.ts';
import { defineTracingSuite } from './tracing-suite.ts';

// OpenTelemetry traces in Node, through `app.request` with an in-memory store, exported to a
// loopback OTLP receiver (the same suite runs inside workerd: test/workers/tracing.test.ts).
const receiver: OtlpReceiver = await startOtlpReceiver();
afterAll(() => receiver.close());

const harness = appHarness(
  new MemoryStore(),
  { API_TOKEN: TOKEN, TOKEN_SIGNING_KEY: SIGNING_KEY, ALLOW_ANONYMOUS: 'false' },
  { logLine: () => undefined },
);
const { logged } = harness;

// Nothing listens on the discard port: the model cannot be reached at all.
defineTracingSuite('node', harness, receiver.endpoint, 'http://127.0.0.1:9/v1');

describe('node: a collector that cannot be reached', () => {
  let closed: string;
  beforeAll(async () => {
    const gone = await startOtlpReceiver();
    closed = gone.endpoint;
    await gone.close();
  });

  it('costs the turn nothing: it answers, and the failed export is logged', async () => {
    const environment = { OTEL_EXPORTER_OTLP_ENDPOINT: closed };
    const id = freshId('trace-down');
    const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    const post = (path: string, body: unknown) =>
      harness.fetchWithEnv(environment, path, { method: 'POST', headers, body: JSON.stringify(body) });
    expect((await post('/v1/sessions', { id })).status).toBe(201);
    const turn = await post(`/v1/sessions/${id}/turns`, { input: 'is anyone collecting?' });
    expect(turn.status).toBe(200);
    expect(await turn.json()).toMatchObject({ turn: 1, output: [{ content: 'echo: is anyone collecting?' }] });
    await expect
      .poll(() => logged.some((line) => line.startsWith('tailgate: background task failed (req_')), {
        timeout: 20_000,
        interval: 100,
      })
      .toBe(true);
  });
});
