import { describe, expect, it, vi } from 'vitest';
import type { ReceivedSpan } from '../support/otlp-receiver.ts';
import { freshId, parseSse, TOKEN, type HttpHarness } from './http-suite.ts';

/**
 * OpenTelemetry traces of turns (docs/CONFIGURATION.md, "Costs, limits and tracing"), through
 * the real app with OTEL_EXPORTER_OTLP_ENDPOINT pointing at a loopback OTLP receiver
 * (test/support/otlp-receiver.ts) that decodes the exported spans: in Node
 * (test/http/tracing-http.test.ts) and inside workerd (test/workers/tracing.test.ts).
 * `endpoint` is the receiver's; `failingModelBaseUrl` an OpenAI-compatible base URL where
 * every call fails.
 */
export function defineTracingSuite(
  label: string,
  harness: HttpHarness,
  endpoint: string,
  failingModelBaseUrl: string,
): void {
  const traced = { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint };

  async function post(environment: Record<string, string>, path: string, body: unknown): Promise<Response> {
    return harness.fetchWithEnv(environment, path, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  }

  async function session(environment: Record<string, string>): Promise<string> {
    const id = freshId('trace');
    expect((await post(environment, '/v1/sessions', { id })).status).toBe(201);
    return id;
  }

  async function received(): Promise<ReceivedSpan[]> {
    return (await (await fetch(`${endpoint}/spans`)).json()) as ReceivedSpan[];
  }

  /** The turn spans of a session and every span of their traces, once `turns` turns arrived. */
  async function traceOf(sessionId: string, turns: number): Promise<{ roots: ReceivedSpan[]; all: ReceivedSpan[] }> {
    return vi.waitFor(
      async () => {
        const spans = await received();
        const roots = spans.filter((span) => span.attributes['gen_ai.conversation.id'] === sessionId);
        expect(roots).toHaveLength(turns);
        const traces = new Set(roots.map((root) => root.traceId));
        return { roots, all: spans.filter((span) => traces.has(span.traceId)) };
      },
      { timeout: 15_000, interval: 50 },
    );
  }

  const STEPS = [
    'tailgate.claim',
    'tailgate.read_context',
    'tailgate.strategies',
    'tailgate.model_call',
    'tailgate.complete',
  ];

  describe(`${label}: OpenTelemetry traces`, () => {
    it('a turn is a GenAI chat span, its storage rounds, strategies and model call its children', async () => {
      const environment = { ...traced, OTEL_EXPORTER_OTLP_HEADERS: 'x-collector-key=k%201,x-team=ai' };
      const id = await session(environment);
      const response = await post(environment, `/v1/sessions/${id}/turns`, { input: 'trace me' });
      expect(response.status).toBe(200);
      const usage = ((await response.json()) as { usage: Record<string, number> }).usage;
      const { roots, all } = await traceOf(id, 1);
      const root = roots[0]!;
      expect(root.parentSpanId).toBeUndefined();
      expect(root.name).toBe('chat echo');
      expect(root.statusCode).not.toBe(2);
      expect(root.attributes).toMatchObject({
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': 'echo',
        'gen_ai.request.model': 'echo',
        'gen_ai.response.model': 'echo',
        'gen_ai.conversation.id': id,
        'gen_ai.usage.input_tokens': usage.input_tokens,
        'gen_ai.usage.output_tokens': usage.output_tokens,
        'gen_ai.usage.cache_read.input_tokens': 0,
        'gen_ai.usage.cache_creation.input_tokens': 0,
        'gen_ai.usage.reasoning.output_tokens': 0,
        'tailgate.turn': 1,
        'tailgate.turn.status': 'completed',
        'tailgate.cost_usd': 0,
      });
      expect(usage.output_tokens).toBeGreaterThan(0);
      expect(root.resource['service.name']).toBe('tailgate');
      expect(root.headers['x-collector-key']).toBe('k 1');
      expect(root.headers['x-team']).toBe('ai');
      const children = all.filter((span) => span !== root && span.spanId !== root.spanId);
      expect(children.map((span) => span.name).sort()).toEqual([...STEPS].sort());
      for (const child of children) expect(child.parentSpanId).toBe(root.spanId);
      // The model call is a client span (3); the others internal (1).
      expect(children.find((span) => span.name === 'tailgate.model_call')!.kind).toBe(3);
    });

    it('a streamed turn is traced once its stream ended, under OTEL_SERVICE_NAME', async () => {
      const environment = { ...traced, OTEL_SERVICE_NAME: 'tailgate-streams' };
      const id = await session(environment);
      const response = await post(environment, `/v1/sessions/${id}/turns`, { input: 'stream me', stream: true });
      expect(response.status).toBe(200);
      const events = parseSse(await response.text());
      expect(events.at(-1)!.event).toBe('turn.completed');
      const { roots } = await traceOf(id, 1);
      expect(roots[0]!.resource['service.name']).toBe('tailgate-streams');
      expect(roots[0]!.attributes['tailgate.turn.status']).toBe('completed');
    });

    it('a turn whose model fails is an error span with error.type, as is its model call', async () => {
      const environment = {
        ...traced,
        OPENAI_COMPATIBLE_BASE_URL: failingModelBaseUrl,
        MODEL_MAX_RETRIES: '0',
      };
      const id = await session(environment);
      const response = await post(environment, `/v1/sessions/${id}/turns`, {
        input: 'fail',
        model: 'openai-compatible:nobody',
      });
      expect(response.status).toBe(502);
      const { roots, all } = await traceOf(id, 1);
      const root = roots[0]!;
      expect(root.name).toBe('chat nobody');
      expect(root.statusCode).toBe(2);
      expect(root.attributes).toMatchObject({
        'gen_ai.provider.name': 'openai-compatible',
        'gen_ai.request.model': 'nobody',
        'error.type': 'model_error',
        'tailgate.turn.status': 'failed',
      });
      expect(root.attributes['gen_ai.usage.input_tokens']).toBeUndefined();
      const call = all.find((span) => span.name === 'tailgate.model_call')!;
      expect(call.parentSpanId).toBe(root.spanId);
      expect(call.statusCode).toBe(2);
    });

    it('without OTEL_EXPORTER_OTLP_ENDPOINT no span leaves', async () => {
      const quiet = await session({});
      expect((await post({}, `/v1/sessions/${quiet}/turns`, { input: 'untraced' })).status).toBe(200);
      // A traced turn afterwards: once its span arrived, the untraced one would have too.
      const loud = await session(traced);
      expect((await post(traced, `/v1/sessions/${loud}/turns`, { input: 'traced' })).status).toBe(200);
      await traceOf(loud, 1);
      const spans = await received();
      expect(spans.filter((span) => span.attributes['gen_ai.conversation.id'] === quiet)).toEqual([]);
    });

    it('a bad OTEL setting is 503 not_configured naming each one', async () => {
      const response = await post(
        { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318', OTEL_EXPORTER_OTLP_HEADERS: 'no-value' },
        '/v1/sessions',
        { id: freshId('trace') },
      );
      expect(response.status).toBe(503);
      const error = ((await response.json()) as { error: { code: string; details: { variables: string[] } } }).error;
      expect(error.code).toBe('not_configured');
      expect(error.details.variables).toEqual(['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_HEADERS']);
    });
  });
}
