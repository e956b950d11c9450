import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test';
import { expect, it } from 'vitest';
import worker from '../../bench/counting-worker.ts';
import { TOKEN } from '../http/http-suite.ts';
import { bindings } from './worker-harness.ts';

// The benchmark's worker (bench/counting-worker.ts, driven by bench/workerd-driver.ts): a turn's
// response carries its storage counts, but the prompt the turn handed its model is measured
// only on the request after it, so the turn's own time does not include measuring it.
async function send(method: string, path: string, body?: unknown): Promise<{ response: Response; text: string }> {
  const context = createExecutionContext();
  const response = await worker.fetch(
    new Request(`https://tailgate.test${path}`, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    }) as never,
    bindings as never,
    context,
  );
  const text = await response.text();
  await waitOnExecutionContext(context);
  return { response, text };
}

async function promptBytes(): Promise<unknown> {
  const { response, text } = await send('GET', '/__bench/prompt-bytes');
  expect(response.status).toBe(200);
  return (JSON.parse(text) as { promptBytes: unknown }).promptBytes;
}

it("answers a turn's prompt bytes on a later request, not in the turn's response", async () => {
  const id = `bench-worker-${crypto.randomUUID()}`;
  expect((await send('POST', '/v1/sessions', { id, instructions: 'Be brief.' })).response.status).toBe(201);
  const turn = await send('POST', `/v1/sessions/${id}/turns`, { model: 'echo', input: 'hello there' });
  expect(turn.response.status, turn.text).toBe(200);
  expect(JSON.parse(turn.response.headers.get('x-bench-storage') ?? '{}')).toMatchObject({ get: expect.any(Number) });
  expect(turn.response.headers.get('x-bench-prompt-bytes')).toBeNull();
  const bytes = await promptBytes();
  // The JSON of the prompt holds at least the instructions and the input.
  expect(bytes).toEqual(expect.any(Number));
  expect(bytes as number).toBeGreaterThan('Be brief.hello there'.length);
  expect(await promptBytes()).toBe(bytes);

  // A request that handed no model a prompt answers null.
  const appended = await send('POST', `/v1/sessions/${id}/items`, {
    items: [{ type: 'message', role: 'user', content: 'later' }],
  });
  expect(appended.response.status, appended.text).toBe(201);
  expect(await promptBytes()).toBeNull();
});
