import type { Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import type { TracingConfig } from '../lib/config.ts';

/**
 * OpenTelemetry traces of turns (lib/turn/trace.ts makes the spans): exported with OTLP over
 * HTTP (JSON) to OTEL_EXPORTER_OTLP_ENDPOINT by @opentelemetry/exporter-trace-otlp-http, whose
 * fetch transport runs on Workers, Node and Deno alike. Off (no tracer, nothing loaded into a
 * turn) while the endpoint is unset.
 */
export interface Tracing {
  tracer: Tracer;
  /** Exports the spans ended so far; each turn's end hands it to `background` (waitUntil on Workers). */
  flush(): Promise<void>;
}

/** The process's (isolate's) provider, kept while the settings stay the same. */
let current: { key: string; tracing: Tracing } | undefined;

/** The tracing of these settings, one provider per process and settings; undefined when off. */
export function tracingFor(settings: TracingConfig | null): Tracing | undefined {
  if (settings === null) return undefined;
  const key = JSON.stringify(settings);
  if (current?.key === key) return current.tracing;
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': settings.serviceName }),
    spanProcessors: [
      new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url: settings.url, headers: settings.headers }) }),
    ],
  });
  // Spans the replaced provider still holds are exported before it goes.
  const replaced = current?.tracing;
  void replaced?.flush().catch(() => undefined);
  current = { key, tracing: { tracer: provider.getTracer('tailgate'), flush: () => provider.forceFlush() } };
  return current.tracing;
}
