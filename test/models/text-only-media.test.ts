import { afterEach, describe, expect, it } from 'vitest';
import { parseServiceConfig } from '../../lib/config.ts';
import type { ContentPart } from '../../lib/content.ts';
import { NotConfiguredError } from '../../lib/errors.ts';
import type { PromptItem } from '../../lib/items.ts';
import { ModelConfigurationError } from '../../lib/models/errors.ts';
import { mediaSupport, partText } from '../../lib/models/media-parts.ts';
import { resolveModel } from '../../lib/models/resolve-model.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { tokenCounterFor } from '../../lib/tokens/model-limits.ts';
import { countItemTokens } from '../../lib/tokens/token-counter.ts';
import { runTurn } from '../../lib/turn/index.ts';
import { fixture, startFakeProvider, type FakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { weatherTool } from '../support/fake-providers/tool-loop.ts';
import { dataUrl, pdfBytes, pngBytes } from '../support/media-fixtures.ts';
import { servicesFor } from '../support/recording-model.ts';
import { SessionLog } from '../support/session-log.ts';

/**
 * An `openai-compatible:` backend takes text only unless its operator says it takes images
 * (OPENAI_COMPATIBLE_IMAGES): many such servers (a text model on vLLM, llama.cpp, Ollama) answer
 * 400 to a request holding an `image_url` or `file` part. A text-only one gets each image and
 * file as its text placeholder, a tool result's screenshot included.
 */

let provider: FakeProvider | undefined;
afterEach(async () => {
  await provider?.close();
  provider = undefined;
});

const png = pngBytes(64, 48, 40);
const pdf = pdfBytes();
const screenshot = {
  type: 'input_image',
  blob: 'b'.repeat(64),
  media_type: 'image/png',
  bytes: png.length,
  width: 64,
  height: 48,
  data: png,
} as ContentPart;
const photo = { ...screenshot, blob: 'c'.repeat(64) } as ContentPart;
const linked = { type: 'input_image', image_url: 'https://example.com/logo.png' } as ContentPart;
const menu = {
  type: 'input_file',
  filename: 'menu.pdf',
  blob: 'a'.repeat(64),
  media_type: 'application/pdf',
  bytes: pdf.length,
  data: pdf,
} as ContentPart;

const prompt: PromptItem[] = [
  { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Look' }, photo, linked, menu], seq: 1 },
  { type: 'function_call', call_id: 'call_a', name: 'get_weather', arguments: '{}', seq: 2 },
  {
    type: 'function_call_output',
    call_id: 'call_a',
    output: [{ type: 'input_text', text: 'clicked' }, screenshot],
    seq: 3,
  },
];

const env = (url: string, images?: string) => ({
  OPENAI_COMPATIBLE_BASE_URL: url,
  MODEL_MAX_RETRIES: '0',
  ...(images !== undefined ? { OPENAI_COMPATIBLE_IMAGES: images } : {}),
});

/** The request body the fake Chat Completions server got for `prompt`. */
async function sentBody(images?: string): Promise<any> {
  provider = await startFakeProvider(() => ({ text: fixture('openai-chat-text.json') }));
  const model = resolveModel('openai-compatible:text-model', env(provider.baseURL, images));
  await model.generate({ prompt, tools: [weatherTool], maxOutputTokens: 64 });
  return provider.requests[0]!.body;
}

/** Every content part of the body's messages, by its wire type. */
function partTypes(body: any): string[] {
  return (body.messages as { content: unknown }[]).flatMap((message) =>
    Array.isArray(message.content) ? message.content.map((part: { type: string }) => part.type) : ['string'],
  );
}

describe('openai-compatible: a text-only backend', () => {
  it.each([undefined, 'false'])(
    '(OPENAI_COMPATIBLE_IMAGES=%s) gets no image or file part, only placeholders',
    async (images) => {
      const body = await sentBody(images);
      expect(partTypes(body)).not.toContain('image_url');
      expect(partTypes(body)).not.toContain('file');
      expect(JSON.stringify(body)).not.toContain('data:image/png');
      expect(body.messages).toEqual([
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Look' },
            { type: 'text', text: partText(photo, 1) },
            { type: 'text', text: partText(linked, 1) },
            { type: 'text', text: partText(menu, 1) },
          ],
        },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{}' } }],
        },
        // The screenshot as its placeholder, no user message after the tool message to carry it.
        { role: 'tool', tool_call_id: 'call_a', content: `clicked\n${partText(screenshot, 3)}` },
      ]);
      expect(partText(screenshot, 3)).toMatch(/^\[image omitted: image\/png 64x48, .*item 3\]$/);
    },
  );

  it('one the operator says takes images (OPENAI_COMPATIBLE_IMAGES=true) still gets them', async () => {
    const body = await sentBody('true');
    expect(partTypes(body).filter((type) => type === 'image_url')).toHaveLength(3);
    expect(body.messages.at(-1).content).toContainEqual({ type: 'text', text: 'Image 1 of tool call call_a:' });
  });

  it('a malformed OPENAI_COMPATIBLE_IMAGES is a configuration error naming it', () => {
    const env = { OPENAI_COMPATIBLE_BASE_URL: 'http://127.0.0.1:1/v1', OPENAI_COMPATIBLE_IMAGES: 'maybe' };
    expect(() => resolveModel('openai-compatible:m', env)).toThrow(ModelConfigurationError);
    expect(() => parseServiceConfig(env)).toThrow(NotConfiguredError);
    expect(() => parseServiceConfig(env)).toThrow(/OPENAI_COMPATIBLE_IMAGES/);
  });

  it('the token estimate counts each image and file as the placeholder it gets', () => {
    const model = resolveModel('openai-compatible:text-model', env('http://127.0.0.1:1/v1'));
    const counter = tokenCounterFor(model.id, {}, mediaSupport(model));
    const asText = (item: PromptItem & { seq: number }, parts: ContentPart[]) =>
      parts.map((part) => partText(part, item.seq)).join('\n');
    const user = prompt[0] as Extract<PromptItem, { type: 'message' }> & { seq: number };
    const output = prompt[2] as Extract<PromptItem, { type: 'function_call_output' }> & { seq: number };
    expect(countItemTokens(user, counter)).toBe(
      countItemTokens({ ...user, content: asText(user, user.content as ContentPart[]) }, counter),
    );
    expect(countItemTokens(output, counter)).toBe(
      countItemTokens({ ...output, output: asText(output, output.output as ContentPart[]) }, counter),
    );
  });

  it("a turn's receipt counts the images and files sent as text, and the request holds none", async () => {
    provider = await startFakeProvider(() => ({ text: fixture('openai-chat-text.json') }));
    const model = resolveModel('openai-compatible:text-model', env(provider.baseURL));
    const store = new MemoryStore();
    const sessions = new SessionLog(store);
    const services = servicesFor(sessions, store, model);
    await sessions.create({ id: 'text' });
    await runTurn(services, 'text', {
      input: [
        {
          type: 'message',
          role: 'user',
          content: [
            { type: 'input_text', text: 'What is this?' },
            { type: 'input_image', image_url: dataUrl('image/png', png) },
            { type: 'input_image', image_url: 'https://example.com/logo.png' },
          ],
        },
      ],
    });
    await services.settle();
    expect(provider.requests).toHaveLength(1);
    expect(partTypes(provider.requests[0]!.body)).not.toContain('image_url');
    const turn = await sessions.getTurn('text', 1);
    expect(turn.receipt?.media_as_text).toBe(2);
  });
});

describe('openai: a model without vision', () => {
  /** The request body the fake Chat Completions server got for `prompt` from `openai:<name>`. */
  const sentTo = async (name: string) => {
    provider = await startFakeProvider(() => ({ text: fixture('openai-chat-text.json') }));
    const model = resolveModel(`openai:${name}`, {
      OPENAI_BASE_URL: provider.baseURL,
      OPENAI_API_KEY: 'sk-test',
      MODEL_MAX_RETRIES: '0',
    });
    await model.generate({ prompt, tools: [weatherTool], maxOutputTokens: 64 });
    const body = provider.requests[0]!.body;
    await provider.close();
    provider = undefined;
    return body;
  };

  // OpenAI answers 400 "Invalid content type. image_url is only supported by certain models."
  it.each(['o3-mini', 'o1-mini', 'gpt-3.5-turbo', 'gpt-4', 'gpt-4-0125-preview', 'ft:gpt-3.5-turbo-0125:acme::9abc'])(
    '%s gets each image and file as its placeholder',
    async (name) => {
      const body = await sentTo(name);
      expect(partTypes(body)).not.toContain('image_url');
      expect(partTypes(body)).not.toContain('file');
      expect(JSON.stringify(body)).toContain(JSON.stringify(partText(screenshot, 3)).slice(1, -1));
    },
  );

  it.each(['gpt-4.1-mini', 'gpt-4o', 'gpt-4-turbo', 'o3', 'o4-mini', 'gpt-5', 'ft:gpt-4o-mini-2024-07-18:acme::9abc'])(
    '%s still gets the images',
    async (name) => {
      const body = await sentTo(name);
      expect(partTypes(body).filter((type) => type === 'image_url')).toHaveLength(3);
    },
  );
});
