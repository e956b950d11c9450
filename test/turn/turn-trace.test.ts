import {
  type Context,
  type ContextManager,
  ROOT_CONTEXT,
  SpanStatusCode,
  context,
  createContextKey,
  trace,
} from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { afterEach, describe, expect, it } from 'vitest';
import { tracingFor } from '../../functions/tracing.ts';
import { InvalidRequestError } from '../../lib/errors.ts';
import { echoModel } from '../../lib/models/echo.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { runTurn } from '../../lib/turn/index.ts';
import { turnWorld } from '../support/turn-world.ts';

/** A turn world whose turns' spans land in an in-memory exporter (the SDK's, unmocked). */
function tracedWorld() {
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  const world = turnWorld(new MemoryStore(), echoModel);
  world.services.tracer = provider.getTracer('test');
  const names = () => exporter.getFinishedSpans().map((span) => span.name);
  return { ...world, exporter, names };
}

/** A synchronous context manager (a stack), as a host would register one for its own spans. */
class StackContextManager implements ContextManager {
  #stack: Context[] = [];
  active(): Context {
    return this.#stack.at(-1) ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    active: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    this.#stack.push(active);
    try {
      return fn.call(thisArg, ...args);
    } finally {
      this.#stack.pop();
    }
  }
  bind<T>(_context: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.#stack = [];
    return this;
  }
}

const KEY = createContextKey('turn-trace.test');

/** Whether a global context manager is installed: without one, `context.with` carries nothing. */
function contextManagerInstalled(): boolean {
  return context.with(ROOT_CONTEXT.setValue(KEY, true), () => context.active().getValue(KEY) === true);
}

/** Whether a global tracer provider is installed: without one, the API's tracer records nothing. */
function providerInstalled(): boolean {
  const probe = trace.getTracer('turn-trace.test').startSpan('probe');
  probe.end();
  return probe.isRecording();
}

afterEach(() => {
  trace.disable();
  context.disable();
});

describe('tracing off', () => {
  it('a turn makes no span, not even through a provider the host registered globally', async () => {
    const exporter = new InMemorySpanExporter();
    trace.setGlobalTracerProvider(new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] }));
    expect(tracingFor(null)).toBeUndefined();
    const w = turnWorld(new MemoryStore(), echoModel);
    await w.sessions.create({ id: 's' });
    const response = await runTurn(w.services, 's', { input: 'hello' });
    await expect(runTurn(w.services, 'missing', { input: 'hello?' })).rejects.toMatchObject({ code: 'not_found' });
    expect(response.turn).toBe(1);
    expect(exporter.getFinishedSpans()).toEqual([]);
  });

  it('installs no global context manager or tracer provider, and neither does tracing on', async () => {
    expect([contextManagerInstalled(), providerInstalled()]).toEqual([false, false]);
    const w = turnWorld(new MemoryStore(), echoModel);
    await w.sessions.create({ id: 's' });
    await runTurn(w.services, 's', { input: 'off' });
    expect([contextManagerInstalled(), providerInstalled()]).toEqual([false, false]);
    // The exporter's provider (functions/tracing.ts), with nothing exported: its spans are not flushed.
    const tracing = tracingFor({ url: 'http://127.0.0.1:9/v1/traces', headers: {}, serviceName: 'test' });
    w.services.tracer = tracing!.tracer;
    await runTurn(w.services, 's', { input: 'on' });
    expect([contextManagerInstalled(), providerInstalled()]).toEqual([false, false]);
  });
});

describe('the spans of a turn (lib/turn/trace.ts)', () => {
  it("a turn is a trace of its own: the span active in a host's context manager is not its parent", async () => {
    context.setGlobalContextManager(new StackContextManager());
    const w = tracedWorld();
    await w.sessions.create({ id: 's' });
    const host = w.services.tracer!.startSpan('host request');
    await context.with(trace.setSpan(ROOT_CONTEXT, host), () => runTurn(w.services, 's', { input: 'hi' }));
    host.end();
    const spans = w.exporter.getFinishedSpans().filter((span) => span.name !== 'host request');
    const turn = spans.find((span) => span.name === 'chat echo')!;
    expect(turn.parentSpanContext).toBeUndefined();
    expect(turn.spanContext().traceId).not.toBe(host.spanContext().traceId);
    expect(spans.filter((span) => span !== turn).map((span) => span.parentSpanContext?.spanId)).toEqual(
      Array(spans.length - 1).fill(turn.spanContext().spanId),
    );
  });

  it('a replayed Idempotency-Key: the claim span only, the turn marked replayed, no usage', async () => {
    const w = tracedWorld();
    await w.sessions.create({ id: 's' });
    await runTurn(w.services, 's', { input: 'once' }, { idempotencyKey: 'k' });
    w.exporter.reset();
    await runTurn(w.services, 's', { input: 'once' }, { idempotencyKey: 'k' });
    expect(w.names()).toEqual(['tailgate.claim', 'chat']);
    const turn = w.exporter.getFinishedSpans()[1]!;
    expect(turn.attributes).toMatchObject({ 'tailgate.turn.status': 'replayed', 'gen_ai.conversation.id': 's' });
    expect(turn.attributes['gen_ai.usage.input_tokens']).toBeUndefined();
  });

  it('a turn on a missing session: an error span with error.type, its claim span failed too', async () => {
    const w = tracedWorld();
    await expect(runTurn(w.services, 'missing', { input: 'hello?' })).rejects.toMatchObject({ code: 'not_found' });
    const [claim, turn] = w.exporter.getFinishedSpans();
    expect(claim!.name).toBe('tailgate.claim');
    expect(claim!.status.code).toBe(SpanStatusCode.ERROR);
    expect(turn!.status.code).toBe(SpanStatusCode.ERROR);
    expect(turn!.attributes).toMatchObject({ 'error.type': 'not_found', 'tailgate.turn.status': 'failed' });
    expect(turn!.attributes['tailgate.turn']).toBeUndefined();
  });

  it('a refused request (an unknown model) is a failed turn span with no children', async () => {
    const w = tracedWorld();
    w.services.model = () => {
      throw new InvalidRequestError('unknown model', { field: 'model' });
    };
    await w.sessions.create({ id: 's' });
    await expect(runTurn(w.services, 's', { input: 'x', model: 'nowhere:x' })).rejects.toThrow('unknown model');
    expect(w.names()).toEqual(['chat']);
    expect(w.exporter.getFinishedSpans()[0]!.attributes['error.type']).toBe('invalid_request');
  });
});
