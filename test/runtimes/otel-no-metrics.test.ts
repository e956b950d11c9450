import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { expect, it } from 'vitest';
import * as standIn from '../../functions/otel-no-metrics.ts';

// wrangler.toml [alias] puts functions/otel-no-metrics.ts in place of these modules in the Worker
// bundle. A missing export fails the build; a missing method would throw only on Workers, and only
// where it is called (a span processor's shutdown, a full queue's drop), which no test reaches.
const require = createRequire(import.meta.url);
const dist = (name: string) => dirname(require.resolve(name));
const replaced = [
  join(dist('@opentelemetry/sdk-trace'), 'TracerMetrics.mjs'),
  join(dist('@opentelemetry/sdk-trace'), 'export/SpanProcessorMetrics.mjs'),
  join(dist('@opentelemetry/otlp-exporter-base'), 'ExporterMetrics.mjs'),
];

it('the stand-in of the SDK metrics modules has each of their classes with each of their methods', async () => {
  const methods = (value: unknown) =>
    typeof value === 'function'
      ? Object.getOwnPropertyNames(value.prototype)
          .filter((name) => name !== 'constructor')
          .sort()
      : [];
  for (const path of replaced) {
    const real = (await import(pathToFileURL(path).href)) as Record<string, unknown>;
    expect(Object.keys(real).length, path).toBeGreaterThan(0);
    for (const [name, value] of Object.entries(real)) {
      const own = (standIn as Record<string, unknown>)[name];
      expect(typeof own, `${name} of ${path}`).toBe(typeof value);
      expect(methods(own), `${name} of ${path}`).toEqual(expect.arrayContaining(methods(value)));
    }
  }
});
