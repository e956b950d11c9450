import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { STATUS_BY_CODE } from '../../functions/error-handler.ts';
import { Metrics } from '../../functions/metrics.ts';
import { ERROR_CODES } from '../../lib/error-codes.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { sessionSchema } from '../../lib/session/fields.ts';
import { turnResponseSchema } from '../../lib/turn/wire.ts';

/**
 * docs/API.md against the running app: every route of /openapi.json is documented there,
 * every documented route is served, and every error code is documented with its status and
 * listed in the OpenAPI error schema.
 */

const TOKEN = 'api-doc-token';
const store = new MemoryStore();
// With metrics, as the Node and Deno entries build it (GET /metrics).
const app = createApp({
  store: () => store,
  readEnvironment: (c) => c.env ?? {},
  log: () => {},
  metrics: new Metrics(),
});
const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' };
const doc = await readFile(new URL('../../docs/API.md', import.meta.url), 'utf8');

/** Routes served outside the OpenAPI document (the document itself, its page, the inspector). */
const OUTSIDE_OPENAPI = new Set(['GET /openapi.json', 'GET /docs', 'GET /ui']);

/** The first cell of every table row that names a route: `` `GET /v1/sessions/{id}` ``. */
function documentedRoutes(text: string): string[] {
  const routes: string[] = [];
  for (const match of text.matchAll(/^\| `((?:GET|POST|PATCH|PUT|DELETE) \/[^`]*)` \|/gm)) routes.push(match[1]!);
  return routes;
}

async function openApi(): Promise<{ paths: Record<string, Record<string, unknown>>; components: any }> {
  const response = await app.request('/openapi.json', { headers: { authorization: `Bearer ${TOKEN}` } }, environment);
  expect(response.status).toBe(200);
  return (await response.json()) as never;
}

function openApiRoutes(document: { paths: Record<string, Record<string, unknown>> }): string[] {
  return Object.entries(document.paths).flatMap(([path, operations]) =>
    Object.keys(operations).map((method) => `${method.toUpperCase()} ${path}`),
  );
}

describe('docs/API.md', () => {
  it('documents every route of /openapi.json', async () => {
    const documented = new Set(documentedRoutes(doc));
    const missing = openApiRoutes(await openApi()).filter((route) => !documented.has(route));
    expect(missing).toEqual([]);
  });

  it('documents no route the service does not serve', async () => {
    const served = new Set(openApiRoutes(await openApi()));
    const documented = documentedRoutes(doc);
    expect(documented.length).toBeGreaterThan(30);
    expect(documented.filter((route) => !served.has(route) && !OUTSIDE_OPENAPI.has(route))).toEqual([]);
    for (const route of OUTSIDE_OPENAPI) {
      expect(documented).toContain(route);
      const [method, path] = route.split(' ') as [string, string];
      const response = await app.request(
        path,
        { method, headers: { authorization: `Bearer ${TOKEN}` } },
        { ...environment, PUBLIC_DOCS: 'true' },
      );
      expect(response.status, route).toBe(200);
    }
  });

  it('lists every error code with the status of the error table', () => {
    for (const code of ERROR_CODES) {
      const row = new RegExp(`^\\| \`${code}\` \\| (\\d{3}) \\|`, 'm').exec(doc);
      expect(row, code).not.toBeNull();
      expect(Number(row![1]), code).toBe(STATUS_BY_CODE[code]);
    }
    const documentedCodes = [...doc.matchAll(/^\| `([a-z_]+)` \| \d{3} \|/gm)].map((match) => match[1]);
    expect(documentedCodes.sort()).toEqual([...ERROR_CODES].sort());
  });

  it('has every error code in the OpenAPI error schema', async () => {
    const document = await openApi();
    const codes = document.components.schemas.Error.properties.error.properties.code.enum as string[];
    expect([...codes].sort()).toEqual([...ERROR_CODES].sort());
  });
});

describe('statuses in /openapi.json', () => {
  // A spent budget refuses a compaction 402 as it does a turn; the turn-taking routes answer 429.
  it.each([
    ['/v1/sessions/{id}/compact', '402'],
    ['/v1/responses/compact', '402'],
    ['/v1/sessions/{id}/turns', '429'],
    ['/v1/responses', '429'],
    ['/v1/chat/completions', '429'],
  ])('POST %s lists %s', async (path, status) => {
    const operation = (await openApi()).paths[path]!.post as { responses: Record<string, unknown> };
    expect(Object.keys(operation.responses)).toContain(status);
  });
});

describe('response headers in /openapi.json', () => {
  // Every answer carries x-request-id (docs/API.md, Headers): each response the document lists
  // says so, beside the headers a route declares of its own; the public copy is the same.
  it('declare x-request-id on every response of every operation', async () => {
    const document = await openApi();
    expect(document.components.headers?.['x-request-id']?.schema).toEqual({
      type: 'string',
      pattern: '^req_[0-9a-f]{24}$',
    });
    const without: string[] = [];
    for (const [path, operations] of Object.entries(document.paths))
      for (const [method, operation] of Object.entries(
        operations as Record<string, { responses: Record<string, any> }>,
      ))
        for (const [status, response] of Object.entries(operation.responses))
          if (response.headers?.['x-request-id']?.$ref !== '#/components/headers/x-request-id')
            without.push(`${method.toUpperCase()} ${path} ${status}`);
    expect(without).toEqual([]);
    const session = document.paths['/v1/sessions/{id}']!.get as { responses: Record<string, any> };
    expect(Object.keys(session.responses['200'].headers)).toEqual(
      expect.arrayContaining(['Tailgate-Max-Body-Bytes', 'x-request-id']),
    );
    const open = await app.request('/openapi.json', {}, { ...environment, PUBLIC_DOCS: 'true' });
    expect(await open.json()).toEqual(document);
  });
});

describe('content parts in /openapi.json', () => {
  /** Every object schema in the document with a property `type` whose enum is `[type]`. */
  function partSchemas(node: unknown, type: string, found: any[] = []): any[] {
    if (!node || typeof node !== 'object') return found;
    const schema = node as any;
    if (schema.properties?.type?.enum?.length === 1 && schema.properties.type.enum[0] === type) found.push(schema);
    for (const value of Object.values(schema)) partSchemas(value, type, found);
    return found;
  }

  it.each([
    { type: 'input_image', fields: ['image_url', 'detail', 'blob', 'media_type', 'bytes', 'width', 'height'] },
    { type: 'input_file', fields: ['filename', 'file_data', 'file_url', 'blob', 'media_type', 'bytes'] },
  ])('describe each field of $type where items are stored and listed', async ({ type, fields }) => {
    const stored = partSchemas((await openApi()).components.schemas.TurnResponse, type);
    expect(stored.length).toBeGreaterThan(0);
    for (const field of fields) expect(stored[0].properties[field].description, field).toMatch(/\w+ \w+/);
    if (type === 'input_image') expect(stored[0].properties.detail.description).toMatch(/85 tokens/);
  });

  it('describe the flag of the item an answer stopped in where items are listed and answered', async () => {
    const { schemas } = (await openApi()).components;
    expect(schemas.Item.properties.incomplete.description).toMatch(/stopped/);
    const output =
      schemas.TurnResponse.properties.output.items.anyOf ?? schemas.TurnResponse.properties.output.items.oneOf;
    for (const item of output) expect(item.properties.incomplete.description).toMatch(/stopped/);
  });

  it('describe the blob route answering each media type it serves', async () => {
    const ok = (await openApi()).paths['/v1/sessions/{id}/blobs/{sha256}']!.get as any;
    expect(Object.keys(ok.responses['200'].content).sort()).toEqual(
      ['application/pdf', 'image/gif', 'image/jpeg', 'image/png', 'image/webp', 'text/plain'].sort(),
    );
  });
});

describe('the wire schemas lib derives its types from', () => {
  const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
  const post = (path: string, body: unknown) =>
    app.request(path, { method: 'POST', headers, body: JSON.stringify(body) }, environment);

  it('describe what the routes answer: a session, and a turn with a tool call and with text', async () => {
    const created = await post('/v1/sessions', { id: 'wire', tools: [{ type: 'function', name: 'get_weather' }] });
    expect(created.status).toBe(201);
    expect(sessionSchema.strict().parse(await created.json()).counts).toEqual({ items: 0, turns: 0, tool_calls: 0 });

    const call = await post('/v1/sessions/wire/turns', { input: 'call get_weather {"city":"Paris"}' });
    expect(call.status).toBe(200);
    const called = turnResponseSchema.strict().parse(await call.json());
    expect(called.output).toEqual([expect.objectContaining({ type: 'function_call', name: 'get_weather', seq: 2 })]);

    const answer = await post('/v1/sessions/wire/turns', {
      input: [
        {
          type: 'function_call_output',
          call_id: called.output[0]!.type === 'function_call' ? called.output[0]!.call_id : '',
          output: '18C',
        },
      ],
    });
    expect(answer.status).toBe(200);
    const answered = turnResponseSchema.strict().parse(await answer.json());
    expect(answered.output[0]).toMatchObject({ type: 'message', role: 'assistant', seq: 4 });
    expect(answered.context.tool_calls_total).toBe(1);
  });
});
