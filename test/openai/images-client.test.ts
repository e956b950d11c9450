import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { sha256Hex } from '../../lib/hash.ts';
import { dataUrl, pdfBytes, pngBytes } from '../support/media-fixtures.ts';
import { clientOnTailgate, tailgateGet } from './server.ts';

// Images and files through the OpenAI-compatible facade, with the official client, against the
// real app on a loopback Node server (echo model, which describes each image it receives).
const world = clientOnTailgate({ MAX_FILE_BYTES: '100' });

const screen = pngBytes(1280, 800, 3000, 5);
const screenUrl = dataUrl('image/png', screen);

async function blobKeys(): Promise<string[]> {
  return (await world.tailgate.store.list('', { limit: 1000 })).objects
    .map((object) => object.key)
    .filter((key) => key.includes('/blob/'));
}

describe('images through the Responses API', () => {
  it('takes input_image in messages and outputs, stores a screenshot once, and the model sees it', async () => {
    const first = await world.client.responses.create({
      model: 'echo',
      input: [
        {
          role: 'user',
          content: [
            { type: 'input_text', text: 'look' },
            { type: 'input_image', image_url: screenUrl, detail: 'high' },
          ],
        },
      ],
    });
    expect(first.output_text).toBe('echo: look [image/png 1280x800, 3 KB]');
    const second = await world.client.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: [
        { type: 'function_call', call_id: 'c1', name: 'screenshot', arguments: '{}' },
        {
          type: 'function_call_output',
          call_id: 'c1',
          output: [
            { type: 'input_text', text: 'shot' },
            { type: 'input_image', image_url: screenUrl, detail: 'original' },
          ],
        },
        { role: 'user', content: 'and now?' },
      ],
    });
    expect(second.output_text).toBe('echo: and now? [image/png 1280x800, 3 KB] [image/png 1280x800, 3 KB]');
    expect(await blobKeys()).toHaveLength(1);

    const sessionId =
      second.conversation?.id ?? (await tailgateGet(world.tailgate.baseURL, '/sessions')).sessions[0].id;
    const items = await tailgateGet(world.tailgate.baseURL, `/sessions/${sessionId}/items`);
    const output = items.items.find((item: any) => item.type === 'function_call_output');
    expect(output.output[1]).toEqual({
      type: 'input_image',
      detail: 'original',
      blob: sha256Hex(screen),
      media_type: 'image/png',
      bytes: screen.length,
      width: 1280,
      height: 800,
    });
  });

  it('with store: false describes the image without storing it', async () => {
    const before = await blobKeys();
    const response = await world.client.responses.create({
      model: 'echo',
      store: false,
      input: [{ role: 'user', content: [{ type: 'input_image', image_url: screenUrl, detail: 'auto' }] }],
    });
    expect(response.output_text).toBe('echo:  [image/png 1280x800, 3 KB]');
    expect(await blobKeys()).toEqual(before);
  });

  it('takes an input_file, and refuses one over MAX_FILE_BYTES naming the part', async () => {
    const pdf = Buffer.from(pdfBytes()).toString('base64');
    const file = await world.client.responses.create({
      model: 'echo',
      input: [{ role: 'user', content: [{ type: 'input_file', filename: 'a.pdf', file_data: pdf }] }],
    });
    expect(file.output_text).toBe('echo:  [application/pdf a.pdf, 1 KB]');
    const large = Buffer.concat([Buffer.from(pdfBytes()), Buffer.alloc(200)]).toString('base64');
    const refused = await world.client.responses
      .create({
        model: 'echo',
        input: [{ role: 'user', content: [{ type: 'input_file', filename: 'b.pdf', file_data: large }] }],
      })
      .catch((error: unknown) => error);
    expect(refused).toMatchObject({ status: 413 });
    expect(refused).toMatchObject({ param: 'input[0].content[0]' });
    expect((refused as Error).message).toContain(
      'input[0].content[0] is 215 bytes; at most 100 are accepted (MAX_FILE_BYTES raises it)',
    );
  });

  it("names a refused image by its position in the request's input, stored or not", async () => {
    const gif = dataUrl('image/gif', screen);
    const input = [
      { role: 'developer' as const, content: 'be brief' },
      { role: 'user' as const, content: 'look' },
      { type: 'function_call' as const, call_id: 'c1', name: 'screenshot', arguments: '{}' },
      {
        type: 'function_call_output' as const,
        call_id: 'c1',
        output: [{ type: 'input_image' as const, image_url: gif }],
      },
    ];
    for (const store of [true, false]) {
      const refused = await world.client.responses
        .create({ model: 'echo', store, input })
        .catch((error: unknown) => error);
      expect(refused, `store: ${store}`).toBeInstanceOf(OpenAI.BadRequestError);
      expect(refused, `store: ${store}`).toMatchObject({ param: 'input[3].output[0]' });
      expect((refused as Error).message).toBe('400 input[3].output[0]: declared image/gif but the bytes are image/png');
    }
  });
});

describe('images through Chat Completions', () => {
  it('takes image_url parts in a user message', async () => {
    const completion = await world.client.chat.completions.create({
      model: 'echo',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'what is this?' },
            { type: 'image_url', image_url: { url: screenUrl, detail: 'low' } },
          ],
        },
      ],
    });
    expect(completion.choices[0]!.message.content).toBe('echo: what is this? [image/png 1280x800, 3 KB]');
  });

  it('refuses an image whose bytes are not the declared type', async () => {
    const refused = await world.client.chat.completions
      .create({
        model: 'echo',
        messages: [
          { role: 'user', content: [{ type: 'image_url', image_url: { url: dataUrl('image/gif', screen) } }] },
        ],
      })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect(refused).toMatchObject({ param: 'messages[0].content[0]' });
    expect((refused as Error).message).toContain(
      'messages[0].content[0]: declared image/gif but the bytes are image/png',
    );
  });
});
