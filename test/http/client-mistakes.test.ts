import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { TOKEN } from './http-suite.ts';

// Property: whatever a client sends, the answer is never a 5xx, and every error has the
// error shape. Bodies are arbitrary JSON, near-misses of the real shapes, and broken text.
const store = new MemoryStore();
const errors: unknown[] = [];
const app = createApp({ store: () => store, readEnvironment: (c) => c.env ?? {}, log: (_message, details) => errors.push(details) });
const environment = { API_TOKEN: TOKEN };
const session = 'fuzzed';

async function send(method: string, path: string, body: string): Promise<Response> {
  return app.request(path, { method, headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body }, environment);
}

const item = fc.oneof(
  fc.record({ type: fc.constantFrom('message', 'mesage', 'function_call'), role: fc.constantFrom('user', 'assistant', 'system', 'tool', 7), content: fc.oneof(fc.string(), fc.integer()) }, { requiredKeys: [] }),
  fc.record({ type: fc.constant('function_call'), call_id: fc.string(), name: fc.string(), arguments: fc.oneof(fc.string(), fc.object()) }, { requiredKeys: [] }),
  fc.record({ type: fc.constant('function_call_output'), call_id: fc.string(), output: fc.oneof(fc.string(), fc.constant(null)) }, { requiredKeys: [] }),
  fc.jsonValue(),
);
const nearMiss = fc.record(
  {
    id: fc.oneof(fc.string({ maxLength: 70 }), fc.integer()),
    input: fc.oneof(fc.string(), fc.array(item, { maxLength: 3 }), fc.jsonValue()),
    items: fc.oneof(fc.array(item, { maxLength: 3 }), fc.jsonValue()),
    content: fc.oneof(fc.string(), fc.jsonValue()),
    name: fc.oneof(fc.string({ maxLength: 210 }), fc.constantFrom('.x', 'abort', 'a/b', '')),
    strategies: fc.oneof(fc.string(), fc.array(fc.string(), { maxLength: 3 }), fc.jsonValue()),
    strategy_config: fc.oneof(fc.dictionary(fc.constantFrom('epoch_size', 'epoch_sise', 'max_tool_chars'), fc.oneof(fc.integer(), fc.double(), fc.string())), fc.jsonValue()),
    tools: fc.oneof(fc.array(fc.record({ type: fc.constant('function'), name: fc.string() }), { maxLength: 2 }), fc.jsonValue()),
    model: fc.oneof(fc.constantFrom('echo', 'nosuch:x', 'openai:', ':', 'anthropic:claude'), fc.string()),
    stream: fc.oneof(fc.boolean(), fc.jsonValue()),
    temperature: fc.oneof(fc.double(), fc.string()),
    max_output_tokens: fc.oneof(fc.integer(), fc.double()),
    metadata: fc.jsonValue(),
  },
  { requiredKeys: [] },
);
const body = fc.oneof(
  nearMiss.map((value) => JSON.stringify(value)),
  fc.jsonValue().map((value) => JSON.stringify(value)),
  fc.string(),
);

describe('client mistakes never get a 5xx', () => {
  it.each([
    ['POST', '/v1/sessions'],
    ['PATCH', `/v1/sessions/${session}`],
    ['POST', `/v1/sessions/${session}/turns`],
    ['POST', `/v1/sessions/${session}/items`],
    ['POST', `/v1/sessions/${session}/inbox`],
  ])('%s %s', async (method, path) => {
    await app.request('/v1/sessions', { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ id: session }) }, environment);
    await fc.assert(
      fc.asyncProperty(body, async (text) => {
        const response = await send(method, path, text);
        expect(response.status, text).toBeLessThan(500);
        if (response.status >= 400) {
          const parsed = (await response.json()) as { error: { code: string; message: string } };
          expect(typeof parsed.error.code).toBe('string');
          expect(typeof parsed.error.message).toBe('string');
        } else {
          await response.body?.cancel();
        }
      }),
      { numRuns: 120 },
    );
    expect(errors).toEqual([]);
  });

  it.each(['limit=x', 'limit=0', 'before=-3', 'before=99999999999999999999', 'limit=1e3', 'strategy_config=%7B', 'strategies=%2C%2C'])(
    'GET with the query %s',
    async (query) => {
      for (const path of [`/v1/sessions/${session}/items?${query}`, `/v1/sessions/${session}/prompt?${query}`]) {
        const response = await app.request(path, { headers: { authorization: `Bearer ${TOKEN}` } }, environment);
        expect(response.status, path).toBeLessThan(500);
      }
    },
  );
});
