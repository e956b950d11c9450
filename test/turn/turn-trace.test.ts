import { SpanStatusCode } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { describe, expect, it } from 'vitest';
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

describe('the spans of a turn (lib/turn/trace.ts)', () => {
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
