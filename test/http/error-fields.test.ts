import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { headerLine, itemLine } from '../support/export-lines.ts';
import { createClient, freshId, TOKEN } from './http-suite.ts';

// `details.field` of a 400 follows docs/API.md ("Conventions"): a field's path inside the body or
// query, dotted, array positions as numbers, whichever check refuses it (a schema, a strategy
// threshold, the open calls); the JSON check that runs before any schema starts it with `body.`;
// an import's starts with `line <n>`.
const api = createClient(
  appHarness(new MemoryStore(), { API_TOKEN: TOKEN, ALLOW_ANONYMOUS: 'false', DEFAULT_MODEL: 'echo' }),
);

async function fieldOf(response: Promise<{ status: number; body: any }>): Promise<string> {
  const { status, body } = await response;
  expect(status, JSON.stringify(body)).toBe(400);
  expect(body.error.code).toBe('invalid_request');
  return body.error.details.field;
}

describe('details.field names the offending field one way', () => {
  it('in a schema refusal, the path inside the body', async () => {
    expect(await fieldOf(api.post('/v1/sessions', { colour: 'red' }))).toBe('colour');
    const id = await api.session();
    const input = [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 7 }] }];
    expect(await fieldOf(api.post(`/v1/sessions/${id}/turns`, { input }))).toBe('input.0.content.0.text');
  });

  it('in a built-in tool, its type, not a field of its kind', async () => {
    const tools = [{ type: 'file_search', vector_store_ids: ['vs_1'] }];
    expect(await fieldOf(api.post('/v1/sessions', { tools }))).toBe('tools.0.type');
  });

  it('in a strategy threshold, the same path, whether a schema or the thresholds refuse it', async () => {
    const id = await api.session();
    const turns = `/v1/sessions/${id}/turns`;
    // A value that is not a number fails the schema; a key that is not a threshold, the thresholds.
    expect(await fieldOf(api.post(turns, { input: 'x', strategy_config: { epoch_size: 'ten' } }))).toBe(
      'strategy_config.epoch_size',
    );
    expect(await fieldOf(api.post(turns, { input: 'x', strategy_config: { epoch_sise: 10 } }))).toBe(
      'strategy_config.epoch_sise',
    );
    expect(await fieldOf(api.post(turns, { input: 'x', strategy_config: { max_tool_calls: 1.5 } }))).toBe(
      'strategy_config.max_tool_calls',
    );
    expect(await fieldOf(api.patch(`/v1/sessions/${id}`, { strategy_config: { epoch_sise: 10 } }))).toBe(
      'strategy_config.epoch_sise',
    );
    expect(await fieldOf(api.post('/v1/sessions', { strategy_config: { epoch_sise: 10 } }))).toBe(
      'strategy_config.epoch_sise',
    );
    const query = new URLSearchParams({ strategy_config: JSON.stringify({ epoch_sise: 10 }) });
    expect(await fieldOf(api.get(`/v1/sessions/${id}/prompt?${query}`))).toBe('strategy_config.epoch_sise');
  });

  it('in a strategy threshold, a message starting body. (a preview: query.), whichever check refuses it', async () => {
    const id = await api.session();
    const message = async (response: Promise<{ status: number; body: any }>) => (await response).body.error.message;
    // A value that is not a number fails the schema; a key that is not a threshold, the thresholds.
    for (const [config, rest] of [
      [{ epoch_size: 'ten' }, 'epoch_size: Invalid input: expected number, received string'],
      [{ epoch_sise: 10 }, 'epoch_sise: unknown key'],
    ] as const) {
      const body = { strategy_config: config };
      for (const refused of [
        api.post('/v1/sessions', body),
        api.patch(`/v1/sessions/${id}`, body),
        api.post(`/v1/sessions/${id}/turns`, { input: 'x', ...body }),
      ])
        expect(await message(refused)).toBe(`body.strategy_config.${rest}`);
      const query = new URLSearchParams({ strategy_config: JSON.stringify(config) });
      expect(await message(api.get(`/v1/sessions/${id}/prompt?${query}`))).toBe(`query.strategy_config.${rest}`);
    }
    expect((await api.get(`/v1/sessions/${id}`)).body.counts.turns).toBe(0);
  });

  it("in a turn's or a preview's context_limit or model, that field, its message starting with it", async () => {
    const id = await api.session();
    const turns = `/v1/sessions/${id}/turns`;
    const prompt = (config: unknown) =>
      api.get(`/v1/sessions/${id}/prompt?${new URLSearchParams({ strategy_config: JSON.stringify(config) })}`);
    for (const context_limit of ['big', -1, 1.5, null]) {
      for (const refused of [
        await api.post(turns, { input: 'x', strategy_config: { context_limit } }),
        await prompt({ context_limit }),
      ]) {
        expect(await fieldOf(Promise.resolve(refused))).toBe('strategy_config.context_limit');
        expect(refused.body.error.message).toMatch(/^(body|query)\.strategy_config\.context_limit: /);
      }
    }
    const unknown = await api.post(turns, { input: 'x', model: 'nosuch' });
    expect(await fieldOf(Promise.resolve(unknown))).toBe('model');
    expect(unknown.body.error.message).toMatch(/^model: unknown model "nosuch"/);
    const empty = await api.post(turns, { input: 'x', model: '' });
    expect(await fieldOf(Promise.resolve(empty))).toBe('model');
    expect(empty.body.error.message).toMatch(/^body\.model: /);
    // A known provider without its key is the operator's (503), named the same way.
    const unconfigured = await api.post(turns, { input: 'x', model: 'anthropic:c' });
    expect(unconfigured.status).toBe(503);
    expect(unconfigured.body.error).toMatchObject({ code: 'not_configured', details: { field: 'model' } });
    expect(unconfigured.body.error.message).toMatch(/^model: /);
    expect((await api.get(`/v1/sessions/${id}`)).body.counts.turns).toBe(0);
  });

  it('in a reserve leaving context_limit no room, the key the request set, judged over every layer', async () => {
    const id = await api.session();
    // The message, past its reason, which starts with the location and details.field.
    const refusal = async (response: Promise<{ status: number; body: any }>) => {
      const { status, body } = await response;
      expect(status, JSON.stringify(body)).toBe(400);
      expect(body.error.code).toBe('invalid_request');
      const message: string = body.error.message;
      expect(message.replace(/^(body|query)\./, '').startsWith(`${body.error.details.field}: `)).toBe(true);
      return message.replace(/ \(no room .*\)$/, '');
    };
    const preview = (config: unknown) =>
      api.get(`/v1/sessions/${id}/prompt?${new URLSearchParams({ strategy_config: JSON.stringify(config) })}`);
    const reserve = (at: string) => `${at}.strategy_config.response_reserve: 200 must be less than context_limit 100`;
    // Of an empty session: its prompt (0 tokens) is not what is refused.
    expect(await refusal(preview({ context_limit: 100, response_reserve: 200 }))).toBe(reserve('query'));
    const both = { strategy_config: { context_limit: 100, response_reserve: 200 } };
    for (const refused of [
      api.post('/v1/sessions', both),
      api.patch(`/v1/sessions/${id}`, both),
      api.post(`/v1/sessions/${id}/turns`, { input: 'x', ...both }),
      api.post(`/v1/sessions/${id}/turns`, { input: 'x', background: true, ...both }),
    ])
      expect(await refusal(refused)).toBe(reserve('body'));
    // A session's limit and a request's reserve (or the reverse) are judged together; equal leaves no room either.
    expect((await api.patch(`/v1/sessions/${id}`, { strategy_config: { context_limit: 100 } })).status).toBe(200);
    const equal = { strategy_config: { response_reserve: 100 } };
    expect(await refusal(api.post(`/v1/sessions/${id}/turns`, { input: 'x', ...equal }))).toBe(
      "body.strategy_config.response_reserve: 100 must be less than context_limit 100 (the session's)",
    );
    expect(await refusal(preview({ response_reserve: 100 }))).toMatch(/^query\.strategy_config\.response_reserve: /);
    expect((await api.patch(`/v1/sessions/${id}`, { strategy_config: { response_reserve: 200 } })).status).toBe(200);
    const limit = { strategy_config: { context_limit: 200 } };
    expect(await refusal(api.post(`/v1/sessions/${id}/turns`, { input: 'x', ...limit }))).toBe(
      "body.strategy_config.context_limit: 200 must be greater than response_reserve 200 (the session's)",
    );
    expect((await api.get(`/v1/sessions/${id}`)).body.counts.turns).toBe(0);
    // Room left, the turn runs.
    const room = { strategy_config: { context_limit: 300 } };
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'x', ...room })).status).toBe(200);
  });

  it('in a 413 whose reserve leaves no room, a message naming no negative token count', async () => {
    const id = await api.session({ strategy_config: { context_limit: 100 } });
    // max_output_tokens raises the reserve past the window.
    const refused = await api.post(`/v1/sessions/${id}/turns`, { input: 'x', max_output_tokens: 200 });
    expect(refused.status, JSON.stringify(refused.body)).toBe(413);
    expect(refused.body.error.message).toMatch(
      /^the prompt needs \d+ tokens, but context_limit 100 - response_reserve 200 leaves none; the largest is /,
    );
    expect(refused.body.error.message).not.toMatch(/-\d/);
  });

  it('in an output answering no open call, the path of its call_id', async () => {
    const id = await api.session();
    const input = [{ type: 'function_call_output', call_id: 'call_none', output: 'x' }];
    expect(await fieldOf(api.post(`/v1/sessions/${id}/turns`, { input }))).toBe('input.0.call_id');
  });

  it('in an append, the path in its items, as an image refused there is named', async () => {
    const id = await api.session();
    const items = `/v1/sessions/${id}/items`;
    const note = { type: 'message', role: 'user', content: 'x' };
    const output = { type: 'function_call_output', call_id: 'call_none', output: 'x' };
    const unanswered = await api.post(items, { items: [note, output] });
    expect(await fieldOf(Promise.resolve(unanswered))).toBe('items.1.call_id');
    expect(unanswered.body.error.message).toBe(
      'items[1].call_id: no open function_call with call_id call_none (unknown, or answered already)',
    );
    const call = { type: 'function_call', call_id: 'call_twice', name: 'f', arguments: '{}' };
    const reopened = await api.post(items, { items: [note, call, call] });
    expect(await fieldOf(Promise.resolve(reopened))).toBe('items.2.call_id');
    expect(reopened.body.error.message).toBe('items[2].call_id: a call with call_id call_twice is already open');
    expect((await api.get(`/v1/sessions/${id}`)).body.counts.items).toBe(0);
  });

  it('in the JSON check before any schema, the path with body. before it', async () => {
    expect(await fieldOf(api.post('/v1/sessions', { metadata: { note: 'a\u0000b' } }))).toBe('body.metadata.note');
  });

  it('in a key __proto__, which a schema would drop unseen, the path of that key', async () => {
    const id = await api.session();
    const patched = api.patch(`/v1/sessions/${id}`, '{"strategy_config":{"__proto__":{"epoch_size":-1}}}');
    expect(await fieldOf(patched)).toBe('body.strategy_config.__proto__');
    expect((await patched).body.error.message).toBe('body.strategy_config.__proto__: the key __proto__ is not taken');
    expect(await fieldOf(api.post('/v1/sessions', '{"metadata":{"__proto__":"x"}}'))).toBe('body.metadata.__proto__');
    expect((await api.get(`/v1/sessions/${id}`)).body.strategy_config).toEqual({});
  });

  it("in a body that is not JSON, body, with the parser's reason", async () => {
    const id = await api.session();
    for (const raw of ['{"input": ', '{"input": "a",}', '{"input": "a"} x']) {
      const response = api.post(`/v1/sessions/${id}/turns`, raw);
      expect(await fieldOf(response)).toBe('body');
      expect((await response).body.error.message).toMatch(/^body: not JSON \(.+\)$/);
    }
    expect((await api.get(`/v1/sessions/${id}`)).body.counts.items).toBe(0);
  });

  it("in an import, the line and then the field, the header's config included", async () => {
    const header = (fields: Record<string, unknown>) =>
      `${JSON.stringify({ ...JSON.parse(headerLine(freshId('import'))), ...fields })}\n`;
    const send = (text: string) => api.post('/v1/sessions/import', text, { 'content-type': 'application/x-ndjson' });
    expect(await fieldOf(send(header({ created_at: 'yesterday' })))).toBe('line 1.created_at');
    expect(await fieldOf(send(header({ strategy_config: { epoch_sise: 10 } })))).toBe(
      'line 1.strategy_config.epoch_sise',
    );
    expect(await fieldOf(send(header({ model: 'nosuch:model' })))).toBe('line 1.model');
    expect(await fieldOf(send(header({ colour: 'red' })))).toBe('line 1.colour');
    const roomless = await send(header({ strategy_config: { context_limit: 100, response_reserve: 200 } }));
    expect(await fieldOf(Promise.resolve(roomless))).toBe('line 1.strategy_config.response_reserve');
    expect(roomless.body.error.message).toMatch(/^line 1\.strategy_config\.response_reserve: 200 must be less than /);
  });

  it("in an import's line, the words a body's refusal has: the innermost field, required, unknown field", async () => {
    const id = freshId('import');
    const send = async (line: string) => {
      const { status, body } = await api.post('/v1/sessions/import', `${headerLine(id)}\n${line}\n`, {
        'content-type': 'application/x-ndjson',
      });
      expect(status, JSON.stringify(body)).toBe(400);
      return { message: body.error.message, field: body.error.details.field };
    };
    const text = { type: 'message', role: 'user', content: [{ type: 'input_text', text: 7 }] };
    const turn = await api.post(`/v1/sessions/${await api.session()}/turns`, { input: [text] });
    expect(turn.body.error.message).toMatch(/^body\.input\[0\]\.content\[0\]\.text: (.+)$/);
    const reason = turn.body.error.message.slice(turn.body.error.message.indexOf(': ') + 2);
    expect(await send(itemLine(1, text))).toEqual({
      message: `line 2.content[0].text: ${reason}`,
      field: 'line 2.content.0.text',
    });
    expect(await send(itemLine(1, { type: 'message', role: 'user' }))).toEqual({
      message: 'line 2.content: required',
      field: 'line 2.content',
    });
    expect(await send(itemLine(1, { type: 'function_call_output', call_id: 'c' }))).toEqual({
      message: 'line 2.output: required',
      field: 'line 2.output',
    });
    const { created_at: _created, ...header } = JSON.parse(headerLine(id));
    const headerless = await api.post('/v1/sessions/import', `${JSON.stringify(header)}\n`, {
      'content-type': 'application/x-ndjson',
    });
    expect(headerless.body.error).toMatchObject({
      message: 'line 1.created_at: required',
      details: { field: 'line 1.created_at' },
    });
    expect(await send(itemLine(1, { type: 'message', role: 'user', content: 'x', colour: 'red' }))).toEqual({
      message: 'line 2.colour: unknown field',
      field: 'line 2.colour',
    });
    expect((await api.get(`/v1/sessions/${id}`)).status).toBe(404);
  });

  it("in an import's notice, a name or stored_as longer than a posted name, before any write", async () => {
    const id = freshId('import');
    const notice = (fields: Record<string, string>) =>
      JSON.stringify({
        type: 'notice',
        name: 'n1',
        stored_as: 'n1',
        posted_at: '2026-01-01T00:00:00.000Z',
        delivered_at: '2026-01-01T00:00:00.000Z',
        turn: null,
        content: 'x',
        ...fields,
      });
    const send = (line: string) =>
      api.post('/v1/sessions/import', `${headerLine(id)}\n${line}\n`, { 'content-type': 'application/x-ndjson' });
    const name = await send(notice({ name: '\u00e9'.repeat(101) }));
    expect(name.status).toBe(400);
    expect(name.body.error).toMatchObject({
      code: 'invalid_request',
      message: 'line 2.name: must have at most 200 bytes (UTF-8)',
      details: { field: 'line 2.name' },
    });
    expect(await fieldOf(send(notice({ stored_as: 's'.repeat(1024) })))).toBe('line 2.stored_as');
    expect((await api.get(`/v1/sessions/${id}`)).status).toBe(404);
  });

  it("in an import's header, a message that starts with the field, as every line's does", async () => {
    const header = (fields: Record<string, unknown>) =>
      `${JSON.stringify({ ...JSON.parse(headerLine(freshId('import'))), ...fields })}\n`;
    const send = async (fields: Record<string, unknown>) =>
      (await api.post('/v1/sessions/import', header(fields), { 'content-type': 'application/x-ndjson' })).body.error;
    expect(await send({ strategy_config: { epoch_sise: 10 } })).toMatchObject({
      message: 'line 1.strategy_config.epoch_sise: unknown key',
      details: { field: 'line 1.strategy_config.epoch_sise' },
    });
    expect(await send({ model: 'nosuch:model' })).toMatchObject({
      message: expect.stringMatching(/^line 1\.model: unknown model "nosuch:model"/),
      details: { field: 'line 1.model' },
    });
    expect(await send({ metadata: { note: 'x'.repeat(70_000) } })).toMatchObject({
      message: expect.stringMatching(/^line 1\.metadata is \d+ bytes; at most \d+ are allowed/),
      details: { field: 'line 1.metadata' },
    });
  });

  it('an unknown model says how a model is written, and a known provider without a model name says so', async () => {
    const id = await api.session();
    const turns = `/v1/sessions/${id}/turns`;
    const bare = await api.post(turns, { input: 'x', model: 'nosuch' });
    expect(bare.body.error.message).toMatch(
      /^model: unknown model "nosuch"; known providers: .*; write echo or <provider>:<model>$/,
    );
    const unnamed = await api.post(turns, { input: 'x', model: 'openai-compatible:' });
    expect(unnamed.body.error.message).toMatch(
      /^model: unknown model "openai-compatible:"; known .*; "openai-compatible:" names no model after its provider$/,
    );
  });

  it('in an unknown model and a fork point the session lacks, a message that starts with the field', async () => {
    const refusal = async (response: Promise<{ status: number; body: any }>) => {
      const { status, body } = await response;
      expect(status, JSON.stringify(body)).toBe(400);
      return { message: body.error.message, field: body.error.details.field };
    };
    const unknown = /^model: unknown model "nosuch"; known providers: /;
    expect(await refusal(api.post('/v1/sessions', { model: 'nosuch' }))).toEqual({
      message: expect.stringMatching(unknown),
      field: 'model',
    });
    const id = await api.session();
    expect(await refusal(api.patch(`/v1/sessions/${id}`, { model: 'nosuch' }))).toMatchObject({
      message: expect.stringMatching(unknown),
    });
    const turns = `/v1/sessions/${id}/turns`;
    expect(await refusal(api.post(turns, { input: 'x', model: 'nosuch' }))).toMatchObject({
      message: expect.stringMatching(unknown),
    });
    expect((await api.post(turns, { input: 'x' })).status).toBe(200);
    const fork = `/v1/sessions/${id}/fork`;
    expect(await refusal(api.post(fork, { at_turn: 9 }))).toEqual({
      message: `at_turn: turn 9 is not in session ${id}`,
      field: 'at_turn',
    });
    expect(await refusal(api.post(fork, { at_seq: 1 }))).toEqual({
      message: `at_seq: seq 1 does not end a turn or an append of session ${id}`,
      field: 'at_seq',
    });
    expect(await refusal(api.post(fork, { at_seq: 9 }))).toEqual({
      message: `at_seq: seq 9 is not in session ${id}`,
      field: 'at_seq',
    });
  });

  it('in an unknown strategy, the list or its position, in a create, a patch, a turn and an import', async () => {
    const refused = async (response: Promise<{ status: number; body: any }>) => {
      const { status, body } = await response;
      expect(status, JSON.stringify(body)).toBe(400);
      expect(body.error.code).toBe('unknown_strategy');
      expect(body.error.details.known).toContain('inbox');
      return { message: body.error.message, field: body.error.details.field };
    };
    const unknown = 'unknown strategy "nosuch"; known strategies: ';
    expect(await refused(api.post('/v1/sessions', { strategies: 'inbox,nosuch' }))).toEqual({
      message: expect.stringMatching(new RegExp(`^strategies: ${unknown}`)),
      field: 'strategies',
    });
    expect(await refused(api.post('/v1/sessions', { strategies: ['inbox', 'nosuch'] }))).toEqual({
      message: expect.stringMatching(/^strategies\[1\]: unknown strategy "nosuch"/),
      field: 'strategies.1',
    });
    const id = await api.session();
    expect(await refused(api.patch(`/v1/sessions/${id}`, { strategies: ['nosuch'] }))).toMatchObject({
      field: 'strategies.0',
    });
    const turns = `/v1/sessions/${id}/turns`;
    expect(await refused(api.post(turns, { input: 'x', strategies: 'nosuch' }))).toMatchObject({ field: 'strategies' });
    expect(await refused(api.post(turns, { input: 'x', background: true, strategies: [' nosuch'] }))).toMatchObject({
      field: 'strategies.0',
    });
    expect(await refused(api.get(`/v1/sessions/${id}/prompt?strategies=nosuch`))).toMatchObject({
      field: 'strategies',
    });
    const header = (strategies: unknown) =>
      `${JSON.stringify({ ...JSON.parse(headerLine(freshId('import'))), strategies })}\n`;
    const send = (text: string) => api.post('/v1/sessions/import', text, { 'content-type': 'application/x-ndjson' });
    expect(await refused(send(header(['inbox', 'nosuch'])))).toEqual({
      message: expect.stringMatching(/^line 1\.strategies\[1\]: unknown strategy "nosuch"; known strategies: /),
      field: 'line 1.strategies.1',
    });
    expect((await api.get(`/v1/sessions/${id}`)).body.counts.turns).toBe(0);
  });
});

// A refusal's message names its field as OpenAI's `param` does, an array position in brackets
// (`input[0].call_id`), whichever check refuses it; the OpenAI-compatible routes' message starts
// with `param` itself, tailgate's own with `body.` or `query.` before a schema's field.
describe('a message names its field in brackets, as param does', () => {
  const call = [{ type: 'function_call_output', call_id: 'x', output: 'o' }];
  const role = [{ type: 'message', role: 'bot', content: 'x' }];
  const text = [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 7 }] }];

  it('on the OpenAI-compatible routes, the message starts with param', async () => {
    for (const input of [call, role, text]) {
      const { status, body } = await api.post('/v1/responses', { model: 'echo', input });
      expect(status, JSON.stringify(body)).toBe(400);
      expect(body.error.param).toMatch(/^input\[0\]\./);
      expect(body.error.message.startsWith(`${body.error.param}: `), body.error.message).toBe(true);
    }
    const { body } = await api.post('/v1/responses', { model: 'echo', input: call });
    expect(body.error.message).toBe(
      'input[0].call_id: no open function_call with call_id x (unknown, or answered already)',
    );
  });

  it('writes an object key of digits as a key, not an array position', async () => {
    for (const [key, param] of [
      ['0', 'metadata.0'],
      ['a.1', 'metadata.a.1'],
    ] as const) {
      const { status, body } = await api.post('/v1/responses', { model: 'echo', input: 'x', metadata: { [key]: 5 } });
      expect(status, JSON.stringify(body)).toBe(400);
      expect(body.error.param).toBe(param);
      expect(body.error.message.startsWith(`${param}: `), body.error.message).toBe(true);
    }
    // So does a strategy threshold's check, in a create, a patch, and an import's header.
    const thresholds = { strategy_config: { 0: 10 } };
    const created = await api.post('/v1/sessions', thresholds);
    expect(created.body.error).toMatchObject({
      message: 'body.strategy_config.0: unknown key',
      details: { field: 'strategy_config.0' },
    });
    const patched = await api.patch(`/v1/sessions/${await api.session()}`, thresholds);
    expect(patched.body.error.message).toBe('body.strategy_config.0: unknown key');
    const headerThresholds = `${JSON.stringify({ ...JSON.parse(headerLine(freshId('import'))), ...thresholds })}\n`;
    const importedThresholds = await api.post('/v1/sessions/import', headerThresholds, {
      'content-type': 'application/x-ndjson',
    });
    expect(importedThresholds.body.error).toMatchObject({
      message: 'line 1.strategy_config.0: unknown key',
      details: { field: 'line 1.strategy_config.0' },
    });
    // The JSON check before the schema, and an import's line, tell a key from a position too.
    const nul = await api.post('/v1/responses', { model: 'echo', input: 'x', metadata: { 0: 'a\u0000b' } });
    expect(nul.body.error).toMatchObject({ param: 'metadata.0', message: 'metadata.0: contains NUL (U+0000)' });
    const nulOwn = await api.post('/v1/sessions', { metadata: { 0: ['a\u0000b'] } });
    expect(nulOwn.body.error).toMatchObject({
      message: 'body.metadata.0[0]: contains NUL (U+0000)',
      details: { field: 'body.metadata.0.0' },
    });
    const tools = [{ type: 'function', name: 'f', 3: 1 }];
    const header = `${JSON.stringify({ ...JSON.parse(headerLine(freshId('import'))), tools })}\n`;
    const imported = await api.post('/v1/sessions/import', header, { 'content-type': 'application/x-ndjson' });
    expect(imported.body.error).toMatchObject({
      message: 'line 1.tools[0].3: unknown field',
      details: { field: 'line 1.tools.0.3' },
    });
    const item = [{ type: 'message', role: 'user', content: 'x', 7: 'y' }];
    const unknown = await api.post('/v1/responses', { model: 'echo', input: item });
    expect(unknown.body.error.param).toBe('input[0].7');
    const id = await api.session();
    const own = await api.post(`/v1/sessions/${id}/turns`, { input: item });
    expect(own.body.error).toMatchObject({
      message: 'body.input[0].7: unknown field',
      details: { field: 'input.0.7' },
    });
  });

  it("on tailgate's routes, brackets in the message, details.field dotted", async () => {
    const id = await api.session();
    const turns = `/v1/sessions/${id}/turns`;
    const refused = await api.post(turns, { input: call });
    expect(refused.body.error).toMatchObject({
      message: 'input[0].call_id: no open function_call with call_id x (unknown, or answered already)',
      details: { field: 'input.0.call_id' },
    });
    const missing = await api.post(turns, {});
    expect(missing.status).toBe(400);
    expect(missing.body.error).toMatchObject({
      code: 'invalid_request',
      message: 'body.input: required',
      details: { field: 'input', issues: [{ path: ['input'], message: 'required' }] },
    });
    const text7 = await api.post(turns, { input: text });
    expect(text7.body.error).toMatchObject({
      message: 'body.input[0].content[0].text: Invalid input: expected string, received number',
      details: { field: 'input.0.content.0.text' },
    });
  });
});

// A 404 of a missing session, or of a turn the session does not have, is told one way whichever
// route meets it (docs/API.md, "Errors"): `details.id` names the session, `details.turn` the turn.
describe('a 404 names what is missing one way', () => {
  it('a session that does not exist: "session <id> not found", details.id', async () => {
    const missing = freshId('missing');
    const routes: [string, string, unknown?][] = [
      ['GET', `/v1/sessions/${missing}`],
      ['POST', `/v1/sessions/${missing}/turns`, { input: 'x' }],
      ['GET', `/v1/sessions/${missing}/items`],
      ['POST', `/v1/sessions/${missing}/inbox`, { content: 'x', name: 'n' }],
      ['GET', `/v1/sessions/${missing}/inbox`],
      ['GET', `/v1/sessions/${missing}/queue`],
      ['POST', `/v1/sessions/${missing}/fork`, { at_turn: 1 }],
    ];
    for (const [method, path, body] of routes) {
      const answer = await api.call(method, path, body);
      expect(answer.status, `${method} ${path}`).toBe(404);
      expect(answer.body.error, `${method} ${path}`).toEqual({
        code: 'not_found',
        message: `session ${missing} not found`,
        details: { id: missing },
      });
    }
  });

  it('a turn the session does not have: details.turn, on the delete as on the cancel and the receipt', async () => {
    const id = await api.session();
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'x' })).status).toBe(200);
    for (const [method, path] of [
      ['DELETE', `/v1/sessions/${id}/turns/99`],
      ['POST', `/v1/sessions/${id}/turns/99/cancel`],
      ['GET', `/v1/sessions/${id}/turns/99`],
    ] as const) {
      const answer = await api.call(method, path);
      expect(answer.status, `${method} ${path}`).toBe(404);
      expect(answer.body.error.code).toBe('not_found');
      expect(answer.body.error.details, `${method} ${path}`).toEqual({ id, turn: 99 });
    }
  });
});
