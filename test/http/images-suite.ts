import { describe, expect, it } from 'vitest';
import { sha256Hex } from '../../lib/hash.ts';
import { sessionPrefix } from '../../lib/session/keys.ts';
import { listAll } from '../../lib/store/object-store.ts';
import { dataUrl, pngBytes } from '../support/media-fixtures.ts';
import { createClient, TOKEN, type HttpHarness } from './http-suite.ts';

/**
 * Images through the real app and its bucket: stored once as a blob, listed as a reference,
 * served with their content-type, seen by the model, deleted with the session. Runs in Node
 * (test/http/http.test.ts) and inside workerd with R2 (test/workers/http-turns.test.ts).
 */
export function defineImagesSuite(label: string, harness: HttpHarness): void {
  const api = createClient(harness);
  const blobKeys = async (id: string) =>
    (await listAll(harness.store, sessionPrefix(harness.keyPrefix, id))).filter((object) =>
      object.key.includes('/blob/'),
    );

  describe(`${label}: images`, () => {
    it('stores a screenshot once, lists, serves and shows it, and deletes it with the session', async () => {
      const id = await api.session();
      const screen = pngBytes(320, 200, 20_000, 7);
      const sha256 = sha256Hex(screen);
      const image = { type: 'input_image', image_url: dataUrl('image/png', screen) };
      const appended = await api.post(`/v1/sessions/${id}/items`, {
        items: [
          { type: 'function_call', call_id: 'c1', name: 'screenshot', arguments: '{}' },
          { type: 'function_call_output', call_id: 'c1', output: [image] },
        ],
      });
      expect(appended.status, JSON.stringify(appended.body)).toBe(201);
      const turn = await api.post(`/v1/sessions/${id}/turns`, {
        model: 'echo',
        input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'again' }, image] }],
      });
      expect(turn.status, JSON.stringify(turn.body)).toBe(200);
      expect(turn.body.output[0].content).toBe('echo: again [image/png 320x200, 20 KB] [image/png 320x200, 20 KB]');
      expect(await blobKeys(id)).toHaveLength(1);

      const listed = await api.get(`/v1/sessions/${id}/items?limit=10`);
      const output = listed.body.items.find((item: { seq: number }) => item.seq === 2).output;
      expect(output).toEqual([
        { type: 'input_image', blob: sha256, media_type: 'image/png', bytes: screen.length, width: 320, height: 200 },
      ]);
      const blob = await harness.fetch(`/v1/sessions/${id}/blobs/${sha256}`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      expect(blob.status).toBe(200);
      expect(blob.headers.get('content-type')).toBe('image/png');
      expect(sha256Hex(new Uint8Array(await blob.arrayBuffer()))).toBe(sha256);

      expect((await api.delete(`/v1/sessions/${id}`)).status).toBe(204);
      expect(await blobKeys(id)).toEqual([]);
    });

    it('a fork sees, serves and exports the images of the history it shares with its parent', async () => {
      const parent = await api.session();
      const screen = pngBytes(64, 48, 2_000, 3);
      const sha256 = sha256Hex(screen);
      const image = { type: 'input_image', image_url: dataUrl('image/png', screen) };
      const first = await api.post(`/v1/sessions/${parent}/turns`, {
        model: 'echo',
        input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'look' }, image] }],
      });
      expect(first.status, JSON.stringify(first.body)).toBe(200);
      const fork = await api.post(`/v1/sessions/${parent}/fork`, { at_turn: 1 });
      expect(fork.status, JSON.stringify(fork.body)).toBe(201);
      const child = fork.body.id as string;
      // The image stays in the parent's generation: the fork stores none of its own.
      expect(await blobKeys(child)).toEqual([]);
      const blob = await harness.fetch(`/v1/sessions/${child}/blobs/${sha256}`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      expect(blob.status).toBe(200);
      expect(sha256Hex(new Uint8Array(await blob.arrayBuffer()))).toBe(sha256);
      const exported = await harness.fetch(`/v1/sessions/${child}/export`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      expect(exported.status).toBe(200);
      expect(await exported.text()).toContain(dataUrl('image/png', screen));
      // Its turn's prompt carries the inherited image: the echo model describes it.
      const turn = await api.post(`/v1/sessions/${child}/turns`, { model: 'echo', input: 'and now?' });
      expect(turn.status, JSON.stringify(turn.body)).toBe(200);
      const prompt = await api.get(`/v1/sessions/${child}/prompt?full=true`);
      expect(JSON.stringify(prompt.body.items)).toContain(sha256);
    });
  });
}
