import { describe, expect, it } from 'vitest';
import { TailgateError } from '../../lib/errors.ts';
import { UnknownModelError, ModelConfigurationError } from '../../lib/models/errors.ts';
import { echoModel } from '../../lib/models/echo.ts';
import { resolveModel, type ModelEnvironment } from '../../lib/models/resolve-model.ts';
import { fakeAiBinding } from '../support/fake-providers/fake-ai-binding.ts';

const binding = fakeAiBinding(() => ({ response: 'hi' }));

function thrown(run: () => unknown): TailgateError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(TailgateError);
    return error as TailgateError;
  }
  throw new Error('expected resolveModel to throw');
}

describe('resolveModel', () => {
  it('resolves echo without any settings', () => {
    expect(resolveModel('echo', {})).toBe(echoModel);
  });

  it.each([
    { id: 'openai:gpt-4.1-mini', environment: { OPENAI_API_KEY: 'k' } },
    { id: 'openai-compatible:llama3.1', environment: { OPENAI_COMPATIBLE_BASE_URL: 'http://127.0.0.1:11434/v1' } },
    { id: 'anthropic:claude-sonnet-4-5', environment: { ANTHROPIC_API_KEY: 'k' } },
    { id: 'workers-ai:@cf/meta/llama-3.1-8b-instruct', environment: { AI: binding } },
    { id: 'workers-ai:@cf/meta/llama-3.1-8b-instruct', environment: { ai: binding } },
  ] satisfies { id: string; environment: ModelEnvironment }[])(
    'resolves $id without a network call',
    ({ id, environment }) => {
      const model = resolveModel(id, environment);
      expect(model.id).toBe(id);
      expect(typeof model.generate).toBe('function');
      expect(typeof model.stream).toBe('function');
    },
  );

  it.each(['gpt-4', 'mystery:model', 'openai:', ':x', 'echo:x', 'openai:two words', ''])(
    'rejects the unknown or malformed id %j with invalid_request on field model',
    (id) => {
      const error = thrown(() => resolveModel(id, { OPENAI_API_KEY: 'k' }));
      expect(error).toBeInstanceOf(UnknownModelError);
      expect(error.code).toBe('invalid_request');
      expect(error.details).toMatchObject({ field: 'model' });
    },
  );

  it.each([
    { id: 'openai:gpt-4.1', environment: {}, setting: 'OPENAI_API_KEY' },
    { id: 'openai:gpt-4.1', environment: { OPENAI_API_KEY: '' }, setting: 'OPENAI_API_KEY' },
    {
      id: 'openai-compatible:m',
      environment: { OPENAI_COMPATIBLE_API_KEY: 'k' },
      setting: 'OPENAI_COMPATIBLE_BASE_URL',
    },
    { id: 'anthropic:claude-sonnet-4-5', environment: { OPENAI_API_KEY: 'k' }, setting: 'ANTHROPIC_API_KEY' },
    { id: 'workers-ai:@cf/x', environment: {}, setting: 'AI' },
    {
      id: 'anthropic:c',
      environment: { ANTHROPIC_API_KEY: 'k', MODEL_TIMEOUT_MS: 'soon' },
      setting: 'MODEL_TIMEOUT_MS',
    },
    { id: 'anthropic:c', environment: { ANTHROPIC_API_KEY: 'k', MODEL_TIMEOUT_MS: '-5' }, setting: 'MODEL_TIMEOUT_MS' },
    {
      id: 'anthropic:c',
      environment: { ANTHROPIC_API_KEY: 'k', MODEL_MAX_RETRIES: '1.5' },
      setting: 'MODEL_MAX_RETRIES',
    },
    // No decimal digits, as every whole-number setting (lib/setting-values.ts numberText).
    {
      id: 'anthropic:c',
      environment: { ANTHROPIC_API_KEY: 'k', MODEL_TIMEOUT_MS: '0x10' },
      setting: 'MODEL_TIMEOUT_MS',
    },
    {
      id: 'anthropic:c',
      environment: { ANTHROPIC_API_KEY: 'k', MODEL_TIMEOUT_MS: '1e3' },
      setting: 'MODEL_TIMEOUT_MS',
    },
    {
      id: 'anthropic:c',
      environment: { ANTHROPIC_API_KEY: 'k', MODEL_MAX_RETRIES: '+1' },
      setting: 'MODEL_MAX_RETRIES',
    },
    {
      id: 'anthropic:c',
      environment: { ANTHROPIC_API_KEY: 'k', MODEL_MAX_RETRIES: '2.0' },
      setting: 'MODEL_MAX_RETRIES',
    },
    // Past the longest timer (2^31 - 1 ms), as the service's setting (lib/config.ts): it would fire at once.
    {
      id: 'anthropic:c',
      environment: { ANTHROPIC_API_KEY: 'k', MODEL_TIMEOUT_MS: '2147483648' },
      setting: 'MODEL_TIMEOUT_MS',
    },
  ] satisfies { id: string; environment: ModelEnvironment; setting: string }[])(
    'names the missing or malformed setting $setting for $id',
    ({ id, environment, setting }) => {
      const error = thrown(() => resolveModel(id, environment));
      expect(error).toBeInstanceOf(ModelConfigurationError);
      expect(error.code).toBe('not_configured');
      expect(error.details).toEqual({ field: 'model', model: id, setting });
      expect(error.message).toContain(setting);
      expect(error.message).toMatch(/^model: /);
      // A malformed one, with the text it refused.
      const text = (environment as Record<string, unknown>)[setting];
      if (typeof text === 'string' && text.trim() !== '') expect(error.message).toContain(JSON.stringify(text));
    },
  );

  it('never puts a key into an error', () => {
    const error = thrown(() => resolveModel('anthropic:c', { ANTHROPIC_API_KEY: 'sk-secret', MODEL_TIMEOUT_MS: 'x' }));
    expect(JSON.stringify({ message: error.message, details: error.details })).not.toContain('sk-secret');
  });
});
