import { afterEach, describe, expect, it } from 'vitest';
import type { PromptItem } from '../../lib/items.ts';
import { resolveModel } from '../../lib/models/resolve-model.ts';
import { echoModel } from '../../lib/models/echo.ts';
import {
  fixture,
  startFakeProvider,
  type FakeProvider,
  type RecordedRequest,
} from '../support/fake-providers/fake-provider-server.ts';
import { weatherTool } from '../support/fake-providers/tool-loop.ts';
import { pdfBytes, pngBytes } from '../support/media-fixtures.ts';

let provider: FakeProvider | undefined;
afterEach(async () => {
  await provider?.close();
  provider = undefined;
});

const screen = pngBytes(1280, 800, 40, 3);
const screenBase64 = Buffer.from(screen).toString('base64');
const pdf = pdfBytes();
const ref = (bytes: Uint8Array, media_type: string) => ({ blob: 'a'.repeat(64), media_type, bytes: bytes.length });

/** A prompt as a turn sends it: blobs read into `data`; `detail` on the images when given. */
function prompt(callId: string, detail?: 'low' | 'high' | 'auto' | 'original'): PromptItem[] {
  const asked = detail ? { detail } : {};
  const items: unknown[] = [
    {
      type: 'message',
      role: 'user',
      content: [
        { type: 'input_text', text: 'What is on screen?' },
        { type: 'input_image', ...ref(screen, 'image/png'), width: 1280, height: 800, data: screen, ...asked },
        { type: 'input_file', filename: 'spec.pdf', ...ref(pdf, 'application/pdf'), data: pdf },
        { type: 'input_image', image_url: 'https://example.com/logo.png', ...asked },
      ],
    },
    { type: 'function_call', call_id: callId, name: 'get_weather', arguments: '{"location":"Paris"}' },
    {
      type: 'function_call_output',
      call_id: callId,
      seq: 3,
      output: [
        { type: 'input_text', text: 'clicked' },
        { type: 'input_image', ...ref(screen, 'image/png'), width: 1280, height: 800, data: screen, ...asked },
      ],
    },
  ];
  return items as PromptItem[];
}

/** A fake provider answering `answer`, and the model `id` pointed at it by `env(baseURL)`. */
async function start(id: string, answer: string, env: (baseURL: string) => Record<string, string>) {
  provider = await startFakeProvider(() => ({ text: fixture(answer) }));
  const model = resolveModel(id, { ...env(provider.baseURL), MODEL_MAX_RETRIES: '0' });
  return { model, requests: provider.requests };
}

const bodyOf = (requests: RecordedRequest[]) => requests[0]!.body as any;

describe('images and files on the wire', () => {
  it.each([undefined, 'low' as const])(
    'anthropic: image and document blocks, in the tool_result too; detail %s sends nothing (Anthropic has none)',
    async (detail) => {
      const { model, requests } = await start('anthropic:claude-sonnet-4-5', 'anthropic-message-text.json', (url) => ({
        ANTHROPIC_API_KEY: 'sk-ant-test',
        ANTHROPIC_BASE_URL: url,
      }));
      await model.generate({ prompt: prompt('toolu_1', detail), tools: [weatherTool], maxOutputTokens: 64 });
      const { messages } = bodyOf(requests);
      expect(messages).toEqual([
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is on screen?' },
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: screenBase64 } },
            {
              type: 'document',
              source: { type: 'base64', media_type: 'application/pdf', data: Buffer.from(pdf).toString('base64') },
              title: 'spec.pdf',
            },
            { type: 'image', source: { type: 'url', url: 'https://example.com/logo.png' } },
          ],
        },
        {
          role: 'assistant',
          content: [
            {
              type: 'tool_use',
              id: 'toolu_1',
              name: 'get_weather',
              input: { location: 'Paris' },
              cache_control: { type: 'ephemeral' },
            },
          ],
        },
        {
          role: 'user',
          content: [
            {
              type: 'tool_result',
              tool_use_id: 'toolu_1',
              cache_control: { type: 'ephemeral' },
              content: [
                { type: 'text', text: 'clicked' },
                { type: 'image', source: { type: 'base64', media_type: 'image/png', data: screenBase64 } },
              ],
            },
          ],
        },
      ]);
    },
  );

  it('openai-compatible: image_url and file parts; a tool message is text, its image in a user message', async () => {
    const { model, requests } = await start('openai-compatible:test-model', 'openai-chat-text.json', (url) => ({
      OPENAI_COMPATIBLE_BASE_URL: url,
      OPENAI_COMPATIBLE_IMAGES: 'true',
      OPENAI_COMPATIBLE_API_KEY: 'sk-test',
    }));
    await model.generate({ prompt: prompt('call_1'), tools: [weatherTool] });
    const { messages } = bodyOf(requests);
    expect(messages).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is on screen?' },
          { type: 'image_url', image_url: { url: `data:image/png;base64,${screenBase64}` } },
          {
            type: 'file',
            file: {
              filename: 'spec.pdf',
              file_data: `data:application/pdf;base64,${Buffer.from(pdf).toString('base64')}`,
            },
          },
          { type: 'image_url', image_url: { url: 'https://example.com/logo.png' } },
        ],
      },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"location":"Paris"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_1', content: 'clicked\n[image 1: in the message after the tool results]' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Image 1 of tool call call_1:' },
          { type: 'image_url', image_url: { url: `data:image/png;base64,${screenBase64}` } },
        ],
      },
    ]);
  });
});

describe("an image's detail on the OpenAI-compatible wire", () => {
  it.each([
    { id: 'openai-compatible:test-model', detail: 'low' as const },
    { id: 'openai-compatible:test-model', detail: 'auto' as const },
    { id: 'openai:gpt-4.1-mini', detail: 'high' as const },
    { id: 'openai:gpt-4.1-mini', detail: 'original' as const },
  ])('$id sends detail $detail inside image_url, in messages and in an unmatched output', async ({ id, detail }) => {
    const { model, requests } = await start(id, 'openai-chat-text.json', (url) => ({
      OPENAI_COMPATIBLE_BASE_URL: url,
      OPENAI_COMPATIBLE_IMAGES: 'true',
      OPENAI_COMPATIBLE_API_KEY: 'sk-test',
      OPENAI_BASE_URL: url,
      OPENAI_API_KEY: 'sk-test',
    }));
    const unmatched = {
      type: 'function_call_output',
      call_id: 'call_gone',
      output: [{ type: 'input_image', image_url: 'https://example.com/after.png', detail }],
    } as PromptItem;
    await model.generate({ prompt: [...prompt('call_1', detail), unmatched], tools: [weatherTool] });
    const { messages } = bodyOf(requests);
    expect(messages[0].content).toEqual([
      { type: 'text', text: 'What is on screen?' },
      { type: 'image_url', image_url: { url: `data:image/png;base64,${screenBase64}`, detail } },
      {
        type: 'file',
        file: {
          filename: 'spec.pdf',
          file_data: `data:application/pdf;base64,${Buffer.from(pdf).toString('base64')}`,
        },
      },
      { type: 'image_url', image_url: { url: 'https://example.com/logo.png', detail } },
    ]);
    expect(messages[2]).toEqual({
      role: 'tool',
      tool_call_id: 'call_1',
      content: 'clicked\n[image 1: in the message after the tool results]',
    });
    expect(messages[3]).toEqual({
      role: 'user',
      content: [
        { type: 'text', text: 'Image 1 of tool call call_1:' },
        { type: 'image_url', image_url: { url: `data:image/png;base64,${screenBase64}`, detail } },
      ],
    });
    expect(messages[4]).toEqual({
      role: 'user',
      content: [
        { type: 'text', text: 'Output of tool call call_gone:' },
        { type: 'image_url', image_url: { url: 'https://example.com/after.png', detail } },
      ],
    });
    expect(messages).toHaveLength(5);
  });
});

describe('the echo model', () => {
  it('describes each image and file it receives, from the bytes', async () => {
    const result = await echoModel.generate({ prompt: prompt('c1'), tools: [] });
    expect(result.output).toEqual([
      {
        type: 'message',
        role: 'assistant',
        content:
          'echo: What is on screen? [image/png 1280x800, 1 KB] [application/pdf spec.pdf, 1 KB] ' +
          '[image https://example.com/logo.png] [image/png 1280x800, 1 KB]',
      },
    ]);
  });
});
