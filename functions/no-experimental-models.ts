/**
 * What the Worker bundle gets instead of `@ai-sdk/provider-utils/experimental-decision` and
 * `.../experimental-extraction` (wrangler.toml `[alias]`). `createAnthropic` builds the
 * provider's `decisionModel`, `evaluationModel` and `extractionModel` from them, each module a
 * copy of provider-utils' helpers of its own (about 10 KiB gzipped together); tailgate only
 * calls the provider's Messages model (lib/models/anthropic-model.ts), so they never run.
 * Node and Deno load the real modules.
 */
function unavailable(): never {
  throw new Error("the AI SDK's experimental decision and extraction models are not part of the tailgate Worker");
}

export class Experimental_DecisionLanguageModel {
  constructor() {
    unavailable();
  }
}

export class Experimental_ExtractionLanguageModel {
  constructor() {
    unavailable();
  }
}
