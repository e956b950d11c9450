import { createWorkersAI } from 'workers-ai-provider';
import type { Model } from './model.ts';
import { createSdkModel } from './sdk-model.ts';

/** The part of the Workers AI binding (`env.AI`) the adapter uses. */
export interface WorkersAiBinding {
  run(model: string, inputs: unknown, options?: unknown): Promise<unknown>;
}

export interface WorkersAiModelSettings {
  /** The tailgate model id, e.g. `workers-ai:@cf/meta/llama-3.3-70b-instruct-fp8-fast`. */
  id: string;
  /** The Workers AI model, e.g. `@cf/meta/llama-3.3-70b-instruct-fp8-fast`. */
  modelName: string;
  binding: WorkersAiBinding;
  timeoutMs: number;
  maxRetries: number;
}

/**
 * The Workers AI models whose messages take `image_url` parts (their input schemas in
 * @cloudflare/workers-types). The others take a string or text parts only: each image and file
 * goes to them as a text placeholder (`Model.textOnly`).
 */
export const WORKERS_AI_VISION_MODELS: ReadonlySet<string> = new Set([
  '@cf/meta/llama-3.2-11b-vision-instruct',
  '@cf/meta/llama-4-scout-17b-16e-instruct',
  '@cf/google/gemma-3-12b-it',
  '@cf/mistralai/mistral-small-3.1-24b-instruct',
]);

/** The seeds Workers AI's text generation models take (their `seed` input: 1 to 9999999999). */
const MAX_SEED = 9_999_999_999;

type ChatModel = ReturnType<ReturnType<typeof createWorkersAI>['chat']>;

/** A model served by the Workers AI binding (`binding.run(model, {messages, tools, stream})`). */
export function createWorkersAiModel(settings: WorkersAiModelSettings): Model {
  return createSdkModel({
    id: settings.id,
    languageModel: seededChat(settings.binding, settings.modelName),
    // workers-ai-provider takes an image only as bytes with an image/* type, and no file.
    imageBytesOnly: true,
    ...(WORKERS_AI_VISION_MODELS.has(settings.modelName) ? {} : { textOnly: true }),
    timeoutMs: settings.timeoutMs,
    maxRetries: settings.maxRetries,
  });
}

/**
 * The provider's chat model, whose calls also pass a call's `seed` (Chat Completions' `seed`)
 * to the binding's inputs: workers-ai-provider reads the setting but leaves it out of them. A
 * seed outside the range the models take is left out, as a provider without seeds ignores one.
 */
function seededChat(binding: WorkersAiBinding, modelName: string): ChatModel {
  const chat = (run: WorkersAiBinding) => createWorkersAI({ binding: run as unknown as Ai }).chat(modelName);
  const plain = chat(binding);
  const forCall = (seed: number | undefined) =>
    seed !== undefined && Number.isInteger(seed) && seed >= 1 && seed <= MAX_SEED
      ? chat({ run: (model, inputs, options) => binding.run(model, { ...(inputs as object), seed }, options) })
      : plain;
  return Object.assign(Object.create(Object.getPrototypeOf(plain) as object) as ChatModel, plain, {
    doGenerate: async (options: Parameters<ChatModel['doGenerate']>[0]) => {
      const result = await forCall(options.seed).doGenerate(options);
      return { ...result, usage: reportedUsage(result.usage) };
    },
    doStream: async (options: Parameters<ChatModel['doStream']>[0]) => {
      const result = await forCall(options.seed).doStream(options);
      const finish = new TransformStream<StreamPart, StreamPart>({
        transform: (part, out) =>
          out.enqueue(part.type === 'finish' ? { ...part, usage: reportedUsage(part.usage) } : part),
      });
      return { ...result, stream: result.stream.pipeThrough(finish) };
    },
  });
}

type Usage = Awaited<ReturnType<ChatModel['doGenerate']>>['usage'];
type StreamPart =
  Awaited<ReturnType<ChatModel['doStream']>>['stream'] extends ReadableStream<infer Part> ? Part : never;

/**
 * workers-ai-provider reads an answer without `usage` as 0 input tokens; a call's prompt has some,
 * so that is no count: left out, the call is estimated (lib/models/sdk-usage.ts, `unreported`).
 */
function reportedUsage(usage: Usage): Usage {
  return usage.inputTokens.total === 0 ? { ...usage, inputTokens: { ...usage.inputTokens, total: undefined } } : usage;
}
