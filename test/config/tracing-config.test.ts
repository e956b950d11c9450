import { describe, expect, it } from 'vitest';
import { parseServiceConfig } from '../../lib/config.ts';
import { NotConfiguredError } from '../../lib/errors.ts';

/** The NotConfiguredError parseServiceConfig throws for `env`. */
function refusal(env: Record<string, string>): NotConfiguredError {
  try {
    parseServiceConfig(env);
  } catch (error) {
    if (error instanceof NotConfiguredError) return error;
    throw error;
  }
  throw new Error('the settings were accepted');
}

describe('the OTEL_* settings', () => {
  it('trace nothing unless OTEL_EXPORTER_OTLP_ENDPOINT is set (blank is unset)', () => {
    expect(parseServiceConfig({}).tracing).toBeNull();
    expect(parseServiceConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: ' ', OTEL_SERVICE_NAME: 'x' }).tracing).toBeNull();
  });

  it('send to the endpoint\'s v1/traces, with its headers decoded, as service "tailgate" by default', () => {
    expect(parseServiceConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }).tracing).toEqual({
      url: 'http://127.0.0.1:4318/v1/traces',
      headers: {},
      serviceName: 'tailgate',
    });
    const tracing = parseServiceConfig({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'https://collector.example/otlp/',
      OTEL_EXPORTER_OTLP_HEADERS: ' Authorization=Basic%20dXNlcjpwdw==, x-team = ai ,',
      OTEL_SERVICE_NAME: 'tailgate-eu',
    }).tracing;
    expect(tracing).toEqual({
      url: 'https://collector.example/otlp/v1/traces',
      headers: { Authorization: 'Basic dXNlcjpwdw==', 'x-team': 'ai' },
      serviceName: 'tailgate-eu',
    });
  });

  it.each([
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'collector:4318'],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'ftp://collector'],
    ['OTEL_EXPORTER_OTLP_HEADERS', 'no-value'],
    ['OTEL_EXPORTER_OTLP_HEADERS', '=value'],
    ['OTEL_EXPORTER_OTLP_HEADERS', 'bad name=value'],
    ['OTEL_EXPORTER_OTLP_HEADERS', 'key=%E0%A4%A'],
  ])('refuse %s=%s as not_configured naming it', (variable, value) => {
    const error = refusal({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', [variable]: value });
    expect(error.code).toBe('not_configured');
    expect(error.details).toMatchObject({ variable });
    expect(error.message).toContain(`invalid setting ${variable}: `);
  });

  it('never show the text of a header pair they refuse: it may hold a credential', () => {
    for (const value of ['Authorization: Bearer s3cret-token', 'x=1,Bearer s3cret-token', 'Bearer s3cret=token x']) {
      const error = refusal({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
        OTEL_EXPORTER_OTLP_HEADERS: value,
      });
      expect(error.code).toBe('not_configured');
      expect(JSON.stringify({ message: error.message, details: error.details })).not.toContain('s3cret');
    }
  });

  it('name both at once when both are bad, with the other settings', () => {
    const error = refusal({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'nowhere',
      OTEL_EXPORTER_OTLP_HEADERS: 'x',
      TURN_LEASE_MS: '5',
    });
    expect((error.details as { variables: string[] }).variables.sort()).toEqual([
      'OTEL_EXPORTER_OTLP_ENDPOINT',
      'OTEL_EXPORTER_OTLP_HEADERS',
      'TURN_LEASE_MS',
    ]);
  });
});
