import { hmacSha256Base64 } from '../hash.ts';
import { decodeBase64 } from '../media.ts';
import { webhookUrlProblem } from './url.ts';
import type { WebhookEntry } from './events.ts';

/**
 * One delivery attempt of an event, signed as the Standard Webhooks specification says (and its
 * `standardwebhooks` library verifies, test/support/webhook-receiver.ts): `webhook-id` (the
 * entry's id, the same on every attempt), `webhook-timestamp` (this attempt's, in seconds) and
 * `webhook-signature` (`v1,` and the base64 HMAC-SHA256 of `id.timestamp.body` under the bytes
 * of WEBHOOK_SECRET, the base64 after `whsec_`). A 2xx answer delivers it; anything else, a
 * redirect included (it is not followed), is a failure to retry.
 */

/** Attempts before an event is given up (dead-lettered and logged): about four hours of backoff. */
export const MAX_ATTEMPTS = 15;
/** How long one attempt may take. */
const ATTEMPT_TIMEOUT_MS = 10_000;

/**
 * The log line of an event's `attempts`-th failed attempt, or null: the first is logged (a wrong
 * URL or a receiver that is down shows at once, not hours later), and the last, after which the
 * event is given up; those between are not. It names the URL's origin alone: a receiver's path
 * or query is often its secret, which an admin token sets and no other reads (docs/SECURITY.md).
 */
export function failedAttemptLine(entry: WebhookEntry, attempts: number, failure: string): string | null {
  const event = `tailgate webhooks: ${entry.id} to ${urlOrigin(entry.url)}`;
  if (attempts >= MAX_ATTEMPTS) return `${event} given up after ${attempts} attempts: ${failure}`;
  if (attempts === 1) return `${event} failed: ${failure}; retried up to ${MAX_ATTEMPTS - 1} more times`;
  return null;
}

/** `url`'s scheme, host and port; a text that is no URL (checked when delivered) as `an invalid URL`. */
function urlOrigin(url: string): string {
  return URL.canParse(url) ? new URL(url).origin : 'an invalid URL';
}

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
  const timestamp = String(Math.floor(options.now.getTime() / 1000));
  const signature = `v1,${hmacSha256Base64(webhookKey(options.secret), `${entry.id}.${timestamp}.${entry.body}`)}`;
  try {
    const response = await (options.fetch ?? fetch)(entry.url, {
      method: 'POST',
      redirect: 'manual',
      signal: AbortSignal.timeout(ATTEMPT_TIMEOUT_MS),
      headers: {
        'content-type': 'application/json',
        'user-agent': 'tailgate-webhooks',
        'webhook-id': entry.id,
        'webhook-timestamp': timestamp,
        'webhook-signature': signature,
      },
      body: entry.body,
    });
    await response.body?.cancel();
    return response.ok ? null : `answered ${response.status}`;
  } catch (error) {
    return failureText(error);
  }
}

/**
 * Why an attempt threw, its causes' messages after its own: fetch says only "fetch failed", its
 * cause why (`fetch failed (connect ECONNREFUSED 10.0.0.7:443)`). Connection errors name the
 * host and port, never the URL's path or query.
 */
function failureText(error: unknown): string {
  let text = error instanceof Error ? error.message : String(error);
  let cause = error instanceof Error ? error.cause : undefined;
  for (let depth = 0; depth < 3 && cause instanceof Error; depth++, cause = cause.cause) {
    // An AggregateError (each address of a name refused) has no message: its code says why.
    const code = (cause as { code?: unknown }).code;
    const part = cause.message || (typeof code === 'string' ? code : '');
    if (part && !text.includes(part)) text += ` (${part})`;
  }
  return text;
}

/** The key a Standard Webhooks secret (`whsec_` and base64, the prefix optional) stands for. */
function webhookKey(secret: string): Uint8Array {
  const key = decodeBase64(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret);
  if (key === undefined || key.length === 0) throw new Error('the webhook secret is not base64 of at least one byte');
  return key;
}
