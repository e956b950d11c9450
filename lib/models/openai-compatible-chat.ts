import { OpenAICompatibleChatLanguageModel, VERSION } from '@ai-sdk/openai-compatible';
import { resolveWith, withoutTrailingSlash, withUserAgentSuffix } from '@ai-sdk/provider-utils';

type ChatModelConfig = ConstructorParameters<typeof OpenAICompatibleChatLanguageModel>[1];

export interface OpenAICompatibleChatSettings {
  /** The provider name the SDK reports (`openai` or `openai-compatible`). */
  providerName: string;
  modelName: string;
  /** Base URL up to and including the version, e.g. `https://api.openai.com/v1`. */
  baseURL: string;
  apiKey?: string;
  fetch: typeof globalThis.fetch;
  /** Send a `json_schema` response format as such (the SDK's `supportsStructuredOutputs`). */
  structuredOutputs?: boolean;
  transformRequestBody: NonNullable<ChatModelConfig['transformRequestBody']>;
}

/**
 * The chat model `createOpenAICompatible({name, baseURL, apiKey, fetch, includeUsage: true,
 * supportsStructuredOutputs, transformRequestBody}).chatModel(modelName)` of
 * @ai-sdk/openai-compatible makes, with the same settings (provider name, URL, headers, usage
 * in streams), built from its class: the provider `createOpenAICompatible` returns also
 * refers to its completion, embedding and image models, which tailgate never uses and which
 * the Worker bundle would otherwise carry.
 */
export function openaiCompatibleChatModel(settings: OpenAICompatibleChatSettings): OpenAICompatibleChatLanguageModel {
  const baseURL = withoutTrailingSlash(settings.baseURL);
  return new OpenAICompatibleChatLanguageModel(settings.modelName, {
    provider: `${settings.providerName}.chat`,
    url: ({ path }) => new URL(`${baseURL}${path}`).toString(),
    headers: () =>
      resolveWith(settings.apiKey, (apiKey) =>
        withUserAgentSuffix(
          { ...(apiKey ? { Authorization: `Bearer ${apiKey}` } : {}) },
          `ai-sdk-openai-compatible/${VERSION}`,
        ),
      ),
    fetch: settings.fetch,
    includeUsage: true,
    ...(settings.structuredOutputs ? { supportsStructuredOutputs: true } : {}),
    transformRequestBody: settings.transformRequestBody,
  });
}
