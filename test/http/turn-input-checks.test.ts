import { describe, expect, it } from 'vitest';
import { claimInputChecks } from '../../lib/session/log/claim-input.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { dataUrl, pngBytes } from '../support/media-fixtures.ts';
import { appHarness } from '../support/app-harness.ts';
import { createClient, TOKEN } from './http-suite.ts';

// POST /v1/sessions/{id}/turns: the route's schema checks the input's items, and the turn's claim
// does not check them again (lib/session/log/claim-input.ts), but for items its images rewrote
// and for a string input (the route parsed a string, not an item). Images are checked all the same.
const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', MAX_IMAGE_BYTES: '1024' };
const api = createClient(appHarness(new MemoryStore(), environment));

const image = (padding: number) => ({ type: 'input_image', image_url: dataUrl('image/png', pngBytes(4, 3, padding)) });

describe("a turn's input through the route", () => {
  it('is checked once, by the route, unless its images rewrote it or it is a string', async () => {
    const id = await api.session();
    const input = Array.from({ length: 250 }, (_, at) => ({ type: 'message', role: 'user', content: `m${at}` }));
    const before = claimInputChecks();
    const taken = await api.post(`/v1/sessions/${id}/turns`, { input });
    expect(taken.status, JSON.stringify(taken.body)).toBe(200);
    expect(claimInputChecks()).toBe(before);
    expect(taken.body.output[0]).toMatchObject({ seq: 251 });
    const withImage = await api.post(`/v1/sessions/${id}/turns`, {
      input: [{ type: 'message', role: 'user', content: [image(0)] }],
    });
    expect(withImage.status, JSON.stringify(withImage.body)).toBe(200);
    expect(claimInputChecks()).toBe(before + 1);
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'plain' })).status).toBe(200);
    expect(claimInputChecks()).toBe(before + 2);
    const page = (await api.get(`/v1/sessions/${id}/items?limit=5`)).body.items as { seq: number }[];
    expect(page.find((item) => item.seq === 252)).toMatchObject({
      seq: 252,
      content: [{ type: 'input_image', media_type: 'image/png', width: 4, height: 3 }],
    });
  });

  it("is checked by the claim when the OpenAI facade's route took it", async () => {
    const before = claimInputChecks();
    const input = [{ type: 'message', role: 'user', content: 'hello' }];
    const created = await api.post('/v1/responses', { model: 'echo', input });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    expect(claimInputChecks()).toBe(before + 1);
  });

  it("still refuses what the route's schema leaves to the attachment checks, storing nothing", async () => {
    const id = await api.session();
    const tooLarge = { input: [{ type: 'message', role: 'user', content: [image(2048)] }] };
    const notImage = {
      input: [{ type: 'message', role: 'user', content: [{ type: 'input_image', image_url: 'data:text/plain,x' }] }],
    };
    const written = { input: [{ type: 'message', role: 'user', content: [{ ...image(0), blob: 'a'.repeat(64) }] }] };
    for (const body of [tooLarge, notImage, written]) {
      const refused = await api.post(`/v1/sessions/${id}/turns`, body);
      expect(refused.status, JSON.stringify(refused.body)).toBeGreaterThanOrEqual(400);
      expect(refused.status).toBeLessThan(500);
      expect(refused.body.error.message).toContain('input[0].content[0]');
    }
    expect((await api.get(`/v1/sessions/${id}/items`)).body.items).toEqual([]);
  });
});
