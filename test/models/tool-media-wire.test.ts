import { afterEach, describe, expect, it } from 'vitest';
import type { ContentPart } from '../../lib/content.ts';
import type { PromptItem } from '../../lib/items.ts';
import { resolveModel } from '../../lib/models/resolve-model.ts';
import { fixture, startFakeProvider, type FakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { weatherTool } from '../support/fake-providers/tool-loop.ts';
import { pdfBytes, pngBytes } from '../support/media-fixtures.ts';

let provider: FakeProvider | undefined;
afterEach(async () => {
  await provider?.close();
  provider = undefined;
});

const blob = (n: number) => String(n).repeat(64);
/** A screenshot as a turn sends it: its blob read into `data`. */
const shot = (n: number, detail?: 'low') => {
  const data = pngBytes(64, 48, 8 * n, n);
  return {
    type: 'input_image' as const,
    blob: blob(n),
    media_type: 'image/png',
    bytes: data.length,
    width: 64,
    height: 48,
    data,
    ...(detail ? { detail } : {}),
  };
};
const base64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');
const pdf = pdfBytes();
/** A PDF as a turn sends it: its blob read into `data`. */
const menu = {
  type: 'input_file',
  filename: 'menu.pdf',
  blob: blob(3),
  media_type: 'application/pdf',
  bytes: pdf.length,
  data: pdf,
} as ContentPart;

const ENV = (url: string) => ({
  OPENAI_COMPATIBLE_BASE_URL: url,
  OPENAI_COMPATIBLE_IMAGES: 'true',
  OPENAI_COMPATIBLE_API_KEY: 'sk-test',
  OPENAI_BASE_URL: url,
  OPENAI_API_KEY: 'sk-test',
  MODEL_MAX_RETRIES: '0',
});

/** The wire `messages` of `prompt` as the model `id` sends them to a fake Chat Completions server. */
async function sent(id: string, prompt: PromptItem[]): Promise<any[]> {
  provider = await startFakeProvider(() => ({ text: fixture('openai-chat-text.json') }));
  const model = resolveModel(id, ENV(provider.baseURL));
  await model.generate({ prompt, tools: [weatherTool], maxOutputTokens: 64 });
  return provider.requests[0]!.body.messages;
}

const call = (call_id: string, seq: number): PromptItem => ({
  type: 'function_call',
  call_id,
  name: 'get_weather',
  arguments: '{}',
  seq,
});

describe("a tool result's images on Chat Completions", () => {
  it.each(['openai-compatible:test-model', 'openai:gpt-4.1-mini'])(
    '%s: the tool messages keep the text, the images and files follow in one user message, labelled',
    async (id) => {
      const prompt: PromptItem[] = [
        { type: 'message', role: 'user', content: 'Book a table', seq: 1 },
        call('call_a', 2),
        call('call_b', 3),
        {
          type: 'function_call_output',
          call_id: 'call_a',
          output: [{ type: 'input_text', text: 'opened' }, shot(1, 'low')],
          seq: 4,
        },
        {
          type: 'function_call_output',
          call_id: 'call_b',
          output: [
            { type: 'input_text', text: 'scrolled' },
            shot(2),
            menu,
            { type: 'input_file', file_url: 'https://example.com/terms.pdf' },
          ],
          seq: 5,
        },
        { type: 'message', role: 'user', content: 'go on', seq: 6 },
      ];
      expect(await sent(id, prompt)).toEqual([
        { role: 'user', content: 'Book a table' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{}' } },
            { id: 'call_b', type: 'function', function: { name: 'get_weather', arguments: '{}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'call_a', content: 'opened\n[image 1: in the message after the tool results]' },
        {
          role: 'tool',
          tool_call_id: 'call_b',
          content:
            'scrolled\n[image 1: in the message after the tool results]\n' +
            '[file 1: in the message after the tool results]\n[file https://example.com/terms.pdf]',
        },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Image 1 of tool call call_a:' },
            { type: 'image_url', image_url: { url: `data:image/png;base64,${base64(shot(1).data)}`, detail: 'low' } },
            { type: 'text', text: 'Image 1 of tool call call_b:' },
            { type: 'image_url', image_url: { url: `data:image/png;base64,${base64(shot(2).data)}` } },
            { type: 'text', text: 'File 1 of tool call call_b:' },
            { type: 'file', file: { filename: 'menu.pdf', file_data: `data:application/pdf;base64,${base64(pdf)}` } },
          ],
        },
        { role: 'user', content: 'go on' },
      ]);
    },
  );

  it('sends the images of each run of tool messages after that run, and those of a run at the end last', async () => {
    const prompt: PromptItem[] = [
      { type: 'message', role: 'user', content: 'Book a table', seq: 1 },
      call('call_1', 2),
      { type: 'function_call_output', call_id: 'call_1', output: [shot(1)], seq: 3 },
      call('call_2', 4),
      { type: 'function_call_output', call_id: 'call_2', output: [shot(2)], seq: 5 },
    ];
    const messages = await sent('openai-compatible:test-model', prompt);
    expect(messages.map((message) => message.role)).toEqual([
      'user',
      'assistant',
      'tool',
      'user',
      'assistant',
      'tool',
      'user',
    ]);
    expect(messages[2].content).toBe('[image 1: in the message after the tool results]');
    expect(messages[3].content[0]).toEqual({ type: 'text', text: 'Image 1 of tool call call_1:' });
    expect(messages[6].content[0]).toEqual({ type: 'text', text: 'Image 1 of tool call call_2:' });
  });
  it('keeps every tool message next to its assistant message: an unanswered call and a late output too', async () => {
    const prompt: PromptItem[] = [
      { type: 'message', role: 'user', content: 'Book a table', seq: 1 },
      call('call_1', 2),
      call('call_2', 3),
      call('call_3', 4),
      { type: 'function_call_output', call_id: 'call_1', output: [shot(1)], seq: 5 },
      { type: 'function_call_output', call_id: 'call_2', output: [shot(2)], seq: 6 },
      { type: 'function_call_output', call_id: 'call_gone', output: [shot(3)], seq: 7 },
    ];
    const messages = await sent('openai-compatible:test-model', prompt);
    expect(messages.slice(2).map((message) => [message.role, message.tool_call_id])).toEqual([
      ['tool', 'call_3'],
      ['tool', 'call_1'],
      ['tool', 'call_2'],
      ['user', undefined],
      ['user', undefined],
    ]);
    expect(messages[2].content).toBe('[no output was recorded for this tool call]');
    expect(messages[5].content.map((part: any) => part.type)).toEqual(['text', 'image_url', 'text', 'image_url']);
    expect(messages[6].content[0]).toEqual({ type: 'text', text: 'Output of tool call call_gone:' });
  });
});

describe('a prompt whose tool outputs hold no image, on Chat Completions', () => {
  it('is sent byte for byte as before: its prompt cache keeps hitting', async () => {
    const prompt: PromptItem[] = [
      { type: 'message', role: 'system', content: 'Operate the browser.' },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Book a table' }, shot(1)], seq: 1 },
      call('call_1', 2),
      call('call_2', 3),
      { type: 'function_call_output', call_id: 'call_1', output: 'opened', seq: 4 },
      {
        type: 'function_call_output',
        call_id: 'call_2',
        output: [
          { type: 'input_text', text: 'scrolled' },
          { type: 'input_text', text: '[image omitted: image/png 64x48, 1 KB, item 5]' },
          { type: 'input_file', file_url: 'https://example.com/terms.pdf' },
        ],
        seq: 5,
      },
      call('call_3', 6),
      { type: 'message', role: 'user', content: 'wait', seq: 7 },
      {
        type: 'function_call_output',
        call_id: 'call_3',
        output: [{ type: 'input_text', text: 'late' }, shot(2)],
        seq: 8,
      },
    ];
    const messages = await sent('openai-compatible:test-model', prompt);
    expect(JSON.stringify(messages)).toBe(BEFORE);
  });
});

/** The messages the adapter sent for that prompt before tool-result images reached Chat Completions. */
const BEFORE = [
  String.raw`[{"role":"system","content":"Operate the browser."},{"role":"user","content":[{"type":"text","te`,
  String.raw`xt":"Book a table"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgoAAA`,
  String.raw`ANSUhEUgAAAEAAAAAwCAYAAAAAAAAAAQEBAQEBAQEAAAAASUVORK5CYII="}}]},`,
  String.raw`{"role":"assistant","content":null,"tool_calls":`,
  String.raw`[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{}"}},{"id":"cal`,
  String.raw`l_2","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},{"role":"tool","too`,
  String.raw`l_call_id":"call_1","content":"opened"},{"role":"tool","tool_call_id":"call_2","content":"scroll`,
  String.raw`ed\n[image omitted: image/png 64x48, 1 KB, item 5]\n[file https://example.com/terms.pdf]"},{"rol`,
  String.raw`e":"assistant","content":null,"tool_calls":[{"id":"call_3","type":"function","function":{"name":`,
  String.raw`"get_weather","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_3","content":"[no output `,
  String.raw`was recorded for this tool call]"},{"role":"user","content":"wait"},{"role":"user","content":[{"`,
  String.raw`type":"text","text":"Output of tool call call_3:"},{"type":"text","text":"late"},{"type":"image_`,
  String.raw`url","image_url":{"url":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAEAAAAAwCAYAAAAAAAAAAgICA`,
  String.raw`gICAgICAgICAgICAgAAAABJRU5ErkJggg=="}}]}]`,
].join('');
