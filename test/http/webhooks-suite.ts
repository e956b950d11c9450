import { describe, expect, it } from 'vitest';
import type { Delivery } from '../support/webhook-receiver.ts';
import { createClient, type HttpHarness } from './http-suite.ts';

/**
 * Webhooks through the real app. The harness's env sets WEBHOOK_SECRET (the receiver's
 * secret) and WEBHOOK_ALLOW_PRIVATE, as the receiver is on loopback; `deliveries` reads what
 * the receiver took (test/support/webhook-receiver.ts). On Node the outbox loop delivers
 * (test/http/webhooks-http.test.ts), inside workerd the WEBHOOKS queue's consumer does
 * (test/workers/webhooks.test.ts).
 */
export function defineWebhooksSuite(
  label: string,
  harness: HttpHarness,
  receiverUrl: string,
  deliveries: () => Promise<Delivery[]>,
): void {
  const api = createClient(harness);
  const post = (env: Record<string, string | undefined>, path: string, body: unknown, method = 'POST') =>
    harness.fetchWithEnv(env, path, {
      method,
      headers: { authorization: 'Bearer test-token', 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  describe(`${label}: webhooks`, () => {
    it('refuses a private or loopback webhook_url (400 naming the field) without WEBHOOK_ALLOW_PRIVATE', async () => {
      for (const url of [receiverUrl, 'https://10.0.0.1/hook', 'https://[::1]/hook', 'https://localhost/hook']) {
        const refused = await post({ WEBHOOK_ALLOW_PRIVATE: undefined }, '/v1/sessions', { webhook_url: url });
        expect(refused.status, url).toBe(400);
        expect(await refused.json()).toMatchObject({
          error: { code: 'invalid_request', details: { field: 'webhook_url' } },
        });
      }
      const unsigned = await post({ WEBHOOK_SECRET: undefined }, '/v1/sessions', {
        webhook_url: 'https://example.com/',
      });
      expect(unsigned.status).toBe(400);
      expect(await unsigned.text()).toMatch(/WEBHOOK_SECRET/);
      const id = await api.session({ webhook_url: 'https://example.com/hook' });
      const patched = await post(
        { WEBHOOK_ALLOW_PRIVATE: undefined },
        `/v1/sessions/${id}`,
        { webhook_url: 'https://192.168.0.2/' },
        'PATCH',
      );
      expect(patched.status).toBe(400);
      expect((await api.get(`/v1/sessions/${id}`)).body.webhook_url).toBe('https://example.com/hook');
      const allowed = await api.patch(`/v1/sessions/${id}`, { webhook_url: receiverUrl });
      expect(allowed.status).toBe(200);
      expect(allowed.body.webhook_url).toBe(receiverUrl);
      const cleared = await api.patch(`/v1/sessions/${id}`, { webhook_url: null });
      expect(cleared.body).not.toHaveProperty('webhook_url');
    });

    it('refuses a webhook_url on a port fetch refuses (400 naming the field and the port)', async () => {
      // The Fetch standard's "bad port" list: every delivery to one would fail, so none is taken.
      for (const [url, port] of [
        ['http://127.0.0.1:1/x', '1'],
        ['https://example.com:25/hook', '25'],
        ['https://example.com:6667/hook', '6667'],
        ['https://example.com:10080/', '10080'],
      ] as const) {
        const refused = await post({}, '/v1/sessions', { webhook_url: url });
        expect(refused.status, url).toBe(400);
        const body = (await refused.json()) as { error: { message: string } };
        expect(body, url).toMatchObject({ error: { code: 'invalid_request', details: { field: 'webhook_url' } } });
        expect(body.error.message, url).toContain(`port ${port}`);
      }
      const id = await api.session({ webhook_url: 'https://example.com:8443/hook' });
      const patched = await post({}, `/v1/sessions/${id}`, { webhook_url: 'https://example.com:587/' }, 'PATCH');
      expect(patched.status).toBe(400);
      expect(await patched.text()).toMatch(/webhook_url.*port 587/);
      expect((await api.get(`/v1/sessions/${id}`)).body.webhook_url).toBe('https://example.com:8443/hook');
    });

    it("shows a session's webhook_url to admin tokens only: it may carry the receiver's secret", async () => {
      const id = await api.session({ webhook_url: 'https://example.com/hook/k3y' });
      for (const [scopes, shown] of [
        [['admin'], true],
        [['session:read'], false],
        [['session:turn'], false],
      ] as const) {
        const minted = await api.post('/v1/tokens', { scopes, session_id: id });
        expect(minted.status, JSON.stringify(minted.body)).toBe(201);
        const read = await api.get(`/v1/sessions/${id}`, { authorization: `Bearer ${minted.body.token}` });
        expect(read.status).toBe(200);
        if (shown) expect(read.body.webhook_url, scopes[0]).toBe('https://example.com/hook/k3y');
        else expect(read.body, scopes[0]).not.toHaveProperty('webhook_url');
      }
    });

    it('tells a token that may read a session but not set its webhook_url the URL on no route', async () => {
      const id = await api.session({ webhook_url: 'https://example.com/hook/s3cret' });
      expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'hi' })).status).toBe(200);
      const forked = await api.post(`/v1/sessions/${id}/fork`, { at_turn: 1 });
      expect(forked.status, JSON.stringify(forked.body)).toBe(201);
      const minted = await api.post('/v1/tokens', { scopes: ['session:read', 'session:turn', 'inbox:read'] });
      const authorization = `Bearer ${minted.body.token}`;
      for (const session of [id, forked.body.id as string])
        for (const path of [
          '',
          '/export',
          '/forks',
          '/items',
          '/prompt',
          '/queue',
          '/turns',
          '/turns/1',
          '/turns/1/items',
          '/inbox/delivered',
        ]) {
          const read = await harness.fetch(`/v1/sessions/${session}${path}`, { headers: { authorization } });
          expect(read.status, path).toBeLessThan(300);
          expect(await read.text(), path).not.toContain('s3cret');
        }
      for (const path of [`/v1/conversations/${id}`, `/v1/conversations/${id}/items`, '/v1/tokens/current']) {
        const read = await harness.fetch(path, { headers: { authorization } });
        expect(read.status, path).toBeLessThan(300);
        expect(await read.text(), path).not.toContain('s3cret');
      }
    });

    it("delivers a turn's turn.completed and session.idle, signed, to the session's webhook_url", async () => {
      const id = await api.session({ webhook_url: receiverUrl });
      const turn = await api.post(`/v1/sessions/${id}/turns`, { input: 'private words' });
      expect(turn.status, JSON.stringify(turn.body)).toBe(200);
      const ours = await waitFor(deliveries, (all) => {
        const mine = all.filter((delivery) => delivery.event?.data.session_id === id && delivery.status < 300);
        return new Set(mine.map((delivery) => delivery.event!.type)).size >= 2 ? mine : null;
      });
      expect(ours.every((delivery) => delivery.verified)).toBe(true);
      const completed = ours.find((delivery) => delivery.event!.type === 'turn.completed')!;
      expect(completed.event!.data).toMatchObject({ session_id: id, turn: 1, status: 'completed' });
      expect(completed.event!.data.usage).toMatchObject({ input_tokens: expect.any(Number) });
      expect(ours.find((delivery) => delivery.event!.type === 'session.idle')!.event!.data).toMatchObject({ turn: 1 });
      expect(JSON.stringify(ours)).not.toContain('private words');
      // Its outbox entry (the intent written with the claim) goes once delivered: no drain sends it again.
      const entry = `${harness.keyPrefix}webhooks/outbox/${completed.id}`;
      for (let polls = 0; polls < 400 && (await harness.store.head(entry)) !== null; polls++)
        await new Promise((resolve) => setTimeout(resolve, 50));
      expect(await harness.store.head(entry)).toBeNull();
    });
  });
}

/** Polls until `found` gives a value (a generous bound only against a hang; no time is asserted). */
async function waitFor<T>(read: () => Promise<Delivery[]>, found: (all: Delivery[]) => T | null): Promise<T> {
  for (let polls = 0; polls < 400; polls++) {
    const value = found(await read());
    if (value !== null) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`no delivery came: ${JSON.stringify(await read())}`);
}
