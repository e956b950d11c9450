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

/** A model served by the Workers AI binding (`binding.run(model, {messages, tools, stream})`). */
export function createWorkersAiModel(settings: WorkersAiModelSettings): Model {
  const provider = createWorkersAI({ binding: settings.binding as unknown as Ai });
  return createSdkModel({
    id: settings.id,
    languageModel: provider.chat(settings.modelName),
    // workers-ai-provider takes an image only as bytes with an image/* type, and no file.
    imageBytesOnly: true,
    timeoutMs: settings.timeoutMs,
    maxRetries: settings.maxRetries,
  });
}
