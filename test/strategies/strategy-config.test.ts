import { describe, expect, it } from 'vitest';
import { InvalidRequestError } from '../../lib/errors.ts';
import { splitStrategyNames } from '../../lib/history.ts';
import {
  defaultStrategyConfig,
  defaultStrategyNames,
  parseStrategyConfigLayer,
  resolveStrategyConfig,
  strategyConfigEnvName,
  strategyConfigKeys,
} from '../../lib/strategies/strategy-config.ts';

describe('splitStrategyNames', () => {
  it('splits a comma-separated list and an array the same way: trimmed, empty entries ignored', () => {
    expect(splitStrategyNames(' shorten_tools, ,inbox ,')).toEqual(['shorten_tools', 'inbox']);
    expect(splitStrategyNames([' shorten_tools', '', ' inbox '])).toEqual(['shorten_tools', 'inbox']);
    expect(splitStrategyNames('')).toEqual([]);
  });
});

describe('strategy config', () => {
  it('has the documented defaults (docs/CONFIGURATION.md, "Strategies")', () => {
    expect(defaultStrategyConfig()).toEqual({
      full_tool_calls: 0,
      full_tool_outputs: 10,
      max_tool_calls: 40,
      max_tool_outputs: 40,
      max_tool_chars: 100000,
      epoch_tool_call_threshold: 50,
      epoch_full_tool_calls: 20,
      epoch_compacted_tool_calls: 80,
      epoch_size: 20,
      epoch_increment_epochs_per_increase: 3,
      epoch_increment_size_increase: 10,
      epoch_increment_repeat_increase: 10,
      epoch_increment_max_size: 60,
      epoch_increment_compacted_growth_ratio: 2.0,
      epoch_increment_max_compacted_tool_calls: 160,
      full_images: 3,
      image_epoch_size: 16,
      context_limit: 0,
      response_reserve: 0,
      compact_trigger_ratio: 0.8,
      compact_keep_ratio: 0.3,
    });
  });

  it.each([
    ['full_tool_calls', 'FULL_TOOL_CALLS'],
    ['epoch_size', 'EPOCH_SIZE'],
    ['epoch_increment_max_size', 'EPOCH_INCREMENT_MAX_SIZE'],
    ['epoch_tool_call_threshold', 'EPOCH_TOOL_CALL_THRESHOLD'],
    ['epoch_increment_compacted_growth_ratio', 'EPOCH_INCREMENT_COMPACTED_GROWTH_RATIO'],
  ] as const)('reads %s from env %s', (key, envName) => {
    expect(strategyConfigEnvName(key)).toBe(envName);
    expect(resolveStrategyConfig({ env: { [envName]: '7' } })[key]).toBe(7);
  });

  it('resolves defaults < env < session < request, key by key', () => {
    const config = resolveStrategyConfig({
      env: { EPOCH_SIZE: '30', FULL_TOOL_CALLS: '3', MAX_TOOL_CHARS: '5' },
      session: { epoch_size: 40, max_tool_chars: 6 },
      request: { epoch_size: 50 },
    });
    expect(config.epoch_size).toBe(50);
    expect(config.max_tool_chars).toBe(6);
    expect(config.full_tool_calls).toBe(3);
    expect(config.epoch_full_tool_calls).toBe(20);
  });

  it('is resolved per call: nothing is memoized', () => {
    const env: Record<string, string | undefined> = { EPOCH_SIZE: '11' };
    expect(resolveStrategyConfig({ env }).epoch_size).toBe(11);
    env.EPOCH_SIZE = '12';
    expect(resolveStrategyConfig({ env }).epoch_size).toBe(12);
    expect(resolveStrategyConfig({}).epoch_size).toBe(20);
  });

  it.each([
    ['an unknown key', { request: { epoch_sise: 3 } }, 'strategy_config.epoch_sise'],
    ['a wrong type', { session: { epoch_size: '20' } }, 'strategy_config.epoch_size'],
    ['a fraction for an integer', { request: { max_tool_calls: 1.5 } }, 'strategy_config.max_tool_calls'],
    ['a negative count', { request: { full_tool_outputs: -1 } }, 'strategy_config.full_tool_outputs'],
    ['a non-numeric env value', { env: { EPOCH_SIZE: 'twenty' } }, 'EPOCH_SIZE'],
    ['a fractional env value', { env: { MAX_TOOL_CALLS: '2.5' } }, 'MAX_TOOL_CALLS'],
    ['an image epoch of 0', { request: { image_epoch_size: 0 } }, 'strategy_config.image_epoch_size'],
    ['a negative env image count', { env: { FULL_IMAGES: '-1' } }, 'FULL_IMAGES'],
    // No decimal digits, as every whole-number setting (lib/setting-values.ts numberText).
    ['a hexadecimal env value', { env: { EPOCH_SIZE: '0x10' } }, 'EPOCH_SIZE'],
    ['an exponent env value', { env: { MAX_TOOL_CHARS: '1e3' } }, 'MAX_TOOL_CHARS'],
    ['an env count with a plus sign', { env: { FULL_IMAGES: '+2' } }, 'FULL_IMAGES'],
    ['an env count written with a fraction', { env: { EPOCH_SIZE: '20.0' } }, 'EPOCH_SIZE'],
    ['an env ratio in an exponent', { env: { COMPACT_TRIGGER_RATIO: '8e-1' } }, 'COMPACT_TRIGGER_RATIO'],
  ])('rejects %s, naming the key', (_label, layers, field) => {
    try {
      resolveStrategyConfig(layers);
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(InvalidRequestError);
      expect((error as InvalidRequestError).code).toBe('invalid_request');
      expect((error as InvalidRequestError).details).toMatchObject({ field });
      expect((error as Error).message).toContain(field);
    }
  });

  it('reads env values in decimal notation, blanks around them ignored, a ratio with its fraction', () => {
    const env = { EPOCH_SIZE: ' 30 ', EPOCH_INCREMENT_EPOCHS_PER_INCREASE: '-1', COMPACT_TRIGGER_RATIO: '0.75' };
    expect(resolveStrategyConfig({ env })).toMatchObject({
      epoch_size: 30,
      epoch_increment_epochs_per_increase: -1,
      compact_trigger_ratio: 0.75,
    });
    expect(resolveStrategyConfig({ env: { EPOCH_INCREMENT_COMPACTED_GROWTH_RATIO: '3' } })).toMatchObject({
      epoch_increment_compacted_growth_ratio: 3,
    });
  });

  it('ignores unrelated and blank env variables', () => {
    expect(resolveStrategyConfig({ env: { PATH: '/bin', EPOCH_SIZE: ' ' } })).toEqual(defaultStrategyConfig());
  });

  it('refuses a merged response_reserve at or above a set context_limit, naming the last layer to set either', () => {
    // `<layer> <details.field>: <message past its reason>`
    const refusal = (layers: Parameters<typeof resolveStrategyConfig>[0]) => {
      try {
        resolveStrategyConfig(layers);
      } catch (error) {
        expect(error).toBeInstanceOf(InvalidRequestError);
        const { field, layer } = (error as InvalidRequestError).details as { field: string; layer: string };
        return `${layer} ${field}: ${(error as Error).message.replace(/ \(no room .*\)$/, '')}`;
      }
      return 'accepted';
    };
    expect(refusal({ env: { CONTEXT_LIMIT: '100', RESPONSE_RESERVE: '100' } })).toBe(
      'env RESPONSE_RESERVE: environment RESPONSE_RESERVE: 100 must be less than CONTEXT_LIMIT 100',
    );
    const reserve = 'strategy_config.response_reserve';
    // The other value's source is named where another layer set it.
    expect(refusal({ env: { CONTEXT_LIMIT: '100' }, session: { response_reserve: 150 }, sent: 'session' })).toBe(
      `session ${reserve}: body.${reserve}: 150 must be less than context_limit 100 (the deployment's CONTEXT_LIMIT)`,
    );
    expect(refusal({ env: { RESPONSE_RESERVE: '5000' }, session: { context_limit: 4000 } })).toBe(
      'session strategy_config.context_limit: strategy_config.context_limit: 4000 must be greater than ' +
        "response_reserve 5000 (the deployment's RESPONSE_RESERVE)",
    );
    // A stored session's own, under a request that sets neither, is named as stored.
    expect(refusal({ session: { context_limit: 50, response_reserve: 60 }, request: { epoch_size: 3 } })).toBe(
      `session ${reserve}: ${reserve}: 60 must be less than context_limit 50`,
    );
    const limit = 'strategy_config.context_limit';
    expect(refusal({ session: { response_reserve: 60 }, request: { context_limit: 60 }, location: 'query' })).toBe(
      `request ${limit}: query.${limit}: 60 must be greater than response_reserve 60 (the session's)`,
    );
    // 0 is the model's own window, judged by the model's budget, not here.
    expect(refusal({ request: { response_reserve: 500 } })).toBe('accepted');
    expect(refusal({ session: { context_limit: 1000 }, request: { response_reserve: 999 } })).toBe('accepted');
  });

  it('validates one layer on its own', () => {
    expect(parseStrategyConfigLayer({ epoch_size: 5 })).toEqual({ epoch_size: 5 });
    expect(() => parseStrategyConfigLayer({ nope: 1 })).toThrow(InvalidRequestError);
  });

  it('knows every key', () => {
    expect(strategyConfigKeys).toHaveLength(21);
  });

  it.each([
    [{}, ['shorten_tools_epoch_increment', 'shorten_images', 'inbox']],
    [{ PROMPT_STRATEGY: '  ' }, ['shorten_tools_epoch_increment', 'shorten_images', 'inbox']],
    [{ PROMPT_STRATEGY: ' inbox , shorten_tools ,' }, ['inbox', 'shorten_tools']],
  ])('reads the default strategy list from PROMPT_STRATEGY (%o)', (env, names) => {
    expect(defaultStrategyNames(env)).toEqual(names);
  });
});
