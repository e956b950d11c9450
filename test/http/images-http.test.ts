import { afterEach, describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { sha256Hex } from '../../lib/hash.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { encodeBase64 } from '../../lib/media.ts';
import { type GetOptions, listAll, type ObjectStore, type StoredObject } from '../../lib/store/object-store.ts';
import { CountingStore } from '../support/counting-store.ts';
import { dataUrl, jpegBytes, pdfBytes, photosMessage, pngBytes } from '../support/media-fixtures.ts';
import { fixture, startFakeProvider, type FakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { SIGNING_KEY, TOKEN } from './http-suite.ts';
import { ANTHROPIC_MANY_IMAGES } from '../../lib/models/anthropic-model.ts';
import { oldestOver } from '../../lib/models/media-parts.ts';
import { wholeImages } from '../../lib/strategies/shorten-images.ts';
import { resolveStrategyConfig } from '../../lib/strategies/strategy-config.ts';

const environment: Record<string, string> = {
  API_TOKEN: TOKEN,
  TOKEN_SIGNING_KEY: SIGNING_KEY,
  MAX_IMAGE_BYTES: '2000000',
  MAX_FILE_BYTES: '1000',
};

let provider: FakeProvider | undefined;
afterEach(async () => {
  await provider?.close();
  provider = undefined;
});

function setup(extra: Record<string, string> = {}, store: ObjectStore = new MemoryStore()) {
  const app = createApp({ store: () => store, readEnvironment: (c) => c.env ?? {}, log: () => undefined });
  const call = async (method: string, path: string, body?: unknown, token = TOKEN, ndjson?: string) => {
    const type = ndjson === undefined ? 'application/json' : 'application/x-ndjson';
    const response = await app.request(
      path,
      {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': type },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        ...(ndjson === undefined ? {} : { body: ndjson }),
      },
      { ...environment, ...extra },
    );
    return response;
  };
  const json = async (method: string, path: string, body?: unknown) => {
    const response = await call(method, path, body);
    return { status: response.status, body: (await response.json()) as any };
  };
  const blobKeys = async () =>
    (await listAll(store, '')).map((object) => object.key).filter((key) => key.includes('/blob/'));
  return { call, json, blobKeys };
}

/** Counts the gets of blobs. */
class BlobReads extends CountingStore {
  blobReads = 0;

  override async get(key: string, options?: GetOptions): Promise<StoredObject | null> {
    if (key.includes('/blob/')) this.blobReads += 1;
    return super.get(key, options);
  }
}

/**
 * A user message holding an image part of `url`, sent on every route that takes input (an append
 * and a turn of `session`, a response stored and not, a chat completion): each answer by route.
 */
async function sentOnEveryRoute(
  json: (method: string, path: string, body?: unknown) => Promise<{ status: number; body: any }>,
  session: string,
  message: object,
  url: string,
) {
  return {
    appended: await json('POST', `/v1/sessions/${session}/items`, { items: [message] }),
    turn: await json('POST', `/v1/sessions/${session}/turns`, { input: [message] }),
    response: await json('POST', '/v1/responses', { model: 'echo', input: [message] }),
    unstored: await json('POST', '/v1/responses', { model: 'echo', store: false, input: [message] }),
    chat: await json('POST', '/v1/chat/completions', {
      model: 'echo',
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url } }] }],
    }),
  };
}

const screenshot = pngBytes(1280, 800, 1_500_000, 9);

const screenshotOutputOf = (callId: string, bytes: Uint8Array) => ({
  type: 'function_call_output',
  call_id: callId,
  output: [
    { type: 'input_text', text: 'page loaded' },
    { type: 'input_image', image_url: dataUrl('image/png', bytes) },
  ],
});
const screenshotOutput = (callId: string) => screenshotOutputOf(callId, screenshot);

describe('images over HTTP', () => {
  it('takes a screenshot over MAX_ITEM_BYTES, stores it once, lists its reference, serves its bytes', async () => {
    const { call, json, blobKeys } = setup();
    expect((await json('POST', '/v1/sessions', { id: 'shots' })).status).toBe(201);
    const items = [
      { type: 'function_call', call_id: 'c1', name: 'screenshot', arguments: '{}' },
      screenshotOutput('c1'),
      { type: 'function_call', call_id: 'c2', name: 'screenshot', arguments: '{}' },
      screenshotOutput('c2'),
    ];
    const appended = await json('POST', '/v1/sessions/shots/items', { items });
    expect(appended).toMatchObject({ status: 201, body: { first_seq: 1, last_seq: 4 } });
    expect(await blobKeys()).toHaveLength(1);

    const sha256 = sha256Hex(screenshot);
    const listed = await json('GET', '/v1/sessions/shots/items');
    expect(listed.body.items[0]).toMatchObject({
      seq: 4,
      output: [
        { type: 'input_text', text: 'page loaded' },
        {
          type: 'input_image',
          blob: sha256,
          media_type: 'image/png',
          bytes: screenshot.length,
          width: 1280,
          height: 800,
        },
      ],
    });

    const minted = await json('POST', '/v1/tokens', { scopes: ['session:read'], session_id: 'shots' });
    const blob = await call('GET', `/v1/sessions/shots/blobs/${sha256}`, undefined, minted.body.token);
    expect(blob.status).toBe(200);
    expect(blob.headers.get('content-type')).toBe('image/png');
    // Bytes a client chose: a browser opening them neither guesses another type nor runs anything in them.
    expect(blob.headers.get('x-content-type-options')).toBe('nosniff');
    expect(blob.headers.get('content-security-policy')).toBe("default-src 'none'; sandbox");
    expect(sha256Hex(new Uint8Array(await blob.arrayBuffer()))).toBe(sha256);

    await json('POST', '/v1/sessions', { id: 'someone-else' });
    const other = await json('POST', '/v1/tokens', { scopes: ['session:read'], session_id: 'someone-else' });
    const refused = await call('GET', `/v1/sessions/shots/blobs/${sha256}`, undefined, other.body.token);
    expect(refused.status).toBe(403);
    const missing = await json('GET', `/v1/sessions/shots/blobs/${'0'.repeat(64)}`);
    expect(missing).toMatchObject({ status: 404, body: { error: { code: 'not_found' } } });
    const malformed = await json('GET', '/v1/sessions/shots/blobs/not-a-hash');
    expect(malformed).toMatchObject({ status: 400, body: { error: { code: 'invalid_request' } } });
  });

  it('refuses a part over its limit, or of the wrong type, naming it, and stores nothing', async () => {
    const { json, blobKeys } = setup();
    await json('POST', '/v1/sessions', { id: 'bad' });
    const file = { type: 'input_file', filename: 'big.pdf', file_data: Buffer.alloc(2000).toString('base64') };
    const tooLarge = await json('POST', '/v1/sessions/bad/items', {
      items: [screenshotOutput('c1'), { type: 'message', role: 'user', content: [file] }],
    });
    expect(tooLarge).toMatchObject({
      status: 413,
      body: {
        error: {
          code: 'payload_too_large',
          message: 'items[1].content[0] is 2000 bytes; at most 1000 are accepted (MAX_FILE_BYTES raises it)',
        },
      },
    });
    const mislabelled = await json('POST', '/v1/sessions/bad/turns', {
      input: [
        {
          type: 'message',
          role: 'user',
          content: [{ type: 'input_image', image_url: dataUrl('image/png', jpegBytes(4, 4)) }],
        },
      ],
    });
    expect(mislabelled).toMatchObject({
      status: 400,
      body: {
        error: {
          code: 'invalid_request',
          message: 'input[0].content[0]: declared image/png but the bytes are image/jpeg',
          details: { part: 'input[0].content[0]' },
        },
      },
    });
    expect(await blobKeys()).toEqual([]);
    expect((await json('GET', '/v1/sessions/bad/items')).body.items).toEqual([]);
  });

  it('names a refused part in details.field too, dotted, as every other check names its field', async () => {
    const { json } = setup();
    await json('POST', '/v1/sessions', { id: 'dotted' });
    const file = { type: 'input_file', filename: 'big.pdf', file_data: Buffer.alloc(2000).toString('base64') };
    const tooLarge = await json('POST', '/v1/sessions/dotted/items', {
      items: [
        { type: 'message', role: 'user', content: 'hi' },
        { type: 'message', role: 'user', content: [file] },
      ],
    });
    expect(tooLarge.body.error.details).toMatchObject({ part: 'items[1].content[0]', field: 'items.1.content.0' });
    const mislabelled = await json('POST', '/v1/sessions/dotted/turns', {
      input: [
        {
          type: 'message',
          role: 'user',
          content: [
            { type: 'input_text', text: 'look' },
            { type: 'input_image', image_url: dataUrl('image/png', jpegBytes(4, 4)) },
          ],
        },
      ],
    });
    expect(mislabelled.body.error.details).toEqual({ part: 'input[0].content[1]', field: 'input.0.content.1' });
  });

  it('sends the image to the model with the turn, and deletes the blobs with the session', async () => {
    const { call, json, blobKeys } = setup();
    await json('POST', '/v1/sessions', { id: 'seen' });
    const turn = await json('POST', '/v1/sessions/seen/turns', {
      model: 'echo',
      input: [
        {
          type: 'message',
          role: 'user',
          content: [
            { type: 'input_text', text: 'what is this?' },
            { type: 'input_image', image_url: dataUrl('image/png', screenshot) },
          ],
        },
      ],
    });
    expect(turn.status).toBe(200);
    expect(turn.body.output[0].content).toBe('echo: what is this? [image/png 1280x800, 1465 KB]');
    expect(await blobKeys()).toHaveLength(1);
    expect((await call('DELETE', '/v1/sessions/seen')).status).toBe(204);
    expect(await blobKeys()).toEqual([]);
  });

  /** The two providers, with what the receipt counts as text of one image or file they cannot take. */
  const providers = [
    { model: 'openai-compatible:test-model', answer: 'openai-chat-text.json', mediaAsText: 1 },
    { model: 'anthropic:claude-sonnet-4-5', answer: 'anthropic-message-text.json', mediaAsText: undefined },
  ];
  /** The app with both providers pointed at a fake one answering `answer`. */
  const withProvider = async (answer: string, store?: ObjectStore) => {
    provider = await startFakeProvider(() => ({ text: fixture(answer) }));
    const providers = {
      OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
      OPENAI_COMPATIBLE_IMAGES: 'true',
      OPENAI_COMPATIBLE_API_KEY: 'sk-test',
      ANTHROPIC_BASE_URL: provider.baseURL,
      ANTHROPIC_API_KEY: 'sk-ant-test',
      MODEL_MAX_RETRIES: '0',
    };
    return setup(providers, store);
  };

  it.each([
    { ...providers[0]!, blobReads: 1, sent: /"type":"image_url"/ },
    { ...providers[1]!, blobReads: 1, sent: /"type":"image"/ },
  ])('$model: a tool-result image reads its blob, and goes as an image', async (each) => {
    const store = new BlobReads(new MemoryStore());
    const { json } = await withProvider(each.answer, store);
    await json('POST', '/v1/sessions', { id: 'tool-image' });
    const output = [{ type: 'input_image', image_url: dataUrl('image/png', pngBytes(64, 48)) }];
    const items = [
      { type: 'message', role: 'user', content: 'take a screenshot' },
      { type: 'function_call', call_id: 'toolu_1', name: 'screenshot', arguments: '{}' },
      { type: 'function_call_output', call_id: 'toolu_1', output },
    ];
    expect((await json('POST', '/v1/sessions/tool-image/items', { items })).status).toBe(201);
    const turn = await json('POST', '/v1/sessions/tool-image/turns', { model: each.model, input: 'what do you see?' });
    expect(turn.status, JSON.stringify(turn.body)).toBe(200);
    expect(JSON.stringify(provider!.requests[0]!.body)).toMatch(each.sent);
    expect(store.blobReads).toBe(each.blobReads);
  });

  it.each(providers)(
    '$model: the receipt counts a tool-result file_url it cannot take as text, not the image it gets ($mediaAsText)',
    async ({ model, answer, mediaAsText }) => {
      const { json } = await withProvider(answer);
      await json('POST', '/v1/sessions', { id: 'placeholders' });
      const small = pngBytes(64, 48);
      const turn = await json('POST', '/v1/sessions/placeholders/turns', {
        model,
        input: [
          { type: 'message', role: 'user', content: [{ type: 'input_image', image_url: dataUrl('image/png', small) }] },
          { type: 'function_call', call_id: 'toolu_1', name: 'screenshot', arguments: '{}' },
          {
            type: 'function_call_output',
            call_id: 'toolu_1',
            output: [
              { type: 'input_image', image_url: dataUrl('image/png', small) },
              { type: 'input_file', file_url: 'https://example.com/spec.pdf' },
            ],
          },
        ],
      });
      expect(turn.status).toBe(200);
      // Both images reach the provider as images: Chat Completions has the tool result's after its tool message.
      expect(JSON.stringify(provider!.requests[0]!.body).match(/"type":"image(_url)?"/g)).toHaveLength(2);
      const detail = await json('GET', '/v1/sessions/placeholders/turns/1');
      expect(detail.body.receipt.media_as_text).toBe(mediaAsText);
    },
  );

  it.each(providers)(
    '$model: an image in an assistant message goes as a text placeholder, and the receipt counts it',
    async ({ model, answer }) => {
      const { json } = await withProvider(answer);
      await json('POST', '/v1/sessions', { id: 'assistant-image' });
      const turn = await json('POST', '/v1/sessions/assistant-image/turns', {
        model,
        input: [
          { type: 'message', role: 'user', content: 'draw me something' },
          {
            type: 'message',
            role: 'assistant',
            content: [
              { type: 'input_text', text: 'here it is' },
              { type: 'input_image', image_url: dataUrl('image/png', pngBytes(64, 48)) },
            ],
          },
          { type: 'message', role: 'user', content: 'thanks' },
        ],
      });
      expect(turn.status, JSON.stringify(turn.body)).toBe(200);
      const sent = JSON.stringify((provider!.requests[0]!.body as any).messages);
      expect(sent).not.toMatch(/"type":"image(_url)?"/);
      expect(sent).toContain('[image omitted: image/png 64x48, 1 KB, item 2]');
      const detail = await json('GET', '/v1/sessions/assistant-image/turns/1');
      expect(detail.body.receipt.media_as_text).toBe(1);
    },
  );

  it.each(providers)(
    '$model: a file_url the provider cannot take goes as text, and the receipt counts it ($mediaAsText)',
    async ({ model, answer, mediaAsText }) => {
      const { json } = await withProvider(answer);
      await json('POST', '/v1/sessions', { id: 'file-url' });
      const url = 'https://example.com/spec.pdf';
      const turn = await json('POST', '/v1/sessions/file-url/turns', {
        model,
        input: [
          {
            type: 'message',
            role: 'user',
            content: [
              { type: 'input_text', text: 'read' },
              { type: 'input_file', file_url: url },
            ],
          },
        ],
      });
      expect(turn.status, JSON.stringify(turn.body)).toBe(200);
      const sent = (provider!.requests[0]!.body as any).messages.at(-1).content;
      expect(sent).toEqual(
        mediaAsText
          ? [
              { type: 'text', text: 'read' },
              { type: 'text', text: `[file ${url}]` },
            ]
          : [
              { type: 'text', text: 'read' },
              { type: 'document', source: { type: 'url', url }, cache_control: { type: 'ephemeral' } },
            ],
      );
      const detail = await json('GET', '/v1/sessions/file-url/turns/1');
      expect(detail.body.receipt.media_as_text).toBe(mediaAsText);
    },
  );

  it('anthropic: an image over 8000 pixels on a side goes as a counted text placeholder, its blob unread', async () => {
    const store = new BlobReads(new MemoryStore());
    const { json } = await withProvider('anthropic-message-text.json', store);
    await json('POST', '/v1/sessions', { id: 'full-page', model: 'anthropic:claude-sonnet-4-5' });
    const image = (width: number, height: number) => ({
      type: 'input_image',
      image_url: dataUrl('image/png', pngBytes(width, height)),
    });
    const turn = await json('POST', '/v1/sessions/full-page/turns', {
      input: [
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'full page' }, image(1280, 9000)] },
        { type: 'function_call', call_id: 'toolu_1', name: 'screenshot', arguments: '{}' },
        {
          type: 'function_call_output',
          call_id: 'toolu_1',
          output: [{ type: 'input_text', text: 'wide' }, image(8001, 600)],
        },
        { type: 'function_call', call_id: 'toolu_2', name: 'screenshot', arguments: '{}' },
        { type: 'function_call_output', call_id: 'toolu_2', output: [image(1280, 8000)] },
      ],
    });
    expect(turn.status, JSON.stringify(turn.body)).toBe(200);
    const sent = JSON.stringify((provider!.requests[0]!.body as any).messages);
    expect(sent).toMatch(/"text":"\[image omitted: image\/png 1280x9000, [^\]]*, item 1\]"/);
    expect(sent).toMatch(/"text":"\[image omitted: image\/png 8001x600, [^\]]*, item 3\]"/);
    expect(sent.match(/"type":"image"/g)).toHaveLength(1);
    // The turn's own images go from the bytes its request brought: none is read back.
    expect(store.blobReads).toBe(0);
    const again = await json('POST', '/v1/sessions/full-page/turns', { input: 'again' });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(JSON.stringify((provider!.requests[1]!.body as any).messages).match(/"type":"image"/g)).toHaveLength(1);
    // Read from the history: only the image sent.
    expect(store.blobReads).toBe(1);
    const detail = await json('GET', '/v1/sessions/full-page/turns/1');
    expect(detail.body.receipt.media_as_text).toBe(2);
    // Stored as sent: the listing keeps every image's reference.
    const items = await json('GET', '/v1/sessions/full-page/items');
    expect(JSON.stringify(items.body.items).match(/"type":"input_image"/g)).toHaveLength(3);
  });

  describe('one message of many photos', () => {
    const photos = photosMessage;
    /** The images the provider got in request `index`, and the text placeholders standing for images. */
    const sent = (index: number) => {
      const body = JSON.stringify((provider!.requests[index]!.body as any).messages);
      return {
        images: body.match(/"type":"image"/g)?.length ?? 0,
        placeholders: body.match(/\[image omitted: image\/png 64x48/g)?.length ?? 0,
      };
    };
    const config = resolveStrategyConfig({});

    it('anthropic: a turn sends every photo of its input, and the next turn prunes them as usual', async () => {
      const { json } = await withProvider('anthropic-message-text.json');
      await json('POST', '/v1/sessions', { id: 'album', model: 'anthropic:claude-sonnet-4-5' });
      const turn = await json('POST', '/v1/sessions/album/turns', { input: [photos(20, 'compare them')] });
      expect(turn.status, JSON.stringify(turn.body)).toBe(200);
      expect(sent(0)).toEqual({ images: 20, placeholders: 0 });
      // The preview, no input, is the next turn's prompt: the photos pruned as any older images.
      const preview = JSON.stringify((await json('GET', '/v1/sessions/album/prompt')).body.items);
      const next = await json('POST', '/v1/sessions/album/turns', { input: 'which is darkest?' });
      expect(next.status, JSON.stringify(next.body)).toBe(200);
      const whole = wholeImages(20, config);
      expect(whole).toBeLessThan(20);
      expect(sent(1)).toEqual({ images: whole, placeholders: 20 - whole });
      expect(preview.match(/"type":"input_image"/g)).toHaveLength(whole);
      expect(preview.match(/\[image omitted: image\/png 64x48/g)).toHaveLength(20 - whole);
    });

    it('anthropic: an input over the 100 images a request takes sends its oldest as text, unrefused', async () => {
      const { json } = await withProvider('anthropic-message-text.json');
      await json('POST', '/v1/sessions', { id: 'many', model: 'anthropic:claude-sonnet-4-5' });
      const turn = await json('POST', '/v1/sessions/many/turns', { input: [photos(101, 'sort them')] });
      expect(turn.status, JSON.stringify(turn.body)).toBe(200);
      const most = ANTHROPIC_MANY_IMAGES.most;
      const asText = oldestOver(new Array<number>(101).fill(1), most);
      expect(sent(0)).toEqual({ images: 101 - asText, placeholders: asText });
      expect(sent(0).images).toBeLessThanOrEqual(most);
    });

    it('anthropic: a store: false response sends every photo the client added since the answer', async () => {
      const { json } = await withProvider('anthropic-message-text.json');
      const model = 'anthropic:claude-sonnet-4-5';
      const first = [photos(20, 'compare them')];
      const asked = await json('POST', '/v1/responses', { model, store: false, input: first });
      expect(asked.status, JSON.stringify(asked.body)).toBe(200);
      expect(sent(0)).toEqual({ images: 20, placeholders: 0 });
      const again = await json('POST', '/v1/responses', {
        model,
        store: false,
        input: [...first, { type: 'message', role: 'assistant', content: 'they differ' }, photos(2, 'and these?')],
      });
      expect(again.status, JSON.stringify(again.body)).toBe(200);
      // The first 20 are pruned as a stored session's next turn prunes them; the two added go whole.
      const whole = Math.max(wholeImages(22, config), 2);
      expect(sent(1)).toEqual({ images: whole, placeholders: 22 - whole });
    });
  });

  it('prompt_chars counts a screenshot output by its characters, as prefix_reused_chars does', async () => {
    const { json } = setup();
    await json('POST', '/v1/sessions', { id: 'chars', instructions: 'Operate the computer.' });
    const first = await json('POST', '/v1/sessions/chars/turns', {
      input: [
        { type: 'message', role: 'user', content: 'take a screenshot' },
        { type: 'function_call', call_id: 'c1', name: 'screenshot', arguments: '{}' },
        screenshotOutputOf('c1', pngBytes(64, 48)),
      ],
    });
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    // More than the texts' characters: the output's parts count by their characters, not how many there are.
    const text = 'Operate the computer.take a screenshotscreenshot{}page loaded'.length;
    expect(first.body.context.prompt_chars).toBeGreaterThan(text);
    expect((await json('POST', '/v1/sessions/chars/turns', { input: 'and now?' })).status).toBe(200);
    // Turn 2 only appends to turn 1's prompt: all of it is reused.
    const turns = await json('GET', '/v1/sessions/chars/turns');
    expect(turns.body.turns[0].prefix_reused_chars).toBe(first.body.context.prompt_chars);
  });

  it('refuses an https image_url or file_url that is no URL with 400 on every route that takes input', async () => {
    const { json } = await withProvider('anthropic-message-text.json');
    await json('POST', '/v1/sessions', { id: 'bad-url', model: 'anthropic:claude-sonnet-4-5' });
    const image = { type: 'input_image', image_url: 'https://exa mple.com/shot.png' };
    const message = { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'look' }, image] };
    const refusals = {
      ...(await sentOnEveryRoute(json, 'bad-url', message, image.image_url)),
      file: await json('POST', '/v1/sessions/bad-url/items', {
        items: [{ ...message, content: [{ type: 'input_file', file_url: 'https://exa mple.com/a.pdf' }] }],
      }),
    };
    for (const [route, refused] of Object.entries(refusals))
      expect({ route, status: refused.status }).toEqual({ route, status: 400 });
    expect(refusals.appended.body.error).toMatchObject({
      code: 'invalid_request',
      message: 'items[0].content[1]: image_url must be an https:// or data: URL',
    });
    // A turn names the part by its place in the turn's `input`, as its body has it.
    expect(refusals.turn.body.error).toMatchObject({
      message: 'input[0].content[1]: image_url must be an https:// or data: URL',
      details: { part: 'input[0].content[1]' },
    });
    expect((await json('GET', '/v1/sessions/bad-url/items')).body.items).toEqual([]);
    // Nothing was stored to fail the session's later turns.
    const turn = await json('POST', '/v1/sessions/bad-url/turns', { input: 'and?' });
    expect(turn.status, JSON.stringify(turn.body)).toBe(200);
  });

  it('refuses a screenshot cut short with 400 on every route; DATA: in capitals is a data: URL', async () => {
    const { json } = await withProvider('anthropic-message-text.json');
    await json('POST', '/v1/sessions', { id: 'cut', model: 'anthropic:claude-sonnet-4-5' });
    const whole = dataUrl('image/png', pngBytes(64, 48, 100));
    // A client that cut the base64 short: the PNG stops before its IEND chunk.
    const image = { type: 'input_image', image_url: whole.slice(0, -40) };
    const message = { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'look' }, image] };
    const refusals = {
      ...(await sentOnEveryRoute(json, 'cut', message, image.image_url)),
      output: await json('POST', '/v1/sessions/cut/items', {
        items: [{ type: 'function_call_output', call_id: 'c1', output: [image] }],
      }),
    };
    for (const [route, refused] of Object.entries(refusals))
      expect({ route, status: refused.status }).toEqual({ route, status: 400 });
    expect(refusals.turn.body.error).toMatchObject({
      code: 'invalid_request',
      message: 'input[0].content[1]: the bytes are not a whole image/png (cut short?)',
      details: { part: 'input[0].content[1]', field: 'input.0.content.1' },
    });
    expect((await json('GET', '/v1/sessions/cut/items')).body.items).toEqual([]);
    const turn = await json('POST', '/v1/sessions/cut/turns', { input: 'and?' });
    expect(turn.status, JSON.stringify(turn.body)).toBe(200);
    const upper = await json('POST', '/v1/chat/completions', {
      model: 'echo',
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: `DATA${whole.slice(4)}` } }] }],
    });
    expect(upper.status, JSON.stringify(upper.body)).toBe(200);
  });

  it('exports images as data: URLs and an import stores them again under the new session', async () => {
    const { call, json, blobKeys } = setup();
    await json('POST', '/v1/sessions', { id: 'original' });
    const small = pngBytes(64, 48, 100, 4);
    const items = [
      { type: 'function_call', call_id: 'c1', name: 'screenshot', arguments: '{}' },
      screenshotOutputOf('c1', small),
    ];
    await json('POST', '/v1/sessions/original/items', { items });
    const exported = await (await call('GET', '/v1/sessions/original/export')).text();
    const lines = exported
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(lines[2].output[1]).toEqual({ type: 'input_image', image_url: dataUrl('image/png', small) });

    const copy = exported.replace('"id":"original"', '"id":"copy"');
    const imported = await call('POST', '/v1/sessions/import', undefined, TOKEN, copy);
    expect(imported.status, await imported.clone().text()).toBe(201);
    const sha256 = sha256Hex(small);
    expect((await blobKeys()).filter((key) => key.startsWith('sessions/copy/'))).toHaveLength(1);
    const listed = await json('GET', '/v1/sessions/copy/items');
    expect(listed.body.items[0].output[1]).toMatchObject({ blob: sha256, width: 64, height: 48 });
    const blob = await call('GET', `/v1/sessions/copy/blobs/${sha256}`);
    expect(sha256Hex(new Uint8Array(await blob.arrayBuffer()))).toBe(sha256);
    expect(await (await call('GET', '/v1/sessions/copy/export')).text()).toBe(copy);
  });

  it('an item with images accepted at MAX_ITEM_BYTES imports from its export, one byte more does not', async () => {
    const { call, json } = setup({ MAX_ITEM_BYTES: '4000' });
    await json('POST', '/v1/sessions', { id: 'full' });
    const image = { type: 'input_image', image_url: dataUrl('image/png', pngBytes(64, 48, 3000, 6)) };
    const file = { type: 'input_file', filename: 'a.pdf', file_data: encodeBase64(pdfBytes()) };
    const itemOf = (text: string) => ({
      type: 'message',
      role: 'user',
      content: [{ type: 'input_text', text }, image, file],
    });
    // The item as MAX_ITEM_BYTES counts it: without its payloads, the text filling the rest.
    const bare = JSON.stringify(itemOf('')).length - image.image_url.length - file.file_data.length;
    const room = 4000 - bare + '"image_url":"",'.length + ',"file_data":""'.length;
    expect((await json('POST', '/v1/sessions/full/items', { items: [itemOf('x'.repeat(room + 1))] })).status).toBe(413);
    expect((await json('POST', '/v1/sessions/full/items', { items: [itemOf('x'.repeat(room))] })).status).toBe(201);
    const exported = await (await call('GET', '/v1/sessions/full/export')).text();
    const copy = exported.replace('"id":"full"', '"id":"full-copy"');
    const imported = await call('POST', '/v1/sessions/import', undefined, TOKEN, copy);
    expect(imported.status, await imported.clone().text()).toBe(201);
    const over = copy
      .replace(`"text":"${'x'.repeat(room)}"`, `"text":"${'x'.repeat(room + 1)}"`)
      .replace('full-copy', 'over');
    const refused = await call('POST', '/v1/sessions/import', undefined, TOKEN, over);
    expect(refused.status, await refused.clone().text()).toBe(413);
  });

  it('an image accepted in a body just under MAX_BODY_BYTES exports to a line the import takes', async () => {
    const maxBodyBytes = 20_000;
    const limit = String(maxBodyBytes);
    const { call } = setup({ MAX_BODY_BYTES: limit, MAX_ITEM_BYTES: limit });
    expect((await call('POST', '/v1/sessions', { id: 'original' })).status).toBe(201);
    // The shortest form of an image: no media type, base64 unpadded; the export writes both.
    const itemsOf = (padding: number) => ({
      items: [
        {
          type: 'message',
          role: 'user',
          content: [
            {
              type: 'input_image',
              image_url: `data:;base64,${encodeBase64(pngBytes(64, 64, padding, 1)).replace(/=+$/, '')}`,
            },
          ],
        },
      ],
    });
    let padding = 14_000;
    while (JSON.stringify(itemsOf(padding + 1)).length < maxBodyBytes) padding += 1;
    const body = itemsOf(padding);
    expect(JSON.stringify(body).length).toBeGreaterThan(maxBodyBytes - 40);
    const appended = await call('POST', '/v1/sessions/original/items', body);
    expect(appended.status, await appended.clone().text()).toBe(201);
    const exported = await call('GET', '/v1/sessions/original/export');
    expect(exported.status).toBe(200);
    const text = await exported.text();
    expect(Math.max(...text.split('\n').map((line) => line.length))).toBeGreaterThan(maxBodyBytes);
    const copy = text.replace('"id":"original"', '"id":"copy"');
    const imported = await call('POST', '/v1/sessions/import', undefined, TOKEN, copy);
    expect(imported.status, await imported.clone().text()).toBe(201);
    expect(await (await call('GET', '/v1/sessions/copy/export')).text()).toBe(copy);
    // The room is bounded: a quarter of MAX_BODY_BYTES and 1 KiB.
    const header = copy.split('\n')[0]!.replace('"id":"copy"', '"id":"other"');
    const tooLong = await call('POST', '/v1/sessions/import', undefined, TOKEN, `${header}\n"${'x'.repeat(26_023)}"\n`);
    expect(tooLong.status).toBe(413);
  });

  it('a turn refused with 402 budget_exhausted stores none of its images, and the blob route answers 404', async () => {
    const { call, json, blobKeys } = setup();
    expect((await json('POST', '/v1/sessions', { id: 'spent', budget: { max_turns: 1 } })).status).toBe(201);
    expect((await json('POST', '/v1/sessions/spent/turns', { model: 'echo', input: 'hi' })).status).toBe(200);
    const image = pngBytes(32, 32, 500, 5);
    const turn = await json('POST', '/v1/sessions/spent/turns', {
      model: 'echo',
      input: [
        { type: 'message', role: 'user', content: [{ type: 'input_image', image_url: dataUrl('image/png', image) }] },
      ],
    });
    expect(turn).toMatchObject({ status: 402, body: { error: { code: 'budget_exhausted' } } });
    const served = await call('GET', `/v1/sessions/spent/blobs/${sha256Hex(image)}`);
    expect({ blobs: await blobKeys(), served: served.status }).toEqual({ blobs: [], served: 404 });
  });
});
