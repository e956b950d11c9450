import { describe, expect, it } from 'vitest';
import type { PromptItem } from '../../lib/items.ts';
import { ANTHROPIC_MAX_IMAGE_SIDE } from '../../lib/models/anthropic-model.ts';
import { type MediaSupport, mediaSupport } from '../../lib/models/media-parts.ts';
import type { Model } from '../../lib/models/model.ts';
import { resolveModel } from '../../lib/models/resolve-model.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { previewPrompt, runTurn } from '../../lib/turn/index.ts';
import { dataUrl, pngBytes } from '../support/media-fixtures.ts';
import { recordingEcho, turnWorld } from '../support/turn-world.ts';

/**
 * A screenshot the provider gets as a text placeholder (a tool result's where the model takes no
 * media there) counts as that text against `context_limit`, not as an image: the window keeps
 * what fits as sent. One the provider gets as an image (Anthropic's tool_result image, Chat
 * Completions' image after the tool message) counts its tokens.
 */

/** The echo model recording its prompts, with a provider's media support. */
function providerEcho(id: string, media: Partial<MediaSupport>) {
  const echo = recordingEcho();
  return { ...echo, id, assistantMedia: false, ...media };
}

/** Four computer-use steps, each a call and its output with a 1280x800 screenshot, all sent whole. */
async function screenshots(model: Model) {
  const { sessions, services } = turnWorld(new MemoryStore(), model);
  // About 1,400 tokens a screenshot as an image, 20 as its placeholder; 2,250 for the prompt.
  const strategyConfig = { full_images: 10, context_limit: 3000, response_reserve: 750 };
  await sessions.create({ id: 'cu', tools: [{ type: 'function', name: 'computer' }], strategy_config: strategyConfig });
  for (let step = 1; step <= 4; step += 1) {
    const asked = await runTurn(services, 'cu', { input: `call computer {"step":${step}}` });
    const call = asked.output[0]!;
    if (call.type !== 'function_call') throw new Error('expected a call');
    await runTurn(services, 'cu', {
      input: [
        {
          type: 'function_call_output',
          call_id: call.call_id,
          output: [
            { type: 'input_text', text: `step ${step} done` },
            { type: 'input_image', image_url: dataUrl('image/png', pngBytes(1280, 800, 3000 + step, step)) },
          ],
        },
      ],
    });
  }
  const preview = await previewPrompt(services, 'cu', {});
  const turn = await runTurn(services, 'cu', { input: [] });
  return { preview, turn };
}

const outputs = (prompt: readonly PromptItem[]) => prompt.filter((item) => item.type === 'function_call_output').length;
const seen = (prompt: readonly PromptItem[]) =>
  JSON.stringify(prompt, (key, value) => (['data', 'created_at', 'pending'].includes(key) ? undefined : value));

describe('screenshots against context_limit', () => {
  it('where tool results take no media, screenshots count as their placeholders: none is dropped', async () => {
    const model = providerEcho('workers-ai:@cf/meta/llama-3.2-11b-vision-instruct', {
      toolResultMedia: false,
      fileUrls: false,
      imageBytesOnly: true,
    });
    const { preview, turn } = await screenshots(model);
    expect(turn.context.overflow_dropped).toBeUndefined();
    expect(outputs(model.prompts.at(-1)!)).toBe(4);
    expect(preview.context.overflow_dropped).toBeUndefined();
    expect(seen(preview.items)).toEqual(seen(model.prompts.at(-1)!));
  });

  it.each([
    {
      name: 'an Anthropic',
      id: 'anthropic:claude-sonnet-4-5',
      media: { toolResultMedia: true, fileUrls: true, maxImageSide: ANTHROPIC_MAX_IMAGE_SIDE },
    },
    {
      name: 'a Chat Completions',
      id: 'openai-compatible:local-model',
      media: mediaSupport(
        resolveModel('openai-compatible:local-model', {
          OPENAI_COMPATIBLE_BASE_URL: 'http://127.0.0.1:9/v1',
          OPENAI_COMPATIBLE_IMAGES: 'true',
        }),
      ),
    },
  ])(
    'on $name model, screenshots sent as images count their tokens: the oldest pairs are dropped',
    async ({ id, media }) => {
      const model = providerEcho(id, media);
      const { preview, turn } = await screenshots(model);
      expect(turn.context.overflow_dropped?.tool_pairs).toBeGreaterThan(0);
      expect(outputs(model.prompts.at(-1)!)).toBe(1);
      expect(preview.context.overflow_dropped).toEqual(turn.context.overflow_dropped);
      expect(seen(preview.items)).toEqual(seen(model.prompts.at(-1)!));
    },
  );
});
