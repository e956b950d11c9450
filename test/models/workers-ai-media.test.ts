import { describe, expect, it } from 'vitest';
import type { PromptItem } from '../../lib/items.ts';
import { mediaSupport, partText } from '../../lib/models/media-parts.ts';
import { resolveModel } from '../../lib/models/resolve-model.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { tokenCounterFor } from '../../lib/tokens/model-limits.ts';
import { countItemTokens } from '../../lib/tokens/token-counter.ts';
import { runTurn } from '../../lib/turn/index.ts';
import { fakeAiBinding } from '../support/fake-providers/fake-ai-binding.ts';
import { fixture } from '../support/fake-providers/fake-provider-server.ts';
import { dataUrl, pdfBytes, pngBytes } from '../support/media-fixtures.ts';
import { servicesFor } from '../support/recording-model.ts';
import { SessionLog } from '../support/session-log.ts';

/**
 * workers-ai-provider takes an image only as bytes with an image/* type, and no file: the
 * adapter sends the others as text placeholders (an image as `[image omitted: …]`, a file as its
 * description) instead of failing the
 * turn with a model error every time.
 */

const workersAi = () => {
  const binding = fakeAiBinding(() => JSON.parse(fixture('workers-ai-text.json')));
  return {
    model: resolveModel('workers-ai:@cf/meta/llama-3.2-11b-vision-instruct', { AI: binding, MODEL_MAX_RETRIES: '0' }),
    runs: binding.runs,
  };
};

const pdf = pdfBytes();
const png = pngBytes(4, 4);

describe('workers-ai: images and files the API accepts', () => {
  it('an https image URL (never fetched by tailgate) reaches the model as its placeholder, not a 502', async () => {
    const { model, runs } = workersAi();
    const prompt: PromptItem[] = [
      {
        type: 'message',
        role: 'user',
        content: [
          { type: 'input_text', text: 'What is this?' },
          { type: 'input_image', image_url: 'https://example.com/logo.png' },
        ],
        seq: 4,
      },
    ];
    await expect(model.generate({ prompt, tools: [] })).resolves.toMatchObject({ output: [{ type: 'message' }] });
    expect(runs).toHaveLength(1);
    expect(JSON.stringify(runs[0])).toContain('[image omitted: image https://example.com/logo.png, item 4]');
  });

  it("a tool result's screenshot reaches the model as its placeholder, and no image is sent", async () => {
    const { model, runs } = workersAi();
    const prompt = [
      { type: 'message', role: 'user', content: 'Click it', seq: 1 },
      { type: 'function_call', call_id: 'call_a', name: 'click', arguments: '{}', seq: 2 },
      {
        type: 'function_call_output',
        call_id: 'call_a',
        output: [
          { type: 'input_text', text: 'clicked' },
          {
            type: 'input_image',
            blob: 'b'.repeat(64),
            media_type: 'image/png',
            bytes: png.length,
            width: 4,
            height: 4,
            data: png,
          },
        ],
        seq: 3,
      },
    ] as PromptItem[];
    await expect(model.generate({ prompt, tools: [] })).resolves.toMatchObject({ output: [{ type: 'message' }] });
    expect(runs).toHaveLength(1);
    const sent = JSON.stringify(runs[0]);
    expect(sent).toContain('[image omitted: image/png 4x4');
    expect(sent).toContain('item 3]');
    expect(sent).not.toContain('image_url');
    expect(sent).not.toContain('data:image/png');
  });

  it('a stored PDF reaches the model as its description, not a 502', async () => {
    const { model, runs } = workersAi();
    const prompt = [
      {
        type: 'message',
        role: 'user',
        content: [
          { type: 'input_text', text: 'Summarize' },
          {
            type: 'input_file',
            filename: 'spec.pdf',
            blob: 'a'.repeat(64),
            media_type: 'application/pdf',
            bytes: pdf.length,
            data: pdf,
          },
        ],
      },
    ] as PromptItem[];
    await expect(model.generate({ prompt, tools: [] })).resolves.toMatchObject({ output: [{ type: 'message' }] });
    expect(runs).toHaveLength(1);
    expect(JSON.stringify(runs[0])).toContain('[application/pdf spec.pdf, 1 KB]');
  });

  it("a turn's receipt counts the image by URL and the file sent as text, not the image sent as bytes", async () => {
    const { model, runs } = workersAi();
    const store = new MemoryStore();
    const sessions = new SessionLog(store);
    const services = servicesFor(sessions, store, model);
    await sessions.create({ id: 'wai' });
    await runTurn(services, 'wai', {
      input: [
        {
          type: 'message',
          role: 'user',
          content: [
            { type: 'input_image', image_url: 'https://example.com/logo.png' },
            { type: 'input_image', image_url: dataUrl('image/png', png) },
            { type: 'input_file', filename: 'spec.pdf', file_data: dataUrl('application/pdf', pdf) },
          ],
        },
      ],
    });
    await services.settle();
    expect(runs).toHaveLength(1);
    const turn = await sessions.getTurn('wai', 1);
    expect(turn.receipt?.media_as_text).toBe(2);
  });
});

/**
 * Workers AI's text models (llama-3.3-70b, the documented one) take messages whose content is a
 * string or text parts only (their input schema, @cloudflare/workers-types): an image goes to
 * them as its text placeholder, in a user message and in a tool result alike, and the token
 * estimate counts it as that text. Its vision models still get the image.
 */
describe('workers-ai: a text model gets no image', () => {
  const screenshot = {
    type: 'input_image',
    blob: 'b'.repeat(64),
    media_type: 'image/png',
    bytes: png.length,
    width: 4,
    height: 4,
    data: png,
  } as const;
  const prompt = [
    { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'What is this?' }, screenshot], seq: 1 },
  ] as PromptItem[];
  const run = async (name: string) => {
    const binding = fakeAiBinding(() => JSON.parse(fixture('workers-ai-text.json')));
    const model = resolveModel(`workers-ai:${name}`, { AI: binding, MODEL_MAX_RETRIES: '0' });
    await model.generate({ prompt, tools: [] });
    return { model, sent: JSON.stringify(binding.runs[0]!.inputs) };
  };

  it('a text model (llama-3.3-70b) gets the image as its placeholder, counted as that text', async () => {
    const { model, sent } = await run('@cf/meta/llama-3.3-70b-instruct-fp8-fast');
    expect(sent).not.toContain('image_url');
    expect(sent).not.toContain('data:image/png');
    expect(sent).toContain(JSON.stringify(partText(screenshot, 1)).slice(1, -1));
    const counter = tokenCounterFor(model.id, {}, mediaSupport(model));
    const item = prompt[0] as Extract<PromptItem, { type: 'message' }>;
    expect(countItemTokens(item, counter)).toBe(
      countItemTokens({ ...item, content: `What is this?\n${partText(screenshot, 1)}` }, counter),
    );
  });

  it.each([
    '@cf/meta/llama-3.2-11b-vision-instruct',
    '@cf/meta/llama-4-scout-17b-16e-instruct',
    '@cf/google/gemma-3-12b-it',
    '@cf/mistralai/mistral-small-3.1-24b-instruct',
  ])('a vision model (%s) still gets the image', async (name) => {
    const { sent } = await run(name);
    expect(sent).toContain('image_url');
    expect(sent).toContain('data:image/png');
  });
});
