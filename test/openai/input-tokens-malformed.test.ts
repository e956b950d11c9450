import OpenAI from 'openai';
import { expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { CountingStore } from '../support/counting-store.ts';
import { clientInProcess, TOKEN } from './server.ts';

/**
 * POST /v1/responses/input_tokens of malformed or unknown inputs, raw and through the `openai`
 * client: each a 4xx, none a 5xx, and no count ever writes, refused or not.
 */
it('answers every malformed body a 4xx and writes nothing', async () => {
  const store = new CountingStore(new MemoryStore());
  const app = createApp({
    store: () => store,
    readEnvironment: () => ({ API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' }),
    log: () => {},
    logLine: () => {},
  });
  const openai = clientInProcess(app, TOKEN);
  const first = await openai.responses.create({ model: 'echo', input: 'one' });
  const conversation = first.conversation!.id;
  const reference = first.output[0]!.id!;
  const raw = (body: string) =>
    app.request('http://tailgate.test/v1/responses/input_tokens', {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body,
    });
  const bodies: unknown[] = [
    {},
    null,
    'text',
    [],
    { input: 5 },
    { input: '' },
    { input: [] },
    { input: [{}] },
    { input: [{ type: 'item_reference' }] },
    { input: [{ type: 'item_reference', id: '' }] },
    { input: [{ type: 'item_reference', id: 'msg_unknown' }] },
    { input: [{ type: 'item_reference', id: reference.replace(/_\d+$/, '_999999999999') }] },
    { input: [{ type: 'item_reference', id: `${reference}x` }] },
    { input: 'x', previous_response_id: '' },
    { input: 'x', previous_response_id: `resp_${'x'.repeat(2000)}` },
    { input: 'x', previous_response_id: 123 },
    { input: 'x', previous_response_id: first.id.replace(/.$/, (c) => (c === '0' ? '1' : '0')) },
    { input: 'x', conversation: '' },
    { input: 'x', conversation: { id: '' } },
    { input: 'x', conversation: 'conv_bad' },
    { input: 'x', conversation: `conv_${'0'.repeat(24)}` },
    { input: 'x', conversation: '../../etc/passwd' },
    { input: 'x', conversation: 'a/b' },
    { input: 'x', conversation, previous_response_id: first.id },
    { input: 'x', model: 'nope:model' },
    { input: 'x', model: '' },
    { input: 'x', model: 'anthropic:' },
    { input: 'x', conversation, model: 'nope:model' },
    { input: 'x', tools: 'x' },
    { input: 'x', tools: [{ type: 'function' }] },
    { input: 'x', tool_choice: { type: 'function', name: 'missing' } },
    { input: 'x', conversation, tool_choice: { type: 'function', name: 'missing' } },
    { input: [{ type: 'function_call_output', call_id: 'c', output: 'x' }] },
    { input: [{ type: 'compaction', encrypted_content: 'garbage', id: 'cmp_x' }, 'x'] },
    { input: 'x', instructions: 5 },
    { input: 'x', foo: 1 },
    { input: 'x', metadata: { a: 'b' } },
    { input: 'x', personality: 5 },
    { input: 'x', personality: 'x'.repeat(65) },
    { input: [{ type: 'function_call_output', call_id: 'c', output: 'x' }], conversation },
    { input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'not a url' }] }] },
    { input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'file_x' }] }], conversation },
    { input: 'x', truncation: 'bogus' },
    { input: Array.from({ length: 10_001 }, () => ({ role: 'user', content: 'x' })) },
  ];
  store.reset();
  const answered: [string, number][] = [];
  for (const body of bodies) {
    const text = JSON.stringify(body);
    answered.push([text.slice(0, 120), (await raw(text)).status]);
  }
  answered.push(['{', (await raw('{')).status]);
  for (const body of bodies.filter((each) => typeof each === 'object' && each !== null && !Array.isArray(each))) {
    const error = await openai.responses.inputTokens.count(body as OpenAI.Responses.InputTokenCountParams).then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    answered.push([
      `client ${JSON.stringify(body).slice(0, 100)}`,
      error instanceof OpenAI.APIError ? (error.status ?? 0) : 0,
    ]);
  }
  expect(answered.filter(([, status]) => status < 400 || status >= 500)).toEqual([]);
  expect({ put: store.counts.put, delete: store.counts.delete }).toEqual({ put: 0, delete: 0 });
});
