import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test';
import { describe, expect, inject, it } from 'vitest';
import worker from '../../functions/worker.ts';
import { TOKEN } from '../http/http-suite.ts';
import { bindings, workerHarness } from './worker-harness.ts';

// A response whose provider answers 500 (test/support/workers-global-setup.ts): the client of the
// OpenAI facade is told which model failed and the provider's status, as a native turn's client
// is (docs/API.md, `model_error`), whether it waited for the JSON, read the stream or retrieves
// the failed response later.
const harness = workerHarness();
const failing = {
  OPENAI_COMPATIBLE_BASE_URL: inject('failingModelBaseUrl'),
  MODEL_MAX_RETRIES: '0',
  MODEL_ALIASES: 'down=openai-compatible:nobody',
};
const details = { model: 'openai-compatible:nobody', status: 500 };

function post(path: string, body: unknown): Promise<Response> {
  return harness.fetchWithEnv(failing, path, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

describe('workerd: a failed model call through the OpenAI facade', () => {
  it("names the model and the provider's status in a 502 response", async () => {
    const response = await post('/v1/responses', { model: 'down', input: 'are you there?' });
    expect(response.status).toBe(502);
    expect(((await response.json()) as any).error).toEqual({
      message: 'the model call failed',
      type: 'server_error',
      param: null,
      code: 'model_error',
      details,
    });
  });

  it('names them in a streamed response.failed and in the failed response retrieved', async () => {
    const response = await post('/v1/responses', { model: 'down', input: 'are you there?', stream: true });
    const data = (await response.text()).split('\n').filter((line) => line.startsWith('data: '));
    expect(data.at(-1)).toBe('data: [DONE]');
    const events = data.slice(0, -1).map((line) => JSON.parse(line.slice(6)));
    const failed = events.at(-1);
    expect(failed).toMatchObject({ type: 'response.failed', response: { status: 'failed' } });
    expect(failed.response.error).toEqual({ code: 'model_error', message: 'the model call failed', details });
    const retrieved = await harness.fetch(`/v1/responses/${failed.response.id}`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(((await retrieved.json()) as any).error).toEqual({
      code: 'model_error',
      message: 'the model call failed',
      details,
    });
  });
});

describe('workerd: a conversation its failed first response started', () => {
  it('is deleted with nothing logged as failed after the response (its first view is not written)', async () => {
    const errors: string[] = [];
    const error = console.error;
    console.error = (message?: unknown) => errors.push(String(message));
    let requestId: string | null = null;
    try {
      const context = createExecutionContext();
      const response = await worker.fetch(
        new Request('https://tailgate.test/v1/responses', {
          method: 'POST',
          headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'down', input: 'are you there?' }),
        }) as never,
        { ...bindings, ...failing } as never,
        context,
      );
      expect(response.status).toBe(502);
      requestId = response.headers.get('x-request-id');
      await waitOnExecutionContext(context);
    } finally {
      console.error = error;
    }
    // The model call's failure is logged, naming its request, and nothing else.
    expect(errors).toEqual([`tailgate: model_error (${requestId})`]);
  });
});

describe('workerd: /openapi.json', () => {
  it('lists the details an OpenAI-shaped error carries', async () => {
    const response = await harness.fetch('/openapi.json', { headers: { authorization: `Bearer ${TOKEN}` } });
    const document = (await response.json()) as any;
    expect(Object.keys(document.components.schemas.OpenAIError.properties.error.properties)).toContain('details');
  });
});
