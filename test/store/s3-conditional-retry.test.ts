import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { spendKey, TokenSpend } from '../../lib/ledger/token-spend.ts';
import { createTestS3Store } from '../support/s3-store.ts';

/**
 * A conditional put whose first attempt landed but was answered 5xx (a timeout or an error
 * after the write): the SDK's retry sends it again, meets its own write and gets 412. The S3
 * store tells that from a refusal (lib/store/s3.ts), so a compare-and-set caller (a token's
 * spend, lib/ledger/token-spend.ts) neither writes twice nor gives up on what it wrote.
 *
 * A loopback proxy before the test run's S3 gateway: a key in `failNext` has its next
 * conditional PUT reach S3 (it lands), then answered 500; a key in `holdFirst` has its next
 * conditional PUT held (not sent on) until another conditional PUT of the key was answered,
 * then answered 500 (a failure before the write): the SDK sends it again.
 */
let server: Server;
let endpoint: string;
const failNext = new Set<string>();
const holdFirst = new Map<string, { held?: () => void }>();
const conditionalPuts: string[] = [];
const INTERNAL_ERROR =
  '<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code><Message>Try again.</Message></Error>';

function readAll(stream: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('end', () => resolve(Buffer.concat(chunks)));
    stream.on('error', reject);
  });
}

beforeAll(async () => {
  const upstream = new URL(inject('s3Endpoint'));
  server = createServer(async (incoming, outgoing) => {
    const body = await readAll(incoming);
    const path = incoming.url ?? '/';
    const key = decodeURIComponent(path.split('?')[0]!.split('/').slice(2).join('/'));
    const conditional = incoming.headers['if-match'] !== undefined || incoming.headers['if-none-match'] !== undefined;
    if (incoming.method === 'PUT' && conditional) conditionalPuts.push(key);
    const hold = incoming.method === 'PUT' && conditional ? holdFirst.get(key) : undefined;
    if (hold && !hold.held) {
      hold.held = () => {
        outgoing.writeHead(500, { 'content-type': 'application/xml' });
        outgoing.end(INTERNAL_ERROR);
      };
      return;
    }
    const upstreamRequest = httpRequest(
      { host: upstream.hostname, port: upstream.port, method: incoming.method, path, headers: incoming.headers },
      async (response) => {
        const answer = await readAll(response);
        if (incoming.method === 'PUT' && conditional && response.statusCode === 200 && failNext.delete(key)) {
          outgoing.writeHead(500, { 'content-type': 'application/xml' });
          outgoing.end(INTERNAL_ERROR);
          return;
        }
        outgoing.writeHead(response.statusCode ?? 502, response.headers);
        outgoing.end(answer);
        if (hold?.held && holdFirst.delete(key)) setTimeout(hold.held, 20);
      },
    );
    upstreamRequest.on('error', () => {
      outgoing.statusCode = 502;
      outgoing.end();
    });
    upstreamRequest.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

/** A token budget under a fresh key prefix, for a spend record of its own. */
function tokenBudget() {
  const keyPrefix = `retry/${crypto.randomUUID()}/`;
  const id = crypto.randomUUID().replaceAll('-', '');
  return { keyPrefix, budget: { id, expires: Math.floor(Date.now() / 1000) + 3600, limits: { max_turns: 100 } } };
}

/** One turn's usage, charged again and again. */
const USAGE = {
  input_tokens: 10,
  cached_input_tokens: 0,
  cache_write_tokens: 0,
  output_tokens: 5,
  reasoning_tokens: 0,
  cost_usd: null,
};

describe('S3Store: a conditional put whose first attempt landed but was answered 5xx', () => {
  it('answers the write, not a refusal, for If-Match and create-only puts; a real refusal stays null', async () => {
    const store = createTestS3Store(endpoint, inject('s3Bucket'));
    const key = `retry/${crypto.randomUUID()}/cas`;
    const first = await store.put(key, 'version 1');
    failNext.add(key);
    const before = conditionalPuts.length;
    const written = await store.put(key, 'version 2', { ifMatch: first!.etag });
    // The SDK sent the PUT again after the 500; its retry met its own write.
    expect(conditionalPuts.slice(before)).toEqual([key, key]);
    expect(new TextDecoder().decode((await store.get(key))!.body)).toBe('version 2');
    expect(written?.etag).toBe((await store.head(key))!.etag);
    const created = `retry/${crypto.randomUUID()}/created`;
    failNext.add(created);
    expect(await store.put(created, 'mine', { onlyIfAbsent: true })).not.toBeNull();
    // Someone else's object under the key: refused, as before.
    expect(await store.put(key, 'version 3', { ifMatch: first!.etag })).toBeNull();
    expect(await store.put(created, 'theirs', { onlyIfAbsent: true })).toBeNull();
  });

  it("charges a token's spend once per turn when a charge's put is retried", async () => {
    const store = createTestS3Store(endpoint, inject('s3Bucket'));
    const { keyPrefix, budget } = tokenBudget();
    const spend = new TokenSpend(store, keyPrefix, budget);
    failNext.add(spendKey(keyPrefix, budget));
    await spend.charge(USAGE);
    failNext.add(spendKey(keyPrefix, budget));
    await spend.charge(USAGE);
    expect(await spend.read()).toMatchObject({ turns: 2, input_tokens: 20 });
  });

  it('is a refusal when another writer wrote the same bytes while the put was retried', async () => {
    const store = createTestS3Store(endpoint, inject('s3Bucket'));
    const key = `retry/${crypto.randomUUID()}/same`;
    const first = await store.put(key, 'version 1');
    holdFirst.set(key, {});
    const ours = store.put(key, 'version 2', { ifMatch: first!.etag });
    // Ours is held by the proxy (the first conditional put to come): the next is another writer's.
    await expect.poll(() => holdFirst.get(key)?.held !== undefined).toBe(true);
    expect(await store.put(key, 'version 2', { ifMatch: first!.etag })).not.toBeNull();
    expect(await ours).toBeNull();
    // The mark a conditional put carries is not the caller's metadata.
    expect((await store.head(key))!.metadata).toEqual({});
  });

  it("charges a token's spend for each of two concurrent turns of one usage", async () => {
    const store = createTestS3Store(endpoint, inject('s3Bucket'));
    const { keyPrefix, budget } = tokenBudget();
    const one = new TokenSpend(store, keyPrefix, budget);
    const two = new TokenSpend(store, keyPrefix, budget);
    await one.charge(USAGE);
    holdFirst.set(spendKey(keyPrefix, budget), {});
    await Promise.all([one.charge(USAGE), two.charge(USAGE)]);
    expect(await one.read()).toMatchObject({ turns: 3, input_tokens: 30 });
  });
});
