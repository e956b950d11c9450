import { describe, expect, it } from 'vitest';
import { parseServiceConfig } from '../../lib/config.ts';
import { NotConfiguredError } from '../../lib/errors.ts';

// CORS_ORIGINS (docs/CONFIGURATION.md): off unless set, `*` or a list of origins as a browser
// sends them; anything else is the operator's mistake, named (Node and Deno refuse to start).
describe('CORS_ORIGINS', () => {
  it('is off unset or blank', () => {
    expect(parseServiceConfig({}).corsOrigins).toBeNull();
    expect(parseServiceConfig({ CORS_ORIGINS: '  ' }).corsOrigins).toBeNull();
  });

  it('takes "*" or a comma-separated list of origins', () => {
    expect(parseServiceConfig({ CORS_ORIGINS: ' * ' }).corsOrigins).toBe('*');
    expect(parseServiceConfig({ CORS_ORIGINS: 'https://app.example.com, http://localhost:5173,' }).corsOrigins).toEqual(
      ['https://app.example.com', 'http://localhost:5173'],
    );
  });

  it.each([
    ['https://app.example.com/', 'write https://app.example.com'],
    ['https://app.example.com/chat', 'write https://app.example.com'],
    ['https://App.example.com', 'write https://app.example.com'],
    ['https://app.example.com:443', 'write https://app.example.com'],
    ['app.example.com', 'not an http:// or https:// origin'],
    ['ftp://files.example.com', 'not an http:// or https:// origin'],
    ['*, https://app.example.com', '"*" allows every origin and is set alone'],
  ])('refuses %j, saying how', (value, reason) => {
    const parse = () => parseServiceConfig({ CORS_ORIGINS: value });
    expect(parse).toThrow(NotConfiguredError);
    expect(parse).toThrow(/^invalid setting CORS_ORIGINS: /);
    expect(parse).toThrow(reason);
  });
});
