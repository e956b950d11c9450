import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { wholeImages } from '../../lib/strategies/shorten-images.ts';
import { resolveStrategyConfig } from '../../lib/strategies/strategy-config.ts';
import { fixture, startFakeProvider, type FakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { appHarness } from '../support/app-harness.ts';
import { photosMessage } from '../support/media-fixtures.ts';
import { createClient, freshId, SIGNING_KEY, TOKEN } from './http-suite.ts';

// A failed turn of many photos, then the preview (no input) and the empty input that takes it again.
let provider: FakeProvider;
let api: ReturnType<typeof createClient>;
const failedOnce = new Set<string>();

beforeAll(async () => {
  provider = await startFakeProvider((request) => {
    const marker = /attempt-[a-z0-9-]+/.exec(JSON.stringify(request.body))?.[0] ?? '';
    if (!failedOnce.has(marker)) {
      failedOnce.add(marker);
      return { status: 500, json: { error: { message: 'upstream exploded', type: 'server_error' } } };
    }
    return { json: JSON.parse(fixture('openai-chat-text.json')) };
  });
  api = createClient(
    appHarness(new MemoryStore(), {
      API_TOKEN: TOKEN,
      TOKEN_SIGNING_KEY: SIGNING_KEY,
      OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
      OPENAI_COMPATIBLE_IMAGES: 'true',
      MAX_IMAGE_BYTES: '2000000',
      MODEL_MAX_RETRIES: '0',
    }),
  );
});

afterAll(async () => {
  await provider?.close();
});

const photos = photosMessage;

const imagesIn = (value: unknown, pattern: RegExp) => JSON.stringify(value).match(pattern)?.length ?? 0;

describe('a failed turn of many photos taken again', () => {
  it('the preview shows the photos as the empty input that takes the turn again sends them', async () => {
    const id = await api.session({ model: 'openai-compatible:fake' });
    const failed = await api.post(`/v1/sessions/${id}/turns`, { input: [photos(20, freshId('attempt'))] });
    expect(failed.status, JSON.stringify(failed.body)).toBe(502);
    expect(wholeImages(20, resolveStrategyConfig({}))).toBeLessThan(20);
    const preview = await api.get(`/v1/sessions/${id}/prompt`);
    expect(preview.status, JSON.stringify(preview.body)).toBe(200);
    const again = await api.post(`/v1/sessions/${id}/turns`, { input: [] });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    const sent = imagesIn(provider.requests.at(-1)!.body.messages, /"type":"image_url"/g);
    expect(sent).toBe(20);
    expect(imagesIn(preview.body.items, /"type":"input_image"/g)).toBe(sent);
  });
});
