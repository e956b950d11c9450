import { afterEach, describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { dataUrl, pngBytes } from '../support/media-fixtures.ts';
import { fixture, startFakeProvider, type FakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { SIGNING_KEY, TOKEN } from './http-suite.ts';

let provider: FakeProvider | undefined;
afterEach(async () => {
  await provider?.close();
  provider = undefined;
});

describe('media_as_text of a tool output answered after other items (sent as user text)', () => {
  it('counts only what went as text: the image of a late output goes as an image', async () => {
    provider = await startFakeProvider(() => ({ text: fixture('openai-chat-text.json') }));
    const store = new MemoryStore();
    const app = createApp({
      store: () => store,
      readEnvironment: () => ({
        API_TOKEN: TOKEN,
        TOKEN_SIGNING_KEY: SIGNING_KEY,
        OPENAI_COMPATIBLE_BASE_URL: provider!.baseURL,
        OPENAI_COMPATIBLE_IMAGES: 'true',
        OPENAI_COMPATIBLE_API_KEY: 'sk-test',
        MODEL_MAX_RETRIES: '0',
      }),
      log: () => undefined,
    });
    const json = async (method: string, path: string, body?: unknown) => {
      const response = await app.request(path, {
        method,
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: response.status, body: (await response.json()) as any };
    };
    await json('POST', '/v1/sessions', { id: 'late' });
    const small = pngBytes(64, 48);
    const turn = await json('POST', '/v1/sessions/late/turns', {
      model: 'openai-compatible:test-model',
      input: [
        { type: 'message', role: 'user', content: 'take a screenshot' },
        { type: 'function_call', call_id: 'c1', name: 'screenshot', arguments: '{}' },
        { type: 'message', role: 'user', content: 'meanwhile: hello' },
        {
          type: 'function_call_output',
          call_id: 'c1',
          output: [{ type: 'input_image', image_url: dataUrl('image/png', small) }],
        },
      ],
    });
    expect(turn.status, JSON.stringify(turn.body)).toBe(200);
    // The late output went as a user message holding the image itself.
    const sent = JSON.stringify(provider.requests.at(-1)!.body.messages);
    expect(sent).toContain('Output of tool call c1:');
    expect(sent).toContain('data:image/png;base64,');
    const detail = await json('GET', '/v1/sessions/late/turns/1');
    expect(detail.body.receipt.media_as_text).toBeUndefined();
  });
});
