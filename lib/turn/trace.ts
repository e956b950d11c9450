import {
  type Attributes,
  type Context,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import type { TurnObservation } from './types.ts';

/**
 * A turn's OpenTelemetry spans (docs/CONFIGURATION.md, "Costs, limits and tracing"): the turn
 * is one span after the GenAI semantic conventions (`chat <model>`), and its steps (the
 * claim's storage rounds, the history read, the strategies, the model call, the completion)
 * are its children. The runtime hands in `TurnServices.tracer` when OTEL_EXPORTER_OTLP_ENDPOINT
 * is set; without it a turn makes no span and calls nothing of the API (a step is its work).
 * Contexts are passed explicitly, never through the API's global context manager: the turn
 * span's parent is the root context and every child's parent the turn span's context, so no
 * context manager is needed, and none installed by the host is read.
 */

/** The child spans of a turn, in the order a turn runs them. */
export const TURN_STEPS = {
  /** Rounds 1 and 2: the head reads and the claim (or the replay of a repeated key). */
  claim: 'tailgate.claim',
  /** The history from the session's view, the newest records, out-of-line outputs. */
  readContext: 'tailgate.read_context',
  /** The strategies, the notices, compaction and the window check: the prompt. */
  strategies: 'tailgate.strategies',
  /** The provider call, from its start (alongside the claim's writes) to its last token. */
  model: 'tailgate.model_call',
  /** The completion's write, which closes the turn. */
  complete: 'tailgate.complete',
} as const;

/** The GenAI provider and model of a tailgate model id (`openai:gpt-4.1-mini`, `echo`). */
function genAiModel(modelId: string): { provider: string; model: string } {
  const colon = modelId.indexOf(':');
  return colon < 0
    ? { provider: modelId, model: modelId }
    : { provider: modelId.slice(0, colon), model: modelId.slice(colon + 1) };
}

export class TurnTrace {
  /** Undefined when tracing is off: then every method returns at once. */
  private readonly traced: { tracer: Tracer; span: Span; parent: Context } | undefined;

  constructor(tracer: Tracer | undefined, sessionId: string) {
    if (tracer === undefined) return;
    const span = tracer.startSpan(
      'chat',
      {
        kind: SpanKind.INTERNAL,
        attributes: { 'gen_ai.operation.name': 'chat', 'gen_ai.conversation.id': sessionId },
      },
      ROOT_CONTEXT,
    );
    this.traced = { tracer, span, parent: trace.setSpan(ROOT_CONTEXT, span) };
  }

  /**
   * Runs `work` in a child span of the turn's, ended when it settles (marked as an error when it
   * throws). Off, it is just `work()`.
   */
  step<T>(name: string, work: () => Promise<T>, attributes?: Attributes): Promise<T> {
    return this.traced ? this.tracedStep(this.traced, name, work, attributes) : work();
  }

  private async tracedStep<T>(
    { tracer, parent }: { tracer: Tracer; parent: Context },
    name: string,
    work: () => Promise<T>,
    attributes: Attributes | undefined,
  ): Promise<T> {
    const kind = name === TURN_STEPS.model ? SpanKind.CLIENT : SpanKind.INTERNAL;
    const span = tracer.startSpan(name, { kind, ...(attributes ? { attributes } : {}) }, parent);
    try {
      return await work();
    } catch (error) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
      throw error;
    } finally {
      span.end();
    }
  }

  /** The turn's model, once planned: the span is named after it (`chat gpt-4.1-mini`). */
  model(modelId: string): void {
    if (!this.traced) return;
    const { provider, model } = genAiModel(modelId);
    this.traced.span.updateName(`chat ${model}`);
    this.traced.span.setAttributes({ 'gen_ai.provider.name': provider, 'gen_ai.request.model': model });
  }

  /** Ends the turn's span with how the turn ended: its number, status, usage and cost, or its error. */
  end(outcome: TurnObservation): void {
    if (!this.traced) return;
    const { span } = this.traced;
    if (outcome.turn !== null) span.setAttribute('tailgate.turn', outcome.turn);
    span.setAttribute('tailgate.turn.status', outcome.status);
    const usage = outcome.usage;
    if (usage && outcome.model !== null) {
      span.setAttributes({
        'gen_ai.response.model': genAiModel(outcome.model).model,
        'gen_ai.usage.input_tokens': usage.input_tokens,
        'gen_ai.usage.output_tokens': usage.output_tokens,
        'gen_ai.usage.cache_read.input_tokens': usage.cached_input_tokens,
        'gen_ai.usage.cache_creation.input_tokens': usage.cache_write_tokens,
        'gen_ai.usage.reasoning.output_tokens': usage.reasoning_tokens,
        ...(usage.cost_usd !== null ? { 'tailgate.cost_usd': usage.cost_usd } : {}),
      });
    }
    if (outcome.error_code !== null) {
      span.setAttribute('error.type', outcome.error_code);
      span.setStatus({ code: SpanStatusCode.ERROR });
    }
    span.end();
  }
}
