import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import { isPrivateAddress } from '../lib/webhooks/url.ts';

/**
 * Node and Deno: the `fetch` webhook deliveries go through when WEBHOOK_ALLOW_PRIVATE is unset
 * (functions/webhooks.ts `drainWebhooks`). A URL's literal address and special names are
 * refused before (lib/webhooks/url.ts); this checks the addresses a host name resolves to, in
 * the lookup of the connection itself, so the address it connects to is the one checked: a
 * name that resolves to a private address then (DNS rebinding, or a public name pointing
 * inward) fails the attempt, which is retried and logged as any other failed attempt. Workers
 * cannot resolve names (docs/SECURITY.md, "Webhooks").
 */

export interface WebhookFetchOptions {
  /** Resolves a host name (default node:dns `lookup`, the system's resolver); tests answer for it. */
  resolve?: LookupFunction;
  /** Whether a resolved address is refused (default lib/webhooks/url.ts `isPrivateAddress`). */
  refused?: (address: string) => boolean;
}

/** A lookup that answers as `resolve` does, or fails when any address it finds is `refused`. */
function checkedLookup(resolve: LookupFunction, refused: (address: string) => boolean): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname, { ...options, all: true }, (error, found) => {
      if (error) return callback(error, '');
      const addresses = (Array.isArray(found) ? found : [{ address: found, family: 0 }]) as LookupAddress[];
      const inward = addresses.find(({ address }) => refused(address));
      if (inward !== undefined || addresses.length === 0) {
        const why = inward ? `a private or loopback address (${inward.address})` : 'no address';
        return callback(new Error(`${hostname} resolves to ${why}; set WEBHOOK_ALLOW_PRIVATE to allow it`), '');
      }
      if (options.all) return callback(null, addresses);
      callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}

/**
 * A `fetch` over node:http and node:https (Deno's too) whose connections resolve host names
 * with `checkedLookup`. It answers with the status alone: the response body is not read (a
 * delivery needs only the status), and no redirect is followed.
 */
export function webhookFetch(options: WebhookFetchOptions = {}): typeof fetch {
  const lookup = checkedLookup(options.resolve ?? (dnsLookup as LookupFunction), options.refused ?? isPrivateAddress);
  return async (input, init) => {
    const request = new Request(input, init);
    const body = new Uint8Array(await request.arrayBuffer());
    const url = new URL(request.url);
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const { signal } = request;
    return new Promise<Response>((resolve, reject) => {
      const headers = Object.fromEntries(request.headers);
      const outgoing = send(url, { method: request.method, headers, lookup, signal, agent: false }, (response) => {
        const status = response.statusCode ?? 0;
        response.destroy();
        if (status < 200 || status > 599) reject(new Error(`answered ${status}`));
        else resolve(new Response(null, { status }));
      });
      outgoing.on('error', (error) => reject(signal.aborted ? signal.reason : error));
      outgoing.end(body);
    });
  };
}
