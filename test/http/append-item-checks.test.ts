import { describe, expect, it } from 'vitest';
import { appendItemChecks } from '../../lib/session/log/append.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { dataUrl, pngBytes } from '../support/media-fixtures.ts';
import { appHarness } from '../support/app-harness.ts';
import { createClient, TOKEN } from './http-suite.ts';

// POST /v1/sessions/{id}/items: the route's schema checks the items, and the session log does
// not check them again (lib/items.ts markParsedItems), but for items whose attachments it stored.
const api = createClient(appHarness(new MemoryStore(), { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' }));

describe('an append through the route', () => {
  it('checks its items once, and those its attachments rewrote again', async () => {
    const id = await api.session();
    const before = appendItemChecks();
    const items = Array.from({ length: 250 }, (_, at) => ({ type: 'message', role: 'user', content: `m${at}` }));
    expect((await api.post(`/v1/sessions/${id}/items`, { items })).status).toBe(201);
    expect(appendItemChecks()).toBe(before);
    const image = { type: 'input_image', image_url: dataUrl('image/png', pngBytes(4, 3)) };
    const withImage = { items: [{ type: 'message', role: 'user', content: [image] }] };
    expect((await api.post(`/v1/sessions/${id}/items`, withImage)).status).toBe(201);
    expect(appendItemChecks()).toBe(before + 1);
    const page = (await api.get(`/v1/sessions/${id}/items?limit=2`)).body.items;
    expect(page[0]).toMatchObject({ seq: 251, content: [{ type: 'input_image', media_type: 'image/png' }] });
    expect(page[1]).toMatchObject({ seq: 250, content: 'm249' });
  });
});
