import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

/** A Standard Webhooks secret for tests (`whsec_` and 32 bytes of base64). */
export const WEBHOOK_SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw4tPCZfYjzBs=';

/** One POST the receiver took, and whether its signature verified against its own secret. */
export interface Delivery {
  id: string;
  verified: boolean;
  status: number;
  event: { type: string; timestamp: string; data: Record<string, unknown> } | null;
}

export interface WebhookReceiver {
  url: string;
  deliveries: Delivery[];
  /** The status each next POST is answered with (default 200). */
  answer: (status: number) => void;
  /** The events answered 2xx, one per webhook-id (a receiver's dedupe). */
  delivered: () => Map<string, Delivery>;
  close: () => Promise<void>;
}

/**
 * A loopback webhook receiver: verifies each POST with the standardwebhooks library against
 * its own copy of the secret, and counts them. `GET /deliveries` answers what it took (for a
 * test that cannot read this process's memory: one inside workerd).
 */
export async function startWebhookReceiver(secret = WEBHOOK_SECRET): Promise<WebhookReceiver> {
  const deliveries: Delivery[] = [];
  let status = 200;
  const verifier = new Webhook(secret);
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => (body += chunk));
    request.on('end', () => {
      if (request.method === 'GET') {
        response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(deliveries));
        return;
      }
      deliveries.push({
        id: String(request.headers['webhook-id']),
        status,
        ...verify(verifier, body, request.headers),
      });
      response.writeHead(status).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    deliveries,
    answer: (next) => {
      status = next;
    },
    delivered: () => deliveredOnce(deliveries),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** The deliveries answered 2xx, one per webhook-id. */
export function deliveredOnce(deliveries: Delivery[]): Map<string, Delivery> {
  const once = new Map<string, Delivery>();
  for (const delivery of deliveries)
    if (delivery.status < 300 && !once.has(delivery.id)) once.set(delivery.id, delivery);
  return once;
}

function verify(verifier: Webhook, body: string, headers: IncomingHttpHeaders): Pick<Delivery, 'verified' | 'event'> {
  try {
    const event = verifier.verify(body, headers as Record<string, string>) as Delivery['event'];
    return { verified: true, event };
  } catch {
    return { verified: false, event: null };
  }
}
