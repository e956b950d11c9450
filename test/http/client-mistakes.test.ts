import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { TOKEN } from './http-suite.ts';

// Property: whatever a client sends, the answer is never a 5xx, and every error has the
// error shape. Bodies are arbitrary JSON, near-misses of the real shapes, and broken text.
const store = new MemoryStore();
const errors: unknown[] = [];
const app = createApp({
  store: () => store,
  readEnvironment: (c) => c.env ?? {},
  log: (_message, details) => errors.push(details),
});
const environment = { API_TOKEN: TOKEN };
const session = 'fuzzed';

async function send(method: string, path: string, body: string): Promise<Response> {
  return app.request(
    path,
    { method, headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body },
    environment,
  );
}

const item = fc.oneof(
  fc.record(
    {
      type: fc.constantFrom('message', 'mesage', 'function_call'),
      role: fc.constantFrom('user', 'assistant', 'system', 'tool', 7),
      content: fc.oneof(fc.string(), fc.integer()),
    },
    { requiredKeys: [] },
  ),
  fc.record(
    {
      type: fc.constant('function_call'),
      call_id: fc.string(),
      name: fc.string(),
      arguments: fc.oneof(fc.string(), fc.object()),
    },
    { requiredKeys: [] },
  ),
  fc.record(
    {
      type: fc.constant('function_call_output'),
      call_id: fc.string(),
      output: fc.oneof(fc.string(), fc.constant(null)),
    },
    { requiredKeys: [] },
  ),
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
    strategy_config: fc.oneof(
      fc.dictionary(
        fc.constantFrom('epoch_size', 'epoch_sise', 'max_tool_chars'),
        fc.oneof(fc.integer(), fc.double(), fc.string()),
      ),
      fc.jsonValue(),
    ),
    tools: fc.oneof(
      fc.array(fc.record({ type: fc.constant('function'), name: fc.string() }), { maxLength: 2 }),
      fc.jsonValue(),
    ),
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
    await app.request(
      '/v1/sessions',
      {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ id: session }),
      },
      environment,
    );
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

  it.each([
    ['items?limit=0', 'query.limit'],
    ['items?limit=1001', 'query.limit'],
    ['items?limit=1.5', 'query.limit'],
    ['items?before=0', 'query.before'],
    ['turns?limit=101', 'query.limit'],
    ['turns/0', 'param.turn'],
  ])('refuses %s at the edge with 400 naming %s (the session log does not validate it again)', async (path, field) => {
    const response = await app.request(
      `/v1/sessions/${session}/${path}`,
      { headers: { authorization: `Bearer ${TOKEN}` } },
      environment,
    );
    expect(response.status).toBe(400);
    const body = (await response.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('invalid_request');
    expect(body.error.message.startsWith(field)).toBe(true);
  });

  it.each([
    'limit=x',
    'limit=0',
    'before=-3',
    'before=99999999999999999999',
    'limit=1e3',
    'strategy_config=%7B',
    'strategies=%2C%2C',
    `strategy_config=${encodeURIComponent(`{"a":${'['.repeat(4000)}${']'.repeat(4000)}}`)}`,
    'strategy_config=%7B%22epoch_size%5Cu0000%22%3A1%7D',
  ])('GET with the query %s', async (query) => {
    for (const path of [`/v1/sessions/${session}/items?${query}`, `/v1/sessions/${session}/prompt?${query}`]) {
      const response = await app.request(path, { headers: { authorization: `Bearer ${TOKEN}` } }, environment);
      expect(response.status, path).toBeLessThan(500);
    }
  });

  // Where a value goes in each route's body; the checks run before any schema, so any field works.
  const placements: [string, string, (value: unknown) => unknown, string][] = [
    ['POST', '/v1/sessions', (value) => ({ metadata: value }), 'body.metadata'],
    ['PATCH', `/v1/sessions/${session}`, (value) => ({ metadata: value }), 'body.metadata'],
    [
      'POST',
      `/v1/sessions/${session}/turns`,
      (value) => ({ input: 'x', tools: [{ type: 'function', name: 't', parameters: value }] }),
      'body.tools.0.parameters',
    ],
    ['POST', `/v1/sessions/${session}/items`, (value) => ({ items: value }), 'body.items'],
    ['POST', `/v1/sessions/${session}/inbox`, (value) => ({ content: 'x', name: 'n', extra: value }), 'body.extra'],
    ['POST', `/v1/sessions/${session}/compact`, (value) => ({ prompt: value }), 'body.prompt'],
  ];

  it(
    'JSON nested deeper than 64 levels is a 400 naming the limit, at any depth, in any field of any ' + 'route',
    async () => {
      const nesting = fc.array(fc.boolean(), { minLength: 64, maxLength: 30_000 });
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...placements), nesting, async ([method, path, place], kinds) => {
          // `kinds` picks array or object per level; the body adds one level (or two, in tools).
          let value: unknown = 'leaf';
          for (const asArray of kinds) value = asArray ? [value] : { k: value };
          const response = await send(method, path, JSON.stringify(place(value)));
          expect(response.status).toBe(400);
          const parsed = (await response.json()) as {
            error: { code: string; message: string; details: { limit: number } };
          };
          expect(parsed.error.code).toBe('invalid_request');
          expect(parsed.error.details.limit).toBe(64);
          expect(parsed.error.message).toContain('64 levels');
        }),
        { numRuns: 40 },
      );
      expect(errors).toEqual([]);
    },
  );

  it('one NUL or lone surrogate anywhere in a body, key or value, is a 400 naming its path', async () => {
    const bad = fc
      .tuple(
        fc.string({ maxLength: 4 }),
        fc.constantFrom('\u0000', '\ud800', '\udbff', '\udc00', '\udfff'),
        fc.string({ maxLength: 4 }),
      )
      .map(([before, character, after]) => `${before}${character}${after}`);
    const walk = fc.array(fc.nat(), { maxLength: 6 });
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...placements),
        // A key `__proto__` is refused by a rule of its own (test/http/proto-key-schemas.test.ts) first.
        fc.jsonValue({ maxDepth: 4 }).filter((value) => !JSON.stringify(value).includes('"__proto__":')),
        walk,
        bad,
        fc.boolean(),
        async ([method, path, place, base], clean, steps, text, asKey) => {
          const { value, field } = inject(clean, steps, text, asKey);
          const response = await send(method, path, JSON.stringify(place(value)));
          expect(response.status).toBe(400);
          const parsed = (await response.json()) as {
            error: { code: string; message: string; details: { field: string } };
          };
          expect(parsed.error.code).toBe('invalid_request');
          expect(parsed.error.details.field).toBe([base, ...field].join('.'));
          expect(parsed.error.message).toMatch(/NUL|lone surrogate/);
        },
      ),
      { numRuns: 150 },
    );
    expect(errors).toEqual([]);
  });
});

/**
 * Puts `text` into a copy of `value` (as a key or a value) at the place `steps` walk to, and
 * returns the path of that key or value as the service names it.
 */
function inject(value: unknown, steps: number[], text: string, asKey: boolean): { value: unknown; field: string[] } {
  const [step, ...rest] = steps;
  const shown = JSON.stringify(text);
  if (Array.isArray(value)) {
    if (step !== undefined && value.length > 0) {
      const index = step % value.length;
      const inner = inject(value[index], rest, text, asKey);
      return {
        value: value.map((item, at) => (at === index ? inner.value : item)),
        field: [String(index), ...inner.field],
      };
    }
    return asKey
      ? { value: [...value, { [text]: 1 }], field: [String(value.length), shown] }
      : { value: [...value, text], field: [String(value.length)] };
  }
  if (typeof value === 'object' && value !== null) {
    const keys = Object.keys(value);
    if (step !== undefined && keys.length > 0) {
      const key = keys[step % keys.length]!;
      const inner = inject((value as Record<string, unknown>)[key], rest, text, asKey);
      return { value: { ...value, [key]: inner.value }, field: [key, ...inner.field] };
    }
    return asKey
      ? { value: { ...value, [text]: 1 }, field: [shown] }
      : { value: { ...value, bad: text }, field: ['bad'] };
  }
  return asKey ? { value: { [text]: value }, field: [shown] } : { value: text, field: [] };
}
