import { describe, expect, it } from 'vitest';
import { parseServiceConfig } from '../../lib/config.ts';
import { NotConfiguredError } from '../../lib/errors.ts';
import { DEFAULT_PRICES } from '../../lib/ledger/prices.ts';
import { turnUsage } from '../../lib/ledger/usage.ts';

describe('MODEL_PRICES', () => {
  it('adds and overrides prices over the dated defaults', () => {
    const { modelPrices } = parseServiceConfig({
      MODEL_PRICES: JSON.stringify({
        'openai:o3': { input: 2, cached_input: 0.5, output: 8 },
        'openai:gpt-4o': { input: 1, output: 2 },
      }),
    });
    expect(modelPrices['openai:o3']).toEqual({ input: 2, cached_input: 0.5, output: 8 });
    expect(modelPrices['openai:gpt-4o']).toEqual({ input: 1, output: 2 });
    expect(modelPrices['anthropic:claude-sonnet-4-5']).toEqual(DEFAULT_PRICES['anthropic:claude-sonnet-4-5']);
    expect(parseServiceConfig({}).modelPrices).toEqual(DEFAULT_PRICES);
  });

  it.each([
    ['not JSON', '{'],
    ['not an object of prices', '[1]'],
    ['a negative price', '{"m":{"input":-1,"output":1}}'],
    ['a missing output price', '{"m":{"input":1}}'],
    ['an unknown field', '{"m":{"input":1,"output":1,"per":"token"}}'],
  ])('refuses %s as not_configured naming MODEL_PRICES', (_, text) => {
    expect(() => parseServiceConfig({ MODEL_PRICES: text })).toThrow(NotConfiguredError);
    try {
      parseServiceConfig({ MODEL_PRICES: text });
    } catch (error) {
      expect((error as NotConfiguredError).details).toEqual({ variable: 'MODEL_PRICES' });
    }
  });

  it.each(['gpt-4.1-mini', 'openai', 'mystery:model'])(
    'refuses a price for %s, which names no model id (echo or <provider>:<model>), naming the key',
    (id) => {
      const text = JSON.stringify({ [id]: { input: 1, output: 2 } });
      expect(() => parseServiceConfig({ MODEL_PRICES: text })).toThrow(NotConfiguredError);
      expect(() => parseServiceConfig({ MODEL_PRICES: text })).toThrow(
        `invalid setting MODEL_PRICES: ${id}: not a model id: must be echo or <provider>:<model>`,
      );
    },
  );

  it('prices each token kind; no price is null, a zero price is 0', () => {
    const usage = {
      input_tokens: 1_000_000,
      cached_input_tokens: 500_000,
      cache_write_tokens: 100_000,
      output_tokens: 10,
    };
    // 400,000 x 2 + 500,000 x 0.5 + 100,000 x 2 (cache writes default to the input price) + 10 x 8.
    expect(turnUsage(usage, { input: 2, cached_input: 0.5, output: 8 }).cost_usd).toBe(1.25008);
    expect(turnUsage(usage, undefined).cost_usd).toBeNull();
    expect(turnUsage(usage, DEFAULT_PRICES.echo).cost_usd).toBe(0);
  });
});
