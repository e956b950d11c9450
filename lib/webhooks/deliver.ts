import { Webhook } from 'standardwebhooks';
import { webhookUrlProblem } from './url.ts';
import type { WebhookEntry } from './events.ts';

/**
 * One delivery attempt of an event, signed as Standard Webhooks sign (the `standardwebhooks`
 * library, pure JavaScript, so the same on Workers, Node and Deno): `webhook-id` (the entry's
 * id, the same on every attempt), `webhook-timestamp` (this attempt's, in seconds) and
 * `webhook-signature` (`v1,` and the base64 HMAC-SHA256 of `id.timestamp.body` under
 * WEBHOOK_SECRET). A 2xx answer delivers it; anything else, a redirect included (it is not
 * followed), is a failure to retry.
 */

/** Attempts before an event is given up (dead-lettered and logged): about four hours of backoff. */
export const MAX_ATTEMPTS = 15;
/** How long one attempt may take. */
const ATTEMPT_TIMEOUT_MS = 10_000;

/** Seconds to wait after the `attempts`-th failed attempt: 2, 4, 8, ... up to an hour. */
export function retryDelaySeconds(attempts: number): number {
  return Math.min(3600, 2 ** Math.max(1, Math.min(attempts, 12)));
}

export interface DeliveryOptions {
  secret: string;
  /** WEBHOOK_ALLOW_PRIVATE: the URL is checked again, as the setting may have changed since. */
  allowPrivate: boolean;
  now: Date;
  fetch?: typeof fetch;
}

/** Posts the event once: null when delivered, else why not. */
export async function deliverWebhook(entry: WebhookEntry, options: DeliveryOptions): Promise<string | null> {
  const problem = webhookUrlProblem(entry.url, options.allowPrivate);
  if (problem !== null) return `the URL ${problem}`;
  const signature = new Webhook(options.secret).sign(entry.id, options.now, entry.body);
  try {
    const response = await (options.fetch ?? fetch)(entry.url, {
      method: 'POST',
      redirect: 'manual',
      signal: AbortSignal.timeout(ATTEMPT_TIMEOUT_MS),
      headers: {
        'content-type': 'application/json',
        'user-agent': 'tailgate-webhooks',
        'webhook-id': entry.id,
        'webhook-timestamp': String(Math.floor(options.now.getTime() / 1000)),
        'webhook-signature': signature,
      },
      body: entry.body,
    });
    await response.body?.cancel();
    return response.ok ? null : `answered ${response.status}`;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}
