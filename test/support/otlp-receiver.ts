import { type RecordedRequest, startFakeProvider } from './fake-providers/fake-provider-server.ts';

/** A span as the loopback OTLP receiver decoded it from an OTLP/HTTP JSON export. */
export interface ReceivedSpan {
  name: string;
  traceId: string;
  spanId: string;
  /** Absent for a root span. */
  parentSpanId?: string;
  kind: number;
  /** 0 unset, 1 ok, 2 error. */
  statusCode: number;
  attributes: Record<string, string | number | boolean>;
  /** The attributes of the resource that exported it (service.name...). */
  resource: Record<string, string | number | boolean>;
  /** The headers of the export request that carried it. */
  headers: Record<string, string | string[] | undefined>;
}

export interface OtlpReceiver {
  /** What OTEL_EXPORTER_OTLP_ENDPOINT is set to: `http://127.0.0.1:<port>` (spans go to /v1/traces). */
  endpoint: string;
  /** Every span received so far, in arrival order. */
  spans(): ReceivedSpan[];
  close(): Promise<void>;
}

type AnyValue = { stringValue?: string; intValue?: string | number; doubleValue?: number; boolValue?: boolean };
type KeyValue = { key: string; value: AnyValue };

function attributes(list: KeyValue[] | undefined): Record<string, string | number | boolean> {
  const decoded: Record<string, string | number | boolean> = {};
  for (const { key, value } of list ?? []) {
    if (value.stringValue !== undefined) decoded[key] = value.stringValue;
    else if (value.intValue !== undefined) decoded[key] = Number(value.intValue);
    else if (value.doubleValue !== undefined) decoded[key] = value.doubleValue;
    else if (value.boolValue !== undefined) decoded[key] = value.boolValue;
  }
  return decoded;
}

/** The spans of one OTLP/HTTP JSON export request. */
function decode(body: any, headers: ReceivedSpan['headers']): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const resourceSpans of body?.resourceSpans ?? []) {
    const resource = attributes(resourceSpans.resource?.attributes);
    for (const scopeSpans of resourceSpans.scopeSpans ?? [])
      for (const span of scopeSpans.spans ?? [])
        spans.push({
          name: span.name,
          traceId: span.traceId,
          spanId: span.spanId,
          ...(span.parentSpanId ? { parentSpanId: span.parentSpanId } : {}),
          kind: span.kind,
          statusCode: span.status?.code ?? 0,
          attributes: attributes(span.attributes),
          resource,
          headers,
        });
  }
  return spans;
}

/**
 * An OTLP/HTTP receiver on loopback: `POST /v1/traces` takes a JSON export (200, as a
 * collector answers), and `GET /spans` answers the decoded spans received so far, for tests
 * that run where the receiver's memory is out of reach (inside workerd).
 */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  let received: RecordedRequest[] = [];
  const spans = () =>
    received
      .filter((request) => request.path === '/v1/traces')
      .flatMap((request) => decode(request.body, request.headers));
  const provider = await startFakeProvider((request) =>
    request.method === 'GET' && request.path === '/spans' ? { json: spans() } : { json: {} },
  );
  received = provider.requests;
  return {
    endpoint: provider.baseURL.replace(/\/v1$/, ''),
    spans,
    close: () => provider.close(),
  };
}
