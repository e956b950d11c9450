import type { LookupAddress } from 'node:dns';
import type { LookupFunction } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createServices } from '../../functions/services.ts';
import { webhookFetch } from '../../functions/webhook-fetch.ts';
import { drainWebhooks } from '../../functions/webhooks.ts';
import { parseServiceConfig } from '../../lib/config.ts';
import { echoModel } from '../../lib/models/echo.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { decodeUtf8 } from '../../lib/store/object-store.ts';
import { deliverWebhook } from '../../lib/webhooks/deliver.ts';
import type { WebhookEntry } from '../../lib/webhooks/events.ts';
import { outboxSink } from '../../lib/webhooks/outbox.ts';
import { isPrivateAddress } from '../../lib/webhooks/url.ts';
import { startWebhookReceiver, WEBHOOK_SECRET, type WebhookReceiver } from '../support/webhook-receiver.ts';

// A host name passes the URL check by its name (lib/webhooks/url.ts); on Node and Deno the
// addresses it resolves to are checked as the delivery connects (functions/webhook-fetch.ts).
// The resolver is the test's: it answers for names no resolver here knows.

let receiver: WebhookReceiver;
let port: string;
beforeAll(async () => {
  receiver = await startWebhookReceiver();
  port = new URL(receiver.url).port;
});
afterAll(() => receiver.close());
beforeEach(() => {
  receiver.deliveries.length = 0;
});

/** A resolver answering `addresses` for every name, and the names it was asked. */
function resolver(...addresses: string[]) {
  const asked: string[] = [];
  const resolve: LookupFunction = (hostname, _options, callback) => {
    asked.push(hostname);
    const found: LookupAddress[] = addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    callback(null, found);
  };
  return { resolve, asked };
}

function entry(id: string, url: string): WebhookEntry {
  return {
    format: 'tailgate.webhook.v1',
    id,
    url,
    body: JSON.stringify({ type: 'session.idle', timestamp: '2026-01-01T00:00:00Z', data: {} }),
    created_at: '2026-01-01T00:00:00Z',
    attempts: 0,
    next_attempt_at: '2026-01-01T00:00:00Z',
  };
}

/** A deployment's drain of one stored event to `url`, with `env`'s settings and `checkedFetch`. */
async function drainOne(url: string, env: Record<string, string>, checkedFetch: typeof fetch) {
  const store = new MemoryStore();
  const logged: string[] = [];
  const services = createServices({
    store,
    config: parseServiceConfig({ WEBHOOK_SECRET, ...env }),
    env: {},
    model: () => echoModel,
    background: () => undefined,
    log: (message) => void logged.push(message),
    info: () => undefined,
    webhookSink: outboxSink(store, ''),
  });
  await outboxSink(store, '')(entry('msg_one', url));
  await drainWebhooks(services, checkedFetch);
  const kept = await store.get('webhooks/outbox/msg_one');
  return { logged, kept: kept ? (JSON.parse(decodeUtf8(kept.body)) as WebhookEntry) : null };
}

describe('resolved webhook addresses', () => {
  it('classifies a resolver’s answers as the URL check classifies literal addresses', () => {
    for (const address of ['127.0.0.1', '10.0.0.7', '169.254.169.254', '::1', '::ffff:127.0.0.1', 'fe80::1%eth0'])
      expect(isPrivateAddress(address), address).toBe(true);
    for (const address of [
      'fd00::2',
      '64:ff9b::a9fe:a9fe',
      '2001:0:a00:1::f7f7:f7f7',
      'localhost',
      '',
      'not an address',
    ])
      expect(isPrivateAddress(address), address).toBe(true);
    for (const address of [
      '93.184.216.34',
      '8.8.8.8',
      '2606:4700::1111',
      '::ffff:8.8.8.8',
      '2001:0:808:808::f7f7:fbfb',
    ])
      expect(isPrivateAddress(address), address).toBe(false);
  });

  it('fails a delivery to a name resolving to a private address, recorded as any failed attempt', async () => {
    const { resolve, asked } = resolver('127.0.0.1');
    const url = `https://hook.example:${port}/hook`;
    const { kept, logged } = await drainOne(url, {}, webhookFetch({ resolve }));
    expect(asked).toEqual(['hook.example']);
    expect(kept).toMatchObject({
      attempts: 1,
      last_error:
        'hook.example resolves to a private or loopback address (127.0.0.1); set WEBHOOK_ALLOW_PRIVATE to allow it',
    });
    const origin = `https://hook.example:${port}`;
    expect(logged).toEqual([
      `tailgate webhooks: msg_one to ${origin} failed: ${kept!.last_error}; retried up to 14 more times`,
    ]);
    expect(receiver.deliveries).toEqual([]);
  });

  it('fails it when any of the addresses a name resolves to is private', async () => {
    const { resolve } = resolver('93.184.216.34', '::ffff:10.0.0.1');
    const { kept } = await drainOne(`https://hook.example:${port}/hook`, {}, webhookFetch({ resolve }));
    expect(kept?.last_error).toMatch(/^hook\.example resolves to a private or loopback address \(::ffff:10\.0\.0\.1\)/);
  });

  it('delivers to the address it checked, when that one is allowed', async () => {
    // 127.0.0.1 stands for a public address here: the receiver listens there.
    const { resolve, asked } = resolver('127.0.0.1');
    const refused = (address: string) => address !== '127.0.0.1' && isPrivateAddress(address);
    const checked = webhookFetch({ resolve, refused });
    const options = { secret: WEBHOOK_SECRET, allowPrivate: true, now: new Date(), fetch: checked };
    expect(await deliverWebhook(entry('msg_allowed', `http://hook.example:${port}/hook`), options)).toBeNull();
    expect(asked).toEqual(['hook.example']);
    expect(receiver.deliveries.map(({ id, verified }) => [id, verified])).toEqual([['msg_allowed', true]]);
    // A receiver's answer other than 2xx is a failure, as through the runtime's fetch.
    receiver.answer(500);
    try {
      expect(await deliverWebhook(entry('msg_refused', `http://hook.example:${port}/hook`), options)).toBe(
        'answered 500',
      );
    } finally {
      receiver.answer(200);
    }
  });

  it('connects to a name resolving to public addresses, classified as the private ones it refuses', async () => {
    // The addresses are documentation ranges (192.0.2/24, 2001:db8::/32): public by the URL
    // check's rules, routed nowhere. The resolver stops the attempt once it has answered: a
    // refusal fails the connection before (process.nextTick), a passed check leaves it
    // connecting, which the abort then stops.
    const attempt = async (...addresses: string[]) => {
      const controller = new AbortController();
      const { resolve: answer, asked } = resolver(...addresses);
      const resolve: LookupFunction = (hostname, options, callback) => {
        answer(hostname, options, callback);
        setImmediate(() => controller.abort(new Error('stopped while connecting')));
      };
      const sent = webhookFetch({ resolve })('https://hook.example/hook', {
        method: 'POST',
        body: '{}',
        signal: controller.signal,
      });
      const failure = await sent.then(
        () => 'answered',
        (error: Error) => error.message,
      );
      return { failure, asked };
    };
    expect(await attempt('192.0.2.1', '2001:db8::1')).toEqual({
      failure: 'stopped while connecting',
      asked: ['hook.example'],
    });
    expect(await attempt('192.0.2.1', '::1')).toEqual({
      failure: 'hook.example resolves to a private or loopback address (::1); set WEBHOOK_ALLOW_PRIVATE to allow it',
      asked: ['hook.example'],
    });
  });

  it('stops an attempt its signal aborts, with the signal’s reason', async () => {
    const checked = webhookFetch({ resolve: resolver('127.0.0.1').resolve, refused: () => false });
    const signal = AbortSignal.abort(new Error('stopped'));
    await expect(checked(`http://hook.example:${port}/hook`, { method: 'POST', signal })).rejects.toThrow('stopped');
    expect(receiver.deliveries).toEqual([]);
  });

  it('leaves a name resolving inward alone when WEBHOOK_ALLOW_PRIVATE is set', async () => {
    // `localhost` resolves through the system's resolver, which the runtime's fetch uses; the
    // checked fetch, which would refuse it, is not used.
    const { resolve, asked } = resolver('127.0.0.1');
    const url = `http://localhost:${port}/hook`;
    const { kept } = await drainOne(url, { WEBHOOK_ALLOW_PRIVATE: 'true' }, webhookFetch({ resolve }));
    expect(kept).toBeNull();
    expect(asked).toEqual([]);
    expect(receiver.deliveries.map(({ id }) => id)).toEqual(['msg_one']);
  });
});
