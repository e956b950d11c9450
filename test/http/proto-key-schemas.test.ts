import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { headerLine } from '../support/export-lines.ts';
import { createClient, freshId, TOKEN } from './http-suite.ts';

// A key `__proto__` is refused where a schema would drop it (docs/API.md, "Conventions"), not
// inside a JSON Schema a request sends (a tool's `parameters`, a response format's `schema`),
// whose keys below its top level are kept as sent: a property may be named `__proto__`.
const api = createClient(
  appHarness(new MemoryStore(), { API_TOKEN: TOKEN, ALLOW_ANONYMOUS: 'false', DEFAULT_MODEL: 'echo' }),
);

const PARAMETERS = '{"type":"object","properties":{"__proto__":{"type":"string"}}}';
const TOOLS = `[{"type":"function","name":"set","parameters":${PARAMETERS}}]`;

describe('a property named __proto__ in a JSON Schema', () => {
  it("is a tool's parameter as sent, on a session and in an import of its export", async () => {
    const created = await api.post('/v1/sessions', `{"tools":${TOOLS}}`);
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(JSON.stringify(created.body.tools[0].parameters)).toBe(PARAMETERS);
    // Written as text: JSON.stringify of a parsed line would keep the key, but a literal would not.
    const header = `${headerLine(freshId('import')).replace('"tools":[]', `"tools":${TOOLS}`)}\n`;
    const imported = await api.post('/v1/sessions/import', header, { 'content-type': 'application/x-ndjson' });
    expect(imported.status, JSON.stringify(imported.body)).toBe(201);
    expect(JSON.stringify(imported.body.tools[0].parameters)).toBe(PARAMETERS);
  });

  it("is a facade tool's parameter and a response format's property as sent", async () => {
    const format = `{"type":"json_schema","name":"out","schema":${PARAMETERS}}`;
    const response = await api.post(
      '/v1/responses',
      `{"model":"echo","input":"hi","tools":${TOOLS},"text":{"format":${format}}}`,
    );
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    expect(JSON.stringify(response.body.tools[0].parameters)).toBe(PARAMETERS);
    const chatTools = `[{"type":"function","function":{"name":"set","parameters":${PARAMETERS}}}]`;
    const chat = await api.post(
      '/v1/chat/completions',
      `{"model":"echo","messages":[{"role":"user","content":"hi"}],"tools":${chatTools}}`,
    );
    expect(chat.status, JSON.stringify(chat.body)).toBe(200);
  });

  it("is refused at a schema's top level, which its record drops, and outside any schema", async () => {
    const tools = '[{"type":"function","name":"set","parameters":{"type":"object","__proto__":{}}}]';
    const refused = await api.post('/v1/sessions', `{"tools":${tools}}`);
    expect(refused.status).toBe(400);
    expect(refused.body.error.details.field).toBe('body.tools.0.parameters.__proto__');
    const metadata = await api.post('/v1/sessions', '{"metadata":{"schema":{"__proto__":"x"}}}');
    expect(metadata.status).toBe(400);
    expect(metadata.body.error.details.field).toBe('body.metadata.schema.__proto__');
  });
});
