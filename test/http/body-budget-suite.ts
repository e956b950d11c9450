import { beforeEach, describe, expect, it } from 'vitest';
import { heldBodyBytes } from '../../functions/body-budget.ts';
import { freshId, TOKEN, type HttpHarness } from './http-suite.ts';

/**
 * MAX_BUFFERED_BODY_BYTES (functions/body-budget.ts): the request bodies one process or
 * isolate holds at once. Bodies are streams the test holds open, so the budget is full for
 * as long as the test says; run in Node (test/http/http.test.ts) and inside workerd
 * (test/workers/http.test.ts).
 */

const KIB = 1024;
const encoder = new TextEncoder();

/** An append of one message whose JSON body is about `bytes` long, sent as a stream held open after its first half. */
function heldAppend(bytes: number) {
  const body = encoder.encode(
    JSON.stringify({ items: [{ type: 'message', role: 'user', content: 'x'.repeat(bytes - 70) }] }),
  );
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const stream = new ReadableStream<Uint8Array>({
    start(start) {
      controller = start;
    },
  });
  controller.enqueue(body.slice(0, body.length >> 1));
  return {
    length: body.length,
    stream,
    finish() {
      controller.enqueue(body.slice(body.length >> 1));
      controller.close();
    },
    fail() {
      controller.error(new Error('the client went away'));
    },
  };
}

/** Until the process holds at least `bytes` of bodies (a request read so far). */
async function untilHeld(bytes: number): Promise<void> {
  while (heldBodyBytes() < bytes) await new Promise((resolve) => setTimeout(resolve, 5));
}

export function defineBodyBudgetSuite(label: string, harness: HttpHarness): void {
  describe(`${label}: MAX_BUFFERED_BODY_BYTES`, () => {
    const budget = { MAX_BUFFERED_BODY_BYTES: String(1024 * KIB) };
    const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    const create = async (id: string) =>
      harness.fetch('/v1/sessions', { method: 'POST', headers, body: JSON.stringify({ id }) });
    const append = (id: string, body: ReturnType<typeof heldAppend>, declared: boolean) =>
      harness.fetchWithEnv(budget, `/v1/sessions/${id}/items`, {
        method: 'POST',
        headers: declared ? { ...headers, 'content-length': String(body.length) } : headers,
        body: body.stream,
        duplex: 'half',
      } as RequestInit);

    /** A new session's append of about `bytes`, sent until the process holds its first half. */
    const halfSent = async (bytes: number, declared: boolean) => {
      const id = freshId('budget');
      expect((await create(id)).status).toBe(201);
      const body = heldAppend(bytes);
      const response = append(id, body, declared);
      await untilHeld(body.length >> 1);
      return { id, body, response };
    };

    // Each case starts from no body held: a request of an earlier test of the file may still be
    // read on a loaded machine. One whose bytes are never released fails here.
    beforeEach(async () => {
      for (let waited = 0; heldBodyBytes() > 0 && waited < 10_000; waited += 5)
        await new Promise((resolve) => setTimeout(resolve, 5));
      expect(heldBodyBytes()).toBe(0);
    });

    for (const declared of [true, false]) {
      const how = declared ? 'Content-Length' : 'streamed';
      it(`answers 503 overloaded with Retry-After beyond the budget, and releases it (${how})`, async () => {
        const { id, body: first, response: firstResponse } = await halfSent(600 * KIB, declared);

        // 300 KiB held (the first half of 600 KiB): 800 KiB more does not fit 1 MiB; 200 KiB does.
        const refused = heldAppend(800 * KIB);
        refused.finish();
        const over = await append(id, refused, declared);
        expect(over.status).toBe(503);
        expect(over.headers.get('retry-after')).toBe('1');
        expect(((await over.json()) as any).error).toMatchObject({ code: 'overloaded' });
        const small = heldAppend(200 * KIB);
        small.finish();
        expect((await append(id, small, declared)).status).toBe(201);

        first.finish();
        expect((await firstResponse).status).toBe(201);
        const again = heldAppend(600 * KIB);
        again.finish();
        expect((await append(id, again, declared)).status).toBe(201);

        // A body that fails half-way frees its bytes as well.
        const failing = heldAppend(600 * KIB);
        const failed = append(id, failing, declared);
        await untilHeld(failing.length >> 1);
        failing.fail();
        expect((await failed).status).not.toBe(201);
        expect(heldBodyBytes()).toBe(0);
        const last = heldAppend(900 * KIB);
        last.finish();
        expect((await append(id, last, declared)).status).toBe(201);
        expect(heldBodyBytes()).toBe(0);
      });

      it(`counts a body by the bytes it sent: one that stalls holds no more of the budget (${how})`, async () => {
        // 900 KiB declared (or to come), half of it sent: the 450 KiB held leave room for 500 KiB.
        const { id, body: stalled, response: stalledResponse } = await halfSent(900 * KIB, declared);
        const beside = heldAppend(500 * KIB);
        beside.finish();
        const answer = await append(id, beside, declared);
        stalled.finish();
        expect((await stalledResponse).status).toBe(201);
        expect(answer.status).toBe(201);
        expect(heldBodyBytes()).toBe(0);
      });

      it(`never refuses the oldest body being received for a newer one's bytes (${how})`, async () => {
        // 900 KiB, half of it sent (450 KiB held); a newer 500 KiB fits beside and sends its first half.
        const { id, body: older, response: olderResponse } = await halfSent(900 * KIB, declared);
        const newer = heldAppend(500 * KIB);
        const newerResponse = append(id, newer, declared);
        await untilHeld((older.length >> 1) + (newer.length >> 1));
        // The older body's second half goes over the budget beside the newer's first: it is let in.
        older.finish();
        expect((await olderResponse).status).toBe(201);
        newer.finish();
        expect((await newerResponse).status).toBe(201);
        expect(heldBodyBytes()).toBe(0);
      });

      it(`lets one body larger than the budget in while no other is held (${how})`, async () => {
        const id = freshId('budget');
        expect((await create(id)).status).toBe(201);
        // 900 KiB (an item is at most 1 MiB) against a budget of 512 KiB.
        const alone = heldAppend(900 * KIB);
        alone.finish();
        const response = await harness.fetchWithEnv(
          { MAX_BUFFERED_BODY_BYTES: String(512 * KIB) },
          `/v1/sessions/${id}/items`,
          {
            method: 'POST',
            headers: declared ? { ...headers, 'content-length': String(alone.length) } : headers,
            body: alone.stream,
            duplex: 'half',
          } as RequestInit,
        );
        expect(response.status).toBe(201);
        expect(heldBodyBytes()).toBe(0);
      });
    }
  });
}
