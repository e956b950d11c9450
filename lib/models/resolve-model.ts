import { z } from 'zod';
import { DEFAULTS, MODEL_PROVIDERS } from '../defaults.ts';
import { booleanText, MAX_TIMER_MS, numberText } from '../setting-values.ts';
import { UnknownModelError, ModelConfigurationError } from './errors.ts';
import { createAnthropicModel } from './anthropic-model.ts';
import { echoModel, ECHO_MODEL_ID } from './echo.ts';
import type { Model } from './model.ts';
import { createOpenAICompatibleModel, OPENAI_MANY_IMAGES, openaiTakesImages } from './openai-compatible-model.ts';
import { createWorkersAiModel, type WorkersAiBinding } from './workers-ai-model.ts';

/**
 * What the model registry reads: string settings (named like the environment variables that
 * hold them), the Workers AI binding, and a `fetch` to inject (tests, proxies). lib/ never reads
 * `process.env`: the runtime entry point builds this object (on Workers, `c.env` fits as is).
 */
export interface ModelEnvironment {
  /** Key for `openai:<name>` (required for it). */
  OPENAI_API_KEY?: string | undefined;
  /** Base URL for `openai:<name>`; default `DEFAULTS.openaiBaseUrl` (lib/defaults.ts). */
  OPENAI_BASE_URL?: string | undefined;
  /** Base URL for `openai-compatible:<name>` (required for it), e.g. `http://localhost:11434/v1`. */
  OPENAI_COMPATIBLE_BASE_URL?: string | undefined;
  /** Key for `openai-compatible:<name>` (optional: local servers often need none). */
  OPENAI_COMPATIBLE_API_KEY?: string | undefined;
  /**
   * Whether `openai-compatible:<name>` models take images and files (`true`, `1`, `yes`); default
   * `false`: text only, each image and file sent as a text placeholder.
   */
  OPENAI_COMPATIBLE_IMAGES?: string | boolean | undefined;
  /** Key for `anthropic:<name>` (required for it). */
  ANTHROPIC_API_KEY?: string | undefined;
  /** Base URL for `anthropic:<name>`, including `/v1`; default `https://api.anthropic.com/v1`. */
  ANTHROPIC_BASE_URL?: string | undefined;
  /** Deadline of one model call, stream included, in ms; default `DEFAULTS.modelTimeoutMs` (lib/defaults.ts). */
  MODEL_TIMEOUT_MS?: string | number | undefined;
  /** Retries on retryable provider failures (5xx, 429, network); default `DEFAULTS.modelMaxRetries`. */
  MODEL_MAX_RETRIES?: string | number | undefined;
  /** The Workers AI binding, for `workers-ai:<name>` (the wrangler binding name `AI`). */
  AI?: WorkersAiBinding | undefined;
  /** Same as `AI`, for callers that pass the binding under a lower-case name. */
  ai?: WorkersAiBinding | undefined;
  /** The fetch used for provider HTTP calls; default the runtime's global fetch. */
  fetch?: typeof globalThis.fetch | undefined;
}

const blankToUndefined = (value: unknown) => (value === '' || value === null ? undefined : value);
// Decimal digits, as every whole-number setting (lib/setting-values.ts numberText): `0x10` or `1e3` is malformed.
const wholeText = (value: unknown) => numberText(blankToUndefined(value));
// At most the longest timer, as the service's setting (lib/config.ts): a longer one would fire at once.
const timeoutSchema = z.preprocess(wholeText, z.number().int().positive().max(MAX_TIMER_MS).optional());
const retriesSchema = z.preprocess(wholeText, z.number().int().min(0).max(10).optional());
const settingSchema = z.preprocess(blankToUndefined, z.string().optional());

/**
 * Resolves a model id to a `Model`: `echo`, or `provider:name` with provider one of `openai`,
 * `openai-compatible`, `anthropic`, `workers-ai` (the name is everything after the first colon,
 * so `workers-ai:@cf/meta/llama-3.1-8b-instruct` works). Resolution is cheap and makes no
 * network call, so it can run per request.
 *
 * Throws `UnknownModelError` for an unknown provider or a malformed id, and
 * `ModelConfigurationError` when a required setting is missing or malformed (`invalid_request`
 * and `not_configured`); both carry `details.field = "model"` and a message starting `model: `.
 *
 * @example
 * resolveModel('echo', {}).id // 'echo'
 * resolveModel('anthropic:claude-sonnet-4-5', { ANTHROPIC_API_KEY: key }).generate(request)
 */
export function resolveModel(id: string, environment: ModelEnvironment): Model {
  if (id === ECHO_MODEL_ID) return echoModel;
  const colon = id.indexOf(':');
  const provider = colon > 0 ? id.slice(0, colon) : '';
  const name = colon > 0 ? id.slice(colon + 1) : '';
  if (name === '' || name.length > 256 || /\s/.test(name)) throw new UnknownModelError(id, [...MODEL_PROVIDERS]);

  const common = {
    id,
    timeoutMs:
      readNumber(timeoutSchema, environment.MODEL_TIMEOUT_MS, 'MODEL_TIMEOUT_MS', id) ?? DEFAULTS.modelTimeoutMs,
    maxRetries:
      readNumber(retriesSchema, environment.MODEL_MAX_RETRIES, 'MODEL_MAX_RETRIES', id) ?? DEFAULTS.modelMaxRetries,
  };
  const fetch = environment.fetch ? { fetch: environment.fetch } : {};
  const setting = (key: keyof ModelEnvironment) => {
    const parsed = settingSchema.safeParse(environment[key]);
    return parsed.success ? parsed.data : undefined;
  };
  const required = (key: keyof ModelEnvironment) => {
    const value = setting(key);
    if (value === undefined) {
      throw new ModelConfigurationError(`"${id}" needs the ${key} setting, which is not configured`, {
        model: id,
        setting: key,
      });
    }
    return value;
  };

  switch (provider) {
    case 'openai':
      return createOpenAICompatibleModel({
        ...common,
        ...fetch,
        providerName: 'openai',
        modelName: name,
        baseURL: setting('OPENAI_BASE_URL') ?? DEFAULTS.openaiBaseUrl,
        apiKey: required('OPENAI_API_KEY'),
        maxCompletionTokens: true,
        promptCacheKey: true,
        structuredOutputs: true,
        allowedTools: true,
        maxTools: 128,
        images: openaiTakesImages(name),
        manyImages: OPENAI_MANY_IMAGES,
      });
    case 'openai-compatible': {
      const apiKey = setting('OPENAI_COMPATIBLE_API_KEY');
      return createOpenAICompatibleModel({
        ...common,
        ...fetch,
        providerName: 'openai-compatible',
        modelName: name,
        baseURL: required('OPENAI_COMPATIBLE_BASE_URL'),
        ...(apiKey !== undefined ? { apiKey } : {}),
        // json_schema sent whole, as vLLM, Ollama, llama.cpp and LM Studio take it (never a silent json_object).
        structuredOutputs: true,
        images: readImages(environment.OPENAI_COMPATIBLE_IMAGES, id),
      });
    }
    case 'anthropic': {
      const baseURL = setting('ANTHROPIC_BASE_URL');
      return createAnthropicModel({
        ...common,
        ...fetch,
        modelName: name,
        apiKey: required('ANTHROPIC_API_KEY'),
        ...(baseURL !== undefined ? { baseURL } : {}),
      });
    }
    case 'workers-ai': {
      const binding = environment.AI ?? environment.ai;
      if (!binding || typeof binding.run !== 'function') {
        throw new ModelConfigurationError(`"${id}" needs the Workers AI binding AI, which is not configured`, {
          model: id,
          setting: 'AI',
        });
      }
      return createWorkersAiModel({ ...common, modelName: name, binding });
    }
    default:
      throw new UnknownModelError(id, [...MODEL_PROVIDERS]);
  }
}

/** OPENAI_COMPATIBLE_IMAGES: `true`/`1`/`yes` or `false`/`0`/`no` (blank: false). */
function readImages(value: unknown, id: string): boolean {
  const parsed = booleanText.safeParse(value);
  if (!parsed.success) {
    throw new ModelConfigurationError(`the OPENAI_COMPATIBLE_IMAGES setting is malformed: ${JSON.stringify(value)}`, {
      model: id,
      setting: 'OPENAI_COMPATIBLE_IMAGES',
    });
  }
  return parsed.data;
}

function readNumber(
  schema: z.ZodType<number | undefined>,
  value: unknown,
  key: string,
  id: string,
): number | undefined {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    throw new ModelConfigurationError(`the ${key} setting is malformed: ${JSON.stringify(value)}`, {
      model: id,
      setting: key,
    });
  }
  return parsed.data;
}
