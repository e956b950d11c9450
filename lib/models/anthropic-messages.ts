import { AnthropicLanguageModel } from '@ai-sdk/anthropic/internal';
import {
  generateId,
  loadApiKey,
  loadOptionalSetting,
  validateBaseURL,
  withoutTrailingSlash,
  withUserAgentSuffix,
} from '@ai-sdk/provider-utils';

/**
 * The version of @ai-sdk/anthropic (pinned in package.json) that `createAnthropic` names in its
 * user agent, `ai-sdk-anthropic/<version>`; test/models/anthropic-messages.test.ts holds it to
 * the installed package's.
 */
export const ANTHROPIC_SDK_VERSION = '4.0.105';

const ANTHROPIC_API_URL = 'https://api.anthropic.com';

/** Both hosts' images and PDFs go by URL, as `createAnthropic` declares them. */
const SUPPORTED_URLS = { 'image/*': [/^https?:\/\/.*$/], 'application/pdf': [/^https?:\/\/.*$/] };

export interface AnthropicMessagesSettings {
  modelName: string;
  apiKey: string;
  /** Up to and including the version; the SDK's default is `https://api.anthropic.com/v1`. */
  baseURL?: string;
  fetch: typeof globalThis.fetch;
  /** Rewrites each request's body before it is sent. */
  transformRequestBody?: (body: Record<string, any>) => Record<string, any>;
}

/**
 * The Messages model `createAnthropic({apiKey, baseURL, fetch}).messages(modelName)` of
 * @ai-sdk/anthropic makes, with the same settings (provider name, base URL, headers, ids,
 * supported URLs, message threads), built from the package's `internal` entry: the provider
 * `createAnthropic` returns also holds its batches, files and skills, its table of provider
 * tools and its experimental decision and extraction models, which tailgate never uses and
 * which would take about 16 KiB of the Worker's gzipped bundle.
 */
export function anthropicMessagesModel(settings: AnthropicMessagesSettings): AnthropicLanguageModel {
  const configured = loadOptionalSetting({
    settingValue: settings.baseURL,
    environmentVariableName: 'ANTHROPIC_BASE_URL',
  });
  const baseURL = withoutTrailingSlash(validateBaseURL(configured));
  const headers = () =>
    withUserAgentSuffix(
      {
        'anthropic-version': '2023-06-01',
        'x-api-key': loadApiKey({
          apiKey: settings.apiKey,
          environmentVariableName: 'ANTHROPIC_API_KEY',
          description: 'Anthropic',
        }),
      },
      `ai-sdk-anthropic/${ANTHROPIC_SDK_VERSION}`,
    );
  return new AnthropicLanguageModel(settings.modelName, {
    provider: 'anthropic.messages',
    supportsMessageThreads: true,
    baseURL: baseURL === undefined || baseURL === ANTHROPIC_API_URL ? `${ANTHROPIC_API_URL}/v1` : baseURL,
    headers,
    fetch: settings.fetch,
    generateId,
    supportedUrls: () => SUPPORTED_URLS,
    ...(settings.transformRequestBody ? { transformRequestBody: settings.transformRequestBody } : {}),
  });
}
