import { describe, expect, it } from 'vitest';
import { parseServiceConfig } from '../../lib/config.ts';
import { SERVICE_CONFIG_READS, serviceConfigOf, serviceConfigParses } from '../../lib/config-cache.ts';
import { NotConfiguredError } from '../../lib/errors.ts';

// serviceConfigOf (lib/config-cache.ts): what parseServiceConfig answers, parsed again only when
// the settings it reads differ from the last parse's.

/** What a call answers: its config, or the class, message and details of what it threw. */
function outcome(read: () => unknown): unknown {
  try {
    return { config: read() };
  } catch (error) {
    const { name, message } = error as Error;
    return { threw: name, message, details: (error as NotConfiguredError).details };
  }
}

const SECRET = 'a-token-of-some-length';

describe('serviceConfigOf', () => {
  it('parses once for many reads of one env, and again when a setting changes', () => {
    const env: Record<string, unknown> = { API_TOKEN: SECRET, EPOCH_SIZE: '7', BUCKET: { binding: true } };
    const before = serviceConfigParses();
    const first = serviceConfigOf(env);
    for (let read = 0; read < 20; read++) expect(serviceConfigOf(env)).toBe(first);
    expect(serviceConfigParses()).toBe(before + 1);
    // Another object with the same settings (Deno's env is a new object a request): no parse.
    expect(serviceConfigOf({ ...env, UNRELATED: 'x' })).toBe(first);
    expect(serviceConfigParses()).toBe(before + 1);
    // A changed object is parsed anew, a setting changed in place too (process.env).
    const other = serviceConfigOf({ ...env, MAX_BODY_BYTES: '1000' });
    expect(other.maxBodyBytes).toBe(1000);
    expect(serviceConfigParses()).toBe(before + 2);
    env.API_TOKEN = `${SECRET}-2`;
    expect(serviceConfigOf(env).apiToken).toBe(`${SECRET}-2`);
    expect(serviceConfigParses()).toBe(before + 3);
  });

  it('parses a strategy setting it does not hold in the config again when it changes', () => {
    const env: Record<string, unknown> = { API_TOKEN: SECRET };
    serviceConfigOf(env);
    env.EPOCH_SIZE = 'abc';
    expect(() => serviceConfigOf(env)).toThrow('invalid setting EPOCH_SIZE');
    env.EPOCH_SIZE = '5';
    env.PROMPT_STRATEGY = 'no_such_strategy';
    expect(() => serviceConfigOf(env)).toThrow('invalid setting PROMPT_STRATEGY');
  });

  it('throws the same for settings that do not parse on every read, parsing each', () => {
    const env = { API_TOKEN: SECRET, MAX_BODY_BYTES: '4MB', EPOCH_SIZE: 'abc' };
    const expected = outcome(() => parseServiceConfig(env));
    expect(expected).toMatchObject({ threw: 'NotConfiguredError' });
    const before = serviceConfigParses();
    for (let read = 0; read < 3; read++) expect(outcome(() => serviceConfigOf(env))).toEqual(expected);
    expect(serviceConfigParses()).toBe(before + 3);
    // A valid env after it is parsed, and kept.
    const valid = { API_TOKEN: SECRET };
    expect(serviceConfigOf(valid)).toEqual(parseServiceConfig(valid));
    expect(serviceConfigOf(valid)).toBe(serviceConfigOf({ ...valid }));
  });

  it('answers what parseServiceConfig answers, for varied envs in any order', () => {
    const envs: Record<string, unknown>[] = [
      {},
      { API_TOKEN: SECRET },
      { API_TOKEN: SECRET, ALLOW_ANONYMOUS: true, MAX_BODY_BYTES: 2048 },
      { API_TOKEN: SECRET, ALLOW_ANONYMOUS: 'true', MAX_BODY_BYTES: '2048' },
      { API_TOKEN: SECRET, EPOCH_SIZE: 12, FULL_TOOL_CALLS: '3', PROMPT_STRATEGY: 'inbox' },
      { API_TOKEN: SECRET, EPOCH_SIZE: '12', PROMPT_STRATEGY: 'inbox,no_such' },
      { API_TOKEN: SECRET, KEY_PREFIX: 'prod/', CORS_ORIGINS: '*', TURN_LEASE_MS: '2999' },
      { API_TOKEN: SECRET, WEBHOOK_URL: 'https://example.com/hook', AI: { run: () => undefined } },
      { API_TOKEN: SECRET, WEBHOOK_URL: 'https://example.com/hook', WEBHOOK_SECRET: 'w'.repeat(32) },
      { TOKEN_SIGNING_KEY_PREVIOUS: 'k'.repeat(44), MODEL_ALIASES: '{', DEFAULT_MODEL: 'nope' },
      { API_TOKEN: SECRET, SESSION_TTL_DAYS: ' 30 ', LOG_CONTENT: 'yes', UNRELATED: '1' },
    ];
    for (const order of [envs, [...envs].reverse(), envs.flatMap((env) => [env, env])])
      for (const env of order)
        expect(outcome(() => serviceConfigOf(env))).toEqual(outcome(() => parseServiceConfig(env)));
  });

  it('covers every variable parseServiceConfig reads in what it compares', () => {
    const read = new Set<string>();
    // Only variables of the list are present: what stringEnv enumerates is of it, any other read is not.
    const env = { API_TOKEN: SECRET, WEBHOOK_SECRET: 'w'.repeat(32) };
    const handler: ProxyHandler<Record<string, unknown>> = {
      get(target, name) {
        if (typeof name === 'string') read.add(name);
        return Reflect.get(target, name);
      },
    };
    // Valid, and not: a failure's checks read on their own (lib/strategy-settings.ts).
    parseServiceConfig(new Proxy(env, handler));
    expect(() =>
      parseServiceConfig(new Proxy({ ...env, EPOCH_SIZE: 'abc', WEBHOOK_URL: 'ftp://x' }, handler)),
    ).toThrow();
    expect(read.size).toBeGreaterThan(SERVICE_CONFIG_READS.length / 2);
    expect([...read].filter((name) => !SERVICE_CONFIG_READS.includes(name))).toEqual([]);
  });
});
