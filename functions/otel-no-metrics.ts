/**
 * The OpenTelemetry SDK's self-observability metrics in the Worker bundle (wrangler.toml
 * [alias] puts this in place of @opentelemetry/sdk-trace's TracerMetrics and
 * SpanProcessorMetrics and @opentelemetry/otlp-exporter-base's ExporterMetrics; about 1 KiB
 * gzipped). Each records only to the meter provider the SDK is given, and tailgate gives none
 * (functions/tracing.ts): there they record to the API's no-op meter, as these do by doing
 * nothing. Node and Deno load the real modules.
 */

/** `otel.sdk.span.*`: each span's start returns its end, recording nothing. */
export class TracerMetrics {
  startSpan(): () => void {
    return () => undefined;
  }
}

/** `otel.sdk.processor.span.*`. */
export class SpanProcessorMetrics {
  dropSpans(): void {}
  finishSpans(): void {}
  shutdown(): void {}
}

/** `otel.sdk.exporter.*`: each export's start returns its end, recording nothing. */
export class ExporterMetrics {
  startExport(): () => void {
    return () => undefined;
  }
}
