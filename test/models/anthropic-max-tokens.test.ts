import { afterEach, describe, expect, it } from 'vitest';
import { planCompaction, summarizeContext } from '../../lib/compaction/index.ts';
import type { PromptItem } from '../../lib/items.ts';
import type { ModelSettings } from '../../lib/models/model.ts';
import { resolveModel } from '../../lib/models/resolve-model.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { resolveTokenBudget } from '../../lib/tokens/model-limits.ts';
import { countPromptTokens } from '../../lib/tokens/token-counter.ts';
import { compactItems } from '../../lib/openai/compaction.ts';
import { runStateless } from '../../lib/openai/stateless.ts';
import { runTurn } from '../../lib/turn/index.ts';
import { fixture, startFakeProvider, type FakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { servicesFor } from '../support/recording-model.ts';
import { SessionLog } from '../support/session-log.ts';

/**
 * The Messages API refuses a request whose prompt tokens and `max_tokens` together exceed the
 * window ("input length and `max_tokens` exceed context limit"). The AI SDK asks for the model's
 * most output (64,000 on claude-sonnet-4-5) when no `max_output_tokens` is given: a request whose
 * prompt leaves less room asks for the room alone, its thinking budget lowered with it.
 */

let provider: FakeProvider | undefined;
afterEach(async () => {
  await provider?.close();
  provider = undefined;
});

const MODEL = 'anthropic:claude-sonnet-4-5';
const env = (url: string) => ({ ANTHROPIC_API_KEY: 'sk-ant-test', ANTHROPIC_BASE_URL: url, MODEL_MAX_RETRIES: '0' });
/** The most output claude-sonnet-4-5 takes: what the AI SDK asks for by default. */
const MODEL_MAX_OUTPUT = 64_000;

async function turnBody(
  text: string,
  contextLimit: number,
  request: { max_output_tokens?: number; model_settings?: ModelSettings } = {},
): Promise<{ body: any; room: number }> {
  provider = await startFakeProvider(() => ({ text: fixture('anthropic-message-text.json') }));
  const model = resolveModel(MODEL, env(provider.baseURL));
  const store = new MemoryStore();
  const sessions = new SessionLog(store);
  const services = servicesFor(sessions, store, model);
  await sessions.create({ id: 's' });
  await runTurn(services, 's', {
    input: [{ type: 'message', role: 'user', content: text }],
    strategy_config: { context_limit: contextLimit },
    ...request,
  });
  await services.settle();
  expect(provider.requests).toHaveLength(1);
  return { body: provider.requests[0]!.body, room: contextLimit - tokensOf(text) };
}

/** The estimate of claude-sonnet-4-5's prompts. */
const counter = resolveTokenBudget(MODEL, { context_limit: 0, response_reserve: 0 }).counter;
const tokensOf = (text: string) => countPromptTokens([{ type: 'message', role: 'user', content: text }], [], counter);

/** English text of about `tokens` tokens by the estimate of claude-sonnet-4-5's prompts. */
function textOf(tokens: number): string {
  const perWord = tokensOf('word '.repeat(1000)) / 1000;
  return 'word '.repeat(Math.floor((tokens - 10) / perWord));
}

describe("anthropic: a request's max_tokens stays within the window", () => {
  it('a short prompt asks for the default, the most output of the model', async () => {
    const { body } = await turnBody('hello', 200_000);
    expect(body.max_tokens).toBe(MODEL_MAX_OUTPUT);
  });

  it('a long prompt asks for what the window leaves it, no more', async () => {
    const { body, room } = await turnBody(textOf(50_000), 100_000);
    expect(room).toBeLessThan(MODEL_MAX_OUTPUT);
    expect(body.max_tokens).toBeGreaterThan(0);
    expect(body.max_tokens).toBeLessThanOrEqual(room);
  });

  it("a client's max_output_tokens is sent as asked", async () => {
    const { body } = await turnBody(textOf(50_000), 100_000, { max_output_tokens: 2000 });
    expect(body.max_tokens).toBe(2000);
  });

  it('with thinking, its budget is lowered with max_tokens, at least 1024 and below it', async () => {
    const { body, room } = await turnBody(textOf(50_000), 100_000, { model_settings: { reasoningEffort: 'high' } });
    expect(body.max_tokens).toBeLessThanOrEqual(room);
    expect(body.thinking.type).toBe('enabled');
    expect(body.thinking.budget_tokens).toBeGreaterThanOrEqual(1024);
    expect(body.thinking.budget_tokens).toBeLessThan(body.max_tokens);
  });

  it("with thinking and a client's max_output_tokens, the thinking gets the rest of the room", async () => {
    const { body, room } = await turnBody(textOf(70_000), 100_000, {
      max_output_tokens: 4000,
      model_settings: { reasoningEffort: 'high' },
    });
    expect(body.max_tokens).toBeLessThanOrEqual(room);
    expect(body.thinking.budget_tokens).toBeGreaterThanOrEqual(1024);
    expect(body.max_tokens - body.thinking.budget_tokens).toBeGreaterThanOrEqual(4000);
  });

  it('with thinking, a room too small for its least budget sends no thinking', async () => {
    // A window with little room left past the prompt: the response reserve set as small.
    provider = await startFakeProvider(() => ({ text: fixture('anthropic-message-text.json') }));
    const model = resolveModel(MODEL, env(provider.baseURL));
    const store = new MemoryStore();
    const sessions = new SessionLog(store);
    const services = servicesFor(sessions, store, model);
    await sessions.create({ id: 's' });
    const text = textOf(9_200);
    await runTurn(services, 's', {
      input: [{ type: 'message', role: 'user', content: text }],
      strategy_config: { context_limit: 10_000, response_reserve: 500 },
      model_settings: { reasoningEffort: 'high' },
    });
    const body = provider.requests[0]!.body;
    expect(10_000 - tokensOf(text)).toBeLessThan(1025);
    expect(body.max_tokens).toBeLessThanOrEqual(10_000 - tokensOf(text));
    expect(body.thinking).toBeUndefined();
  });
});

describe("anthropic: a summary call's max_tokens stays within the window", () => {
  /**
   * The request a summary of 400 items of 200 characters makes (a transcript clips each item:
   * many items make it long) in a window of `contextLimit`, and the text it sent.
   */
  async function longSummary(contextLimit: number, maxSummaryTokens: number) {
    provider = await startFakeProvider(() => ({ text: fixture('anthropic-message-text.json') }));
    const model = resolveModel(MODEL, env(provider.baseURL));
    const items: PromptItem[] = Array.from({ length: 400 }, (_, index) => ({
      type: 'message',
      role: 'user',
      content: textOf(200),
      seq: index + 1,
    }));
    const budget = resolveTokenBudget(MODEL, { context_limit: contextLimit, response_reserve: 0 });
    const plan = planCompaction(items, { keepTokens: 0, counter: budget.counter })!;
    await summarizeContext(model, null, plan, { maxSummaryTokens, window: budget });
    const body = provider.requests[0]!.body;
    const sent = [...body.system, ...body.messages.flatMap((message: { content: unknown[] }) => message.content)]
      .map((block: { text: string }) => block.text)
      .join('');
    return { body, sent, budget };
  }

  it('a long transcript leaves the summary what the window leaves it', async () => {
    const { body, sent } = await longSummary(40_000, 20_000);
    expect(body.max_tokens).toBeGreaterThan(0);
    expect(body.max_tokens).toBeLessThanOrEqual(40_000 - Math.ceil(sent.length / 4));
  });

  it('a transcript estimated over the window asks for the summary tokens asked, not for one token', async () => {
    // The estimate (3 characters a token) is over Claude's count: the provider holds the prompt
    // or refuses it, whatever max_tokens says; a summary of one token would lose the context.
    const { body, sent, budget } = await longSummary(20_000, 2_000);
    expect(budget.counter.count(sent)).toBeGreaterThan(20_000);
    expect(body.max_tokens).toBe(2_000);
  });

  it('a short transcript asks for the summary tokens asked', async () => {
    provider = await startFakeProvider(() => ({ text: fixture('anthropic-message-text.json') }));
    const model = resolveModel(MODEL, env(provider.baseURL));
    const items: PromptItem[] = [{ type: 'message', role: 'user', content: 'plan the trip', seq: 1 }];
    const budget = resolveTokenBudget(MODEL, { context_limit: 40_000, response_reserve: 0 });
    const plan = planCompaction(items, { keepTokens: 0, counter: budget.counter })!;
    await summarizeContext(model, null, plan, { maxSummaryTokens: 2_000, window: budget });
    expect(provider.requests[0]!.body.max_tokens).toBe(2_000);
  });

  it("the summary is clipped to its tokens as the window's counter counts them", async () => {
    const reply = JSON.parse(fixture('anthropic-message-text.json'));
    reply.content = [{ type: 'text', text: textOf(5_000) }];
    provider = await startFakeProvider(() => ({ json: reply }));
    const model = resolveModel(MODEL, env(provider.baseURL));
    const items: PromptItem[] = [{ type: 'message', role: 'user', content: 'plan the trip', seq: 1 }];
    const budget = resolveTokenBudget(MODEL, { context_limit: 40_000, response_reserve: 0 });
    const plan = planCompaction(items, { keepTokens: 0, counter: budget.counter })!;
    const made = await summarizeContext(model, null, plan, { maxSummaryTokens: 1_000, window: budget });
    expect(budget.counter.count(made.context.summary)).toBeLessThanOrEqual(1_000);
  });
});

describe("anthropic: a summary by another model than the prompt's stays within the summary model's window", () => {
  it("a Claude summary of a gpt-4.1 conversation asks for no more than Claude's window leaves", async () => {
    provider = await startFakeProvider(() => ({ text: fixture('anthropic-message-text.json') }));
    const summaryModel = resolveModel(MODEL, env(provider.baseURL));
    // About 150,000 tokens of transcript by Claude's estimate: gpt-4.1's window holds it with
    // room to spare, Claude's leaves its summary less than the model's most output.
    const items = Array.from({ length: 1900 }, () => ({
      type: 'message' as const,
      role: 'user' as const,
      content: 'word '.repeat(48),
    }));
    await compactItems({ items, modelId: 'openai:gpt-4.1', summaryModel, env: {} });
    const body = provider.requests[0]!.body;
    const sent = [...body.system, ...body.messages.flatMap((message: { content: unknown[] }) => message.content)]
      .map((block: { text: string }) => block.text)
      .join('');
    const claude = resolveTokenBudget(MODEL, { context_limit: 0, response_reserve: 0 });
    const room = claude.contextLimit - claude.counter.count(sent);
    expect(room).toBeGreaterThan(0);
    expect(room).toBeLessThan(MODEL_MAX_OUTPUT);
    expect(body.max_tokens).toBeLessThanOrEqual(room);
  });
});

describe("anthropic: a stateless call's max_tokens stays within the window", () => {
  it('a long prompt asks for what the window leaves it, no more', async () => {
    provider = await startFakeProvider(() => ({ text: fixture('anthropic-message-text.json') }));
    const model = resolveModel(MODEL, env(provider.baseURL));
    const store = new MemoryStore();
    const services = { ...servicesFor(new SessionLog(store), store, model), env: { CONTEXT_LIMIT: '100000' } };
    const text = textOf(50_000);
    await runStateless(services, {
      items: [{ type: 'message', role: 'user', content: text }],
      instructions: null,
      tools: [],
      model: MODEL,
    });
    const body = provider.requests[0]!.body;
    expect(body.max_tokens).toBeGreaterThan(0);
    expect(body.max_tokens).toBeLessThanOrEqual(100_000 - tokensOf(text));
  });
});
