/**
 * A `fetch` for a model adapter whose provider's answers a test makes up, one a request, with no
 * server: for tests that run the adapter on fake timers (a deadline fired once a refusal was seen).
 */

/** How one request is answered: a response, or a failure as the fetch's. */
export type Answer = (init: RequestInit | undefined) => Promise<Response>;

/**
 * `answers` in turn, one a request (the last one again for every request after it). `answered(n)`
 * settles once `n` requests were answered and the adapter's own continuation of each has run;
 * `requests()` counts the requests made.
 */
export function scriptedFetch(answers: readonly Answer[]) {
  let count = 0;
  let done = 0;
  const waiting: (() => void)[] = [];
  const fetch = (async (_input: RequestInfo | URL, init?: RequestInit) => {
    const answer = answers[Math.min(count++, answers.length - 1)];
    if (!answer) throw new Error('no answers');
    const response = await answer(init);
    // Once the adapter's own continuation of this fetch has run.
    setImmediate(() => {
      done++;
      for (const wake of waiting.splice(0)) wake();
    });
    return response;
  }) as typeof globalThis.fetch;
  const answered = async (n = 1) => {
    while (done < n) await new Promise<void>((wake) => waiting.push(wake));
  };
  return { fetch, answered, requests: () => count };
}

/** A JSON answer of `status`. */
export const jsonAnswer =
  (status: number, body: unknown, headers: Record<string, string> = {}): Answer =>
  async () =>
    new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } });

/** Never answered: fails as an aborted fetch when the request's signal aborts. */
export const unanswered: Answer = (init) =>
  new Promise((_, reject) => {
    const signal = init?.signal;
    signal?.addEventListener('abort', () => reject(signal.reason ?? new DOMException('aborted', 'AbortError')), {
      once: true,
    });
  });

/** A server-sent events answer holding `text`. */
export const sseAnswer =
  (text: string): Answer =>
  async () =>
    new Response(text, { status: 200, headers: { 'content-type': 'text/event-stream' } });
