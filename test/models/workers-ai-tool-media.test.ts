import { describe, expect, it } from 'vitest';
import type { ContentPart } from '../../lib/content.ts';
import type { PromptItem } from '../../lib/items.ts';
import { mediaSupport } from '../../lib/models/media-parts.ts';
import { resolveModel } from '../../lib/models/resolve-model.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { countPromptTokens } from '../../lib/tokens/token-counter.ts';
import { tokenCounterFor } from '../../lib/tokens/model-limits.ts';
import { runTurn } from '../../lib/turn/index.ts';
import { fakeAiBinding } from '../support/fake-providers/fake-ai-binding.ts';
import { fixture } from '../support/fake-providers/fake-provider-server.ts';
import { weatherTool } from '../support/fake-providers/tool-loop.ts';
import { dataUrl, pdfBytes, pngBytes } from '../support/media-fixtures.ts';
import { servicesFor } from '../support/recording-model.ts';
import { SessionLog } from '../support/session-log.ts';

/**
 * Workers AI's tool messages are text only, as Chat Completions' are: a tool result's images
 * (as bytes; an image by URL and a file stay text placeholders, as in a user message) go in one
 * user message after the tool messages answering an assistant message, labelled by call.
 */

const ID = 'workers-ai:@cf/meta/llama-4-scout-17b-16e-instruct';

function workersAi() {
  const binding = fakeAiBinding(() => JSON.parse(fixture('workers-ai-text.json')));
  return { model: resolveModel(ID, { AI: binding, MODEL_MAX_RETRIES: '0' }), runs: binding.runs };
}

/** The `messages` the Workers AI binding receives for `prompt`. */
async function sent(prompt: PromptItem[]): Promise<any[]> {
  const { model, runs } = workersAi();
  await model.generate({ prompt, tools: [weatherTool], maxOutputTokens: 64 });
  expect(runs).toHaveLength(1);
  return runs[0]!.inputs.messages;
}

const blob = (n: number) => String(n).repeat(64);
/** A screenshot as a turn sends it: its blob read into `data`. */
const shot = (n: number) => {
  const data = pngBytes(64, 48, 8 * n, n);
  const image = {
    type: 'input_image',
    blob: blob(n),
    media_type: 'image/png',
    bytes: data.length,
    width: 64,
    height: 48,
  };
  return { ...image, data } as ContentPart & { data: Uint8Array };
};
const base64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');
const pdf = pdfBytes();
const menu = {
  type: 'input_file',
  filename: 'menu.pdf',
  blob: blob(3),
  media_type: 'application/pdf',
  bytes: pdf.length,
  data: pdf,
} as ContentPart;

const call = (call_id: string, seq: number): PromptItem => ({
  type: 'function_call',
  call_id,
  name: 'get_weather',
  arguments: '{}',
  seq,
});
const assistant = (...ids: string[]) => ({
  role: 'assistant',
  content: '',
  tool_calls: ids.map((id) => ({ id, type: 'function', function: { name: 'get_weather', arguments: '{}' } })),
});

describe("a tool result's images on Workers AI", () => {
  it('follow the tool messages in a user message as bytes; an image by URL and a file stay placeholders', async () => {
    const prompt: PromptItem[] = [
      { type: 'message', role: 'user', content: 'Book a table', seq: 1 },
      call('call_a', 2),
      call('call_b', 3),
      {
        type: 'function_call_output',
        call_id: 'call_a',
        output: [{ type: 'input_text', text: 'opened' }, shot(1)],
        seq: 4,
      },
      {
        type: 'function_call_output',
        call_id: 'call_b',
        output: [
          { type: 'input_text', text: 'scrolled' },
          { type: 'input_image', image_url: 'https://example.com/logo.png' },
          shot(2),
          menu,
        ],
        seq: 5,
      },
      { type: 'message', role: 'user', content: 'go on', seq: 6 },
    ];
    expect(await sent(prompt)).toEqual([
      { role: 'user', content: 'Book a table' },
      assistant('call_a', 'call_b'),
      {
        role: 'tool',
        name: 'get_weather',
        tool_call_id: 'call_a',
        content: 'opened\n[image 1: in the message after the tool results]',
      },
      {
        role: 'tool',
        name: 'get_weather',
        tool_call_id: 'call_b',
        content:
          'scrolled\n[image omitted: image https://example.com/logo.png, item 5]\n' +
          '[image 1: in the message after the tool results]\n[application/pdf menu.pdf, 1 KB]',
      },
      {
        role: 'user',
        // workers-ai-provider sends a user message's text first, its lines joined, then its images in order.
        content: [
          { type: 'text', text: 'Image 1 of tool call call_a:\nImage 1 of tool call call_b:' },
          { type: 'image_url', image_url: { url: `data:image/png;base64,${base64(shot(1).data)}` } },
          { type: 'image_url', image_url: { url: `data:image/png;base64,${base64(shot(2).data)}` } },
        ],
      },
      { role: 'user', content: 'go on' },
    ]);
  });

  it('a prompt whose tool outputs hold no image sent as bytes is sent byte for byte as before', async () => {
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
          { type: 'input_image', image_url: 'https://example.com/logo.png' },
          menu,
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
    expect(JSON.stringify(await sent(prompt))).toBe(BEFORE);
  });

  it("a turn sends the stored screenshot's bytes; the receipt counts only the image by URL and the file", async () => {
    const { model, runs } = workersAi();
    const store = new MemoryStore();
    const sessions = new SessionLog(store);
    const services = servicesFor(sessions, store, model);
    await sessions.create({ id: 'wai' });
    const png = pngBytes(4, 4);
    await runTurn(services, 'wai', {
      input: [
        { type: 'message', role: 'user', content: 'Book a table' },
        { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{}' },
        {
          type: 'function_call_output',
          call_id: 'call_1',
          output: [
            { type: 'input_image', image_url: 'https://example.com/logo.png' },
            { type: 'input_image', image_url: dataUrl('image/png', png) },
            { type: 'input_file', filename: 'spec.pdf', file_data: dataUrl('application/pdf', pdf) },
          ],
        },
      ],
    });
    await services.settle();
    expect(runs).toHaveLength(1);
    expect(runs[0]!.inputs.messages.at(-1)).toEqual({
      role: 'user',
      content: [
        { type: 'text', text: 'Image 1 of tool call call_1:' },
        { type: 'image_url', image_url: { url: dataUrl('image/png', png) } },
      ],
    });
    const turn = await sessions.getTurn('wai', 1);
    expect(turn.receipt?.media_as_text).toBe(2);
  });

  it("token estimates count a tool result's screenshot as an image, one by URL as its placeholder", () => {
    const media = mediaSupport(resolveModel(ID, { AI: fakeAiBinding(() => ({})) }));
    const counter = tokenCounterFor(ID, {}, media);
    const loop = (image: ContentPart): PromptItem[] => [
      { type: 'message', role: 'user', content: 'Look', seq: 1 },
      call('c1', 2),
      { type: 'function_call_output', call_id: 'c1', output: [{ type: 'input_text', text: 'done' }, image], seq: 3 },
    ];
    const big = { ...shot(1), width: 1280, height: 800 } as ContentPart;
    const placeholder = { type: 'input_text', text: '[image omitted: image/png 1280x800, 1 KB, item 3]' } as const;
    expect(countPromptTokens(loop(big), [], counter)).toBeGreaterThan(
      countPromptTokens(loop(placeholder), [], counter) + 1000,
    );
    const byUrl = { type: 'input_image', image_url: 'https://example.com/logo.png' } as const;
    const urlText = {
      type: 'input_text',
      text: '[image omitted: image https://example.com/logo.png, item 3]',
    } as const;
    expect(countPromptTokens(loop(byUrl), [], counter)).toBe(countPromptTokens(loop(urlText), [], counter));
  });
});

/** The messages the adapter sent for that prompt before a tool result's images reached Workers AI. */
const BEFORE = [
  String.raw`[{"content":"Operate the browser.","role":"system"},{"content":[{"type":"text","text":"Book a table"`,
  String.raw`},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAEAAAAAwCAYA`,
  String.raw`AAAAAAAAAQEBAQEBAQE="}}],"role":"user"},{"content":"","role":"assistant","tool_calls":[{"function":{`,
  String.raw`"arguments":"{}","name":"get_weather"},"id":"call_1","type":"function"},{"function":{"arguments":"{}`,
  String.raw`","name":"get_weather"},"id":"call_2","type":"function"}]},{"content":"opened","name":"get_weather",`,
  String.raw`"tool_call_id":"call_1","role":"tool"},{"content":"scrolled\n[image omitted: image/png 64x48, 1 KB, `,
  String.raw`item 5]\n[image omitted: image https://example.com/logo.png, item 5]\n[application/pdf menu.pdf, 1 K`,
  String.raw`B]","name":"get_weather","tool_call_id":"call_2","role":"tool"},{"content":"","role":"assistant","to`,
  String.raw`ol_calls":[{"function":{"arguments":"{}","name":"get_weather"},"id":"call_3","type":"function"}]},{"`,
  String.raw`content":"[no output was recorded for this tool call]","name":"get_weather","tool_call_id":"call_3",`,
  String.raw`"role":"tool"},{"content":"wait","role":"user"},{"content":[{"type":"text","text":"Output of tool ca`,
  String.raw`ll call_3:\nlate"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgoAAAANSUh`,
  String.raw`EUgAAAEAAAAAwCAYAAAAAAAAAAgICAgICAgICAgICAgICAg=="}}],"role":"user"}]`,
].join('');
