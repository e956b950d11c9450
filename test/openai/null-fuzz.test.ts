import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { dataUrl, pngBytes } from '../support/media-fixtures.ts';

const TOKEN = 'null-fuzz-token';
const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' };
const PDF = 'data:application/pdf;base64,JVBERi0xLjQKJSVFT0YK';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Every body that is `body` with one value (at any depth) replaced by null. */
function nulled(body: Json, path: (string | number)[] = []): { path: string; body: Json }[] {
  const out: { path: string; body: Json }[] = [];
  const set = (root: Json, at: (string | number)[], value: Json): Json => {
    if (at.length === 0) return value;
    const [head, ...rest] = at;
    if (Array.isArray(root)) return root.map((item, index) => (index === head ? set(item, rest, value) : item));
    const object = root as Record<string, Json>;
    return { ...object, [head as string]: set(object[head as string]!, rest, value) };
  };
  const walk = (value: Json, at: (string | number)[]) => {
    if (at.length > 0) out.push({ path: at.join('.'), body: set(body, at, null) });
    if (Array.isArray(value)) for (const [index, item] of value.entries()) walk(item, [...at, index]);
    else if (value && typeof value === 'object') for (const key of Object.keys(value)) walk(value[key]!, [...at, key]);
  };
  walk(body, path);
  return out;
}

const image = () => ({ type: 'input_image', image_url: dataUrl('image/png', pngBytes(2, 2)), detail: 'low' });
const file = { type: 'input_file', filename: 'a.pdf', file_data: PDF, detail: 'low' };

function responseInput(): Json {
  return [
    { type: 'message', role: 'developer', content: 'be brief', id: 'msg_x', status: 'completed' },
    {
      type: 'message',
      role: 'user',
      content: [
        { type: 'input_text', text: 'look', prompt_cache_breakpoint: { mode: 'explicit', ttl: '30m' } },
        image(),
        file,
      ],
    },
    {
      type: 'reasoning',
      id: 'rs_1',
      summary: [{ type: 'summary_text', text: 'thinking' }],
      content: [{ type: 'reasoning_text', text: 'hmm' }],
      encrypted_content: 'abc',
      status: 'completed',
    },
    { type: 'function_call', call_id: 'call_1', name: 'get', arguments: '{}', id: 'fc_1', status: 'completed' },
    {
      type: 'function_call_output',
      call_id: 'call_1',
      output: [{ type: 'input_text', text: 'sunny' }, image()],
      id: 'fco_1',
      status: 'completed',
    },
    { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'it is sunny' }] },
    { type: 'message', role: 'user', content: 'thanks' },
  ];
}

function responseBody(): Json {
  return {
    model: 'echo',
    input: responseInput(),
    instructions: 'you are terse',
    tools: [
      {
        type: 'function',
        name: 'get',
        description: 'gets',
        parameters: { type: 'object', properties: { q: { type: 'string' } } },
        strict: false,
      },
    ],
    tool_choice: { type: 'function', name: 'get' },
    store: true,
    max_output_tokens: 200,
    temperature: 1,
    metadata: { a: 'b' },
    parallel_tool_calls: true,
    max_tool_calls: 3,
    top_p: 1,
    presence_penalty: 0,
    frequency_penalty: 0,
    top_logprobs: 0,
    reasoning: { effort: 'low', summary: 'auto', generate_summary: 'auto', mode: 'standard', context: 'auto' },
    user: 'u1',
    safety_identifier: 's1',
    service_tier: 'auto',
    truncation: 'disabled',
    text: { format: { type: 'json_schema', name: 'out', schema: { type: 'object' }, strict: false }, verbosity: 'low' },
    include: ['reasoning.encrypted_content'],
    prompt_cache_key: 'k1',
    prompt_cache_retention: '24h',
    prompt_cache_options: { mode: 'implicit', ttl: '30m', comparison_response_id: 'resp_x' },
    context_management: [{ type: 'compaction', compact_threshold: 100000 }],
  };
}

function chatBody(): Json {
  return {
    model: 'echo',
    messages: [
      { role: 'system', content: 'be brief', name: 'sys' },
      {
        role: 'user',
        name: 'me',
        content: [
          { type: 'text', text: 'look' },
          { type: 'image_url', image_url: { url: dataUrl('image/png', pngBytes(2, 2)), detail: 'low' } },
          { type: 'file', file: { file_data: PDF, filename: 'a.pdf' } },
        ],
      },
      {
        role: 'assistant',
        content: 'calling',
        refusal: null,
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get', arguments: '{}' } }],
      },
      { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
      { role: 'user', content: 'thanks' },
    ],
    tools: [
      { type: 'function', function: { name: 'get', description: 'd', parameters: { type: 'object' }, strict: false } },
    ],
    tool_choice: 'auto',
    max_tokens: 100,
    max_completion_tokens: 100,
    temperature: 1,
    n: 1,
    seed: 3,
    parallel_tool_calls: true,
    top_p: 1,
    presence_penalty: 0,
    frequency_penalty: 0,
    stop: ['END'],
    reasoning_effort: 'low',
    verbosity: 'low',
    user: 'u',
    safety_identifier: 's',
    service_tier: 'auto',
    logprobs: false,
    store: false,
    response_format: { type: 'json_schema', json_schema: { name: 'o', schema: { type: 'object' } } },
    prompt_cache_key: 'k',
  };
}

async function check(app: ReturnType<typeof createApp>, method: string, path: string, body: Json, label: string) {
  const answer = await app.request(`http://tailgate.test/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await answer.text();
  const problems: string[] = [];
  if (answer.status >= 500) problems.push(`${label}: ${answer.status} ${text.slice(0, 300)}`);
  else if (answer.status >= 400) {
    const error = (JSON.parse(text) as { error?: Record<string, unknown> }).error;
    const shaped =
      error &&
      typeof error.message === 'string' &&
      typeof error.type === 'string' &&
      (error.param === null || typeof error.param === 'string') &&
      (error.code === null || typeof error.code === 'string');
    if (!shaped) problems.push(`${label}: ${answer.status} not in OpenAI's shape ${text.slice(0, 300)}`);
  } else if (text.includes('server_error')) problems.push(`${label}: ${answer.status} ${text.slice(0, 400)}`);
  return { problems, status: answer.status, text };
}

describe('nulls in every optional field', () => {
  it('responses, chat, compact, conversations answer 2xx or a 4xx in OpenAI error shape', async () => {
    const store = new MemoryStore();
    const app = createApp({ store: () => store, readEnvironment: () => environment, log: () => {} });
    const problems: string[] = [];
    const run = async (method: string, path: string, base: Json, extra: Record<string, Json> = {}) => {
      const baseline = await check(app, method, path, { ...(base as object), ...extra }, `${path} baseline`);
      // The body whose fields are nulled is accepted itself, so every null reaches past the schema.
      expect(baseline.status, baseline.text.slice(0, 300)).toBeLessThan(300);
      problems.push(...baseline.problems);
      for (const { path: at, body } of nulled({ ...(base as object), ...extra })) {
        const result = await check(app, method, path, body, `${method} ${path} ${JSON.stringify(extra)} null at ${at}`);
        problems.push(...result.problems);
      }
    };
    await run('POST', '/responses', responseBody());
    await run('POST', '/responses', responseBody(), { stream: true });
    await run('POST', '/responses', responseBody(), { background: true });
    const first = (await (
      await app.request('http://tailgate.test/v1/responses', {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'echo', input: 'hi' }),
      })
    ).json()) as { id: string; conversation: { id: string } };
    const followUp = { ...(responseBody() as object), previous_response_id: first.id, input: 'more' };
    await run('POST', '/responses', followUp);
    await run('POST', '/responses', { ...(responseBody() as object), conversation: first.conversation.id });
    await run('POST', '/responses', { ...(responseBody() as object), conversation: { id: first.conversation.id } });
    await run('POST', '/chat/completions', chatBody());
    await run('POST', '/chat/completions', chatBody(), { stream: true, stream_options: { include_usage: true } });
    await run('POST', '/responses/compact', {
      model: 'echo',
      input: responseInput(),
      instructions: 'x',
      prompt_cache_key: 'k',
      prompt_cache_retention: 'in_memory',
      prompt_cache_options: { mode: 'implicit', ttl: '30m' },
      service_tier: 'flex',
    });
    const newest = (await (
      await app.request('http://tailgate.test/v1/responses', {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'echo', input: 'hi' }),
      })
    ).json()) as { id: string };
    await run('POST', '/responses/compact', { model: 'echo', previous_response_id: newest.id });
    // The fields of a count (InputTokenCountParams) a create takes too.
    const created = responseBody() as Record<string, Json>;
    const counted = [
      'model',
      'input',
      'instructions',
      'tools',
      'tool_choice',
      'parallel_tool_calls',
      'reasoning',
      'text',
      'truncation',
    ];
    await run('POST', '/responses/input_tokens', Object.fromEntries(counted.map((key) => [key, created[key]!])));
    await run('POST', '/conversations', { items: (responseInput() as Json[]).slice(1), metadata: { a: 'b' } });
    await run('POST', `/conversations/${first.conversation.id}`, { metadata: { a: 'c' } });
    await run('POST', `/conversations/${first.conversation.id}/items`, { items: (responseInput() as Json[]).slice(1) });
    expect(problems).toEqual([]);
  }, 600_000);
});
