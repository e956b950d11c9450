import { describe, expect, it } from 'vitest';
import { mediaParts } from '../../lib/content.ts';
import { sha256Hex } from '../../lib/hash.ts';
import type { PromptItem } from '../../lib/items.ts';
import type { ModelRequest } from '../../lib/models/model.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { wholeImages } from '../../lib/strategies/shorten-images.ts';
import { resolveStrategyConfig } from '../../lib/strategies/strategy-config.ts';
import { previewPrompt, runTurn } from '../../lib/turn/index.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { dataUrl, pngBytes } from '../support/media-fixtures.ts';
import { hookedEcho, recordingEcho, turnWorld } from '../support/turn-world.ts';

const imagesOf = (prompt: readonly PromptItem[]) =>
  prompt.flatMap((item) =>
    mediaParts(item.type === 'message' ? item.content : item.type === 'function_call_output' ? item.output : ''),
  );

describe('a computer-use loop with shorten_images (default strategies)', () => {
  it('reads the blob of each image the prompt sends whole, and never a pruned one', async () => {
    // Records the blob keys each turn gets; fails nothing.
    const blobGets: string[] = [];
    const store = new FaultyStore(new MemoryStore()).failWhen(({ operation, key }) => {
      if (operation === 'get' && key.includes('/blob/')) blobGets.push(key.slice(key.lastIndexOf('/') + 1));
      return false;
    });
    const requests: ModelRequest[] = [];
    const model = hookedEcho('echo', async (request) => void requests.push(request));
    const { sessions, services } = turnWorld(store, model);
    const strategyConfig = { full_images: 2, image_epoch_size: 3 };
    const config = resolveStrategyConfig({ request: strategyConfig });
    await sessions.create({
      id: 'cu',
      tools: [{ type: 'function', name: 'computer' }],
      strategy_config: strategyConfig,
    });
    const shots: string[] = [];
    let moves = 0;
    for (let step = 1; step <= 14; step += 1) {
      const asked = await runTurn(services, 'cu', { input: `call computer {"step":${step}}` });
      const call = asked.output[0]!;
      if (call.type !== 'function_call') throw new Error('expected a call');
      const bytes = pngBytes(1280, 800, 3000 + step, step);
      shots.push(sha256Hex(bytes));
      blobGets.length = 0;
      await runTurn(services, 'cu', {
        input: [
          {
            type: 'function_call_output',
            call_id: call.call_id,
            output: [
              { type: 'input_text', text: `step ${step} done` },
              { type: 'input_image', image_url: dataUrl('image/png', bytes) },
            ],
          },
        ],
      });
      const whole = wholeImages(step, config);
      if (step > 2 && whole === 2) moves += 1;
      const prompt = requests.at(-1)!.prompt;
      const sent = imagesOf(prompt).filter((part) => part.type === 'input_image');
      // The newest `whole` screenshots go whole, with their bytes; the rest are placeholders.
      expect(sent.map((part) => part.blob)).toEqual(shots.slice(-whole));
      expect(sent.every((part) => part.data !== undefined)).toBe(true);
      expect(JSON.stringify(prompt).match(/\[image omitted: image\/png 1280x800/g)?.length ?? 0).toBe(step - whole);
      // Read from storage: all but the turn's own, whose bytes its request brought.
      expect(blobGets.sort()).toEqual(shots.slice(-whole, -1).sort());
      await sessions.pack('cu');
    }
    expect(moves).toBe(4);
  });
});

describe('GET .../prompt with pruned screenshots', () => {
  it('shows each screenshot as the next turn sends it: placeholders named by item seq, the overflow drop', async () => {
    const model = recordingEcho();
    const { sessions, services } = turnWorld(new MemoryStore(), model);
    const strategyConfig = { full_images: 1, image_epoch_size: 2, context_limit: 4000 };
    await sessions.create({
      id: 'cu',
      tools: [{ type: 'function', name: 'computer' }],
      strategy_config: strategyConfig,
    });
    for (let step = 1; step <= 7; step += 1) {
      const asked = await runTurn(services, 'cu', { input: `call computer {"step":${step}}` });
      const call = asked.output[0]!;
      if (call.type !== 'function_call') throw new Error('expected a call');
      // Every third screenshot a full page, over Anthropic's 8000 pixels.
      const [width, height] = step % 3 === 0 ? [1280, 9000] : [1280, 800];
      await runTurn(services, 'cu', {
        input: [
          {
            type: 'function_call_output',
            call_id: call.call_id,
            output: [
              { type: 'input_text', text: `step ${step} done` },
              { type: 'input_image', image_url: dataUrl('image/png', pngBytes(width, height, 3000 + step, step)) },
            ],
          },
        ],
      });
    }
    const preview = await previewPrompt(services, 'cu', {});
    const turn = await runTurn(services, 'cu', { input: [] });
    const sent = model.prompts.at(-1)!;
    const seen = (prompt: PromptItem[]) =>
      JSON.stringify(prompt, (key, value) => (['data', 'created_at', 'pending'].includes(key) ? undefined : value));
    // The window drops the oldest pairs; of those kept, step 6's full-page screenshot is
    // pruned, to the text named by its item's seq (an adapter sends the same for an image its
    // provider does not take: lib/models/media-parts.ts).
    expect(turn.context.overflow_dropped?.tool_pairs).toBeGreaterThan(0);
    expect(preview.context.overflow_dropped).toEqual(turn.context.overflow_dropped);
    expect(seen(preview.items).match(/\[image omitted: [^\]]*\]/g)).toEqual([
      '[image omitted: image/png 1280x9000, 3 KB, item 23]',
    ]);
    expect(seen(sent)).toEqual(seen(preview.items));
  });
});

describe('a turn whose image write fails', () => {
  it('fails with that error, and no record naming the image lands', async () => {
    const store = new FaultyStore(new MemoryStore()).failWhen(
      ({ operation, key }) => operation === 'put' && key.includes('/blob/'),
    );
    const records: string[] = [];
    store.failWhen(({ operation, key }) => {
      if (operation === 'put' && /\/turn\/.*\/\d+$/.test(key)) records.push(key);
      return false;
    });
    const { sessions, services } = turnWorld(
      store,
      hookedEcho('echo', async () => undefined),
    );
    await sessions.create({ id: 's' });
    await runTurn(services, 's', { input: 'first' });
    records.length = 0;
    const image = { type: 'input_image' as const, image_url: dataUrl('image/png', pngBytes(64, 48)) };
    const input = [{ type: 'message' as const, role: 'user' as const, content: [image] }];
    await expect(runTurn(services, 's', { input })).rejects.toMatchObject({ name: 'StorageError' });
    expect(records).toEqual([]);
    expect((await sessions.get('s')).counts).toMatchObject({ turns: 1, items: 2 });
  });
});
