import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compactingResponse, startTailgate, TOKEN } from './server.ts';

// The routes clients call besides create: models, retrieve, cancel, and unknown routes, through
// the official `openai` client against the real app on a loopback Node server (echo model).
let tailgate: Awaited<ReturnType<typeof startTailgate>>;
let client: OpenAI;

beforeAll(async () => {
  tailgate = await startTailgate({
    MODEL_ALIASES: 'gpt-4.1-mini=echo,claude=anthropic:claude-sonnet-4-5',
    SUMMARY_MODEL: 'echo',
    // Never called: it makes openai:... ids resolvable.
    OPENAI_API_KEY: 'sk-unused',
  });
  client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
});
afterAll(() => tailgate.close());

async function raised(call: Promise<unknown>): Promise<{ status: number; error: any }> {
  const error = await call.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(OpenAI.APIError);
  const { status, error: body } = error as InstanceType<typeof OpenAI.APIError>;
  return { status: status!, error: body };
}

describe('the official openai client: models', () => {
  it('lists DEFAULT_MODEL, SUMMARY_MODEL, echo and every alias once, in OpenAI list shape', async () => {
    const models = [];
    for await (const model of client.models.list()) models.push(model);
    expect(models.map((model) => model.id)).toEqual(['echo', 'gpt-4.1-mini', 'claude']);
    expect(models[2]).toEqual({
      id: 'claude',
      object: 'model',
      created: 0,
      owned_by: 'anthropic',
      // No ANTHROPIC_API_KEY: listed, with the setting a turn on it would need.
      tailgate: { model: 'anthropic:claude-sonnet-4-5', configured: false, setting: 'ANTHROPIC_API_KEY' },
    });
    expect(models[0]).toMatchObject({ id: 'echo', tailgate: { model: 'echo', configured: true } });
  });

  it('retrieves an alias, a tailgate id that is not listed, and answers 404 model_not_found for others', async () => {
    expect(await client.models.retrieve('gpt-4.1-mini')).toMatchObject({ id: 'gpt-4.1-mini', owned_by: 'echo' });
    expect(await client.models.retrieve('openai:gpt-4.1')).toMatchObject({ id: 'openai:gpt-4.1', owned_by: 'openai' });
    // A provider's id whose key is not configured is described all the same (a turn on it is a 503).
    for (const id of ['anthropic:claude-haiku-4-5', 'claude'])
      expect(await client.models.retrieve(id)).toMatchObject({
        id,
        object: 'model',
        owned_by: 'anthropic',
        tailgate: { configured: false, setting: 'ANTHROPIC_API_KEY' },
      });
    expect(await client.models.retrieve('openai:gpt-4.1')).toMatchObject({ tailgate: { configured: true } });
    const missing = await raised(client.models.retrieve('gpt-nothing'));
    expect(missing).toMatchObject({
      status: 404,
      error: { type: 'invalid_request_error', code: 'model_not_found', param: 'model' },
    });
  });
});

describe('the official openai client: retrieve and cancel', () => {
  it('retrieve answers what create answered: previous_response_id, temperature, metadata, usage', async () => {
    const first = await client.responses.create({ model: 'gpt-4.1-mini', input: 'one' });
    const second = await client.responses.create({
      model: 'gpt-4.1-mini',
      input: 'two',
      previous_response_id: first.id,
      temperature: 0.5,
      metadata: { topic: 'retrieve' },
    });
    expect(second.previous_response_id).toBe(first.id);
    const read = await client.responses.retrieve(second.id);
    expect(read).toEqual(second);
    expect(read).toMatchObject({ previous_response_id: first.id, temperature: 0.5, metadata: { topic: 'retrieve' } });
    expect(await client.responses.retrieve(first.id)).toEqual(first);
  });

  it('retrieve answers a streamed response as its response.completed event had it', async () => {
    const stream = await client.responses.create({ model: 'echo', input: 'streamed', stream: true });
    let completed: unknown;
    for await (const event of stream) if (event.type === 'response.completed') completed = event.response;
    expect(completed).toBeDefined();
    expect(await client.responses.retrieve((completed as { id: string }).id)).toEqual(completed);
  });

  it('retrieve keeps the compaction item of a response that compacted', async () => {
    const first = await compactingResponse(client, 'alpha');
    const second = await compactingResponse(client, 'bravo', { after: first.id });
    expect(second.output.map((item) => item.type)).toEqual(['message', 'compaction']);
    expect(await client.responses.retrieve(second.id)).toEqual(second);
  });

  it('cancel of a stored response is 400 (none runs in the background); of an unknown one 404', async () => {
    const response = await client.responses.create({ model: 'echo', input: 'done already' });
    expect(await raised(client.responses.cancel(response.id))).toMatchObject({
      status: 400,
      error: { type: 'invalid_request_error', message: 'Cannot cancel a synchronous response.', param: null },
    });
    expect(await raised(client.responses.cancel('resp_nothing_1_1_2'))).toMatchObject({
      status: 404,
      error: { type: 'invalid_request_error', code: 'not_found' },
    });
    // Nothing changed: the response reads back as it was.
    expect(await client.responses.retrieve(response.id)).toEqual(response);
  });
});

function request(method: string, path: string): Promise<Response> {
  return fetch(`${tailgate.baseURL.replace(/\/v1$/, '')}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}` },
  });
}

describe('unknown routes answer in the error shape of their API family', () => {
  it.each([
    ['POST', '/v1/embeddings'],
    ['GET', '/v1/files'],
    ['GET', '/v1/models/echo/extra'],
    // A method a known path does not serve is a 405 (test/http/method-not-allowed.test.ts).
    ['PUT', '/v1/batches'],
  ])("%s %s: OpenAI's shape", async (method, path) => {
    const response = await request(method, path);
    expect(response.status).toBe(404);
    expect(await response.json()).toEqual({
      error: {
        message: `no route for ${method} ${path}`,
        type: 'invalid_request_error',
        param: null,
        code: 'not_found',
      },
    });
  });

  it("the official client's embeddings call raises NotFoundError", async () => {
    const error = await client.embeddings.create({ model: 'echo', input: 'x' }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(OpenAI.NotFoundError);
  });

  it.each([
    ['GET', '/v1/sessions/demo/nothing'],
    ['POST', '/v1/tokens/nothing'],
  ])("%s %s: tailgate's shape", async (method, path) => {
    const response = await request(method, path);
    expect(response.status).toBe(404);
    expect(await response.json()).toEqual({ error: { code: 'not_found', message: `no route for ${method} ${path}` } });
  });
});
