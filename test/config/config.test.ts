import fc from 'fast-check';
import { NotConfiguredError } from '../../lib/errors.ts';
import { describe, expect, it } from 'vitest';
import { parseServiceConfig } from '../../lib/config.ts';

describe('parseServiceConfig', () => {
  it('gives the documented defaults for an empty env', () => {
    const config = parseServiceConfig({});
    expect(config).toMatchObject({
      apiToken: undefined,
      allowAnonymous: false,
      keyPrefix: '',
      defaultModel: 'echo',
      maxBodyBytes: 4 * 1024 * 1024,
      maxItemBytes: 1024 * 1024,
      maxNoticeBytes: 256 * 1024,
      maxMetadataBytes: 64 * 1024,
      maxInstructionsBytes: 256 * 1024,
      blobThresholdBytes: 8 * 1024,
      viewCacheBytes: 16 * 1024 * 1024,
      // Node and Deno's; a Worker's is functions/worker.ts's (test/workers/record-cache.test.ts).
      recordCacheBytes: 32 * 1024 * 1024,
      modelTimeoutMs: 120_000,
      turnLeaseMs: 30_000,
    });
    expect(config.s3.region).toBe('auto');
  });

  it('refuses a turn lease too short to be renewed (503 not_configured naming TURN_LEASE_MS)', () => {
    expect(parseServiceConfig({ TURN_LEASE_MS: '3000' }).turnLeaseMs).toBe(3000);
    const error = (() => {
      try {
        parseServiceConfig({ TURN_LEASE_MS: '2999' });
      } catch (caught) {
        return caught;
      }
    })();
    expect(error).toBeInstanceOf(NotConfiguredError);
    expect((error as NotConfiguredError).message).toContain('TURN_LEASE_MS');
    expect((error as NotConfiguredError).details).toEqual({ variable: 'TURN_LEASE_MS' });
  });

  it.each([
    ['true', true],
    ['TRUE', true],
    ['1', true],
    ['yes', true],
    ['false', false],
    ['0', false],
    ['', false],
  ])('reads ALLOW_ANONYMOUS=%j as %s', (value, expected) => {
    expect(parseServiceConfig({ ALLOW_ANONYMOUS: value }).allowAnonymous).toBe(expected);
  });

  it.each(['ALLOW_ANONYMOUS', 'PUBLIC_DOCS', 'LOG_CONTENT', 'WEBHOOK_ALLOW_PRIVATE', 'OPENAI_COMPATIBLE_IMAGES'])(
    'tells the operator a switch %s=maybe takes true, 1, yes, false, 0 or no',
    (name) => {
      expect(() => parseServiceConfig({ [name]: 'maybe' })).toThrow(
        `invalid setting ${name}: must be true, 1 or yes (on), or false, 0 or no (off); this is "maybe"`,
      );
    },
  );

  // A wrangler.toml `[vars]` integer reaches a Worker as a number: 1 and 0 are the switch's own values.
  it.each([
    [1, true],
    [0, false],
  ])('reads a switch given as the number %j as %s, as its text is read', (value, expected) => {
    expect(parseServiceConfig({ ALLOW_ANONYMOUS: value }).allowAnonymous).toBe(expected);
    expect(parseServiceConfig({ PUBLIC_DOCS: value }).publicDocs).toBe(expected);
    expect(() => parseServiceConfig({ LOG_CONTENT: value + 2 })).toThrow(
      `invalid setting LOG_CONTENT: must be true, 1 or yes (on), or false, 0 or no (off); this is "${value + 2}"`,
    );
  });

  it.each(['OPENAI_BASE_URL', 'OPENAI_COMPATIBLE_BASE_URL', 'ANTHROPIC_BASE_URL'])(
    'refuses a %s without its scheme (localhost:11434/v1), as every call to it would fail',
    (name) => {
      expect(() => parseServiceConfig({ [name]: 'localhost:11434/v1' })).toThrow(
        `invalid setting ${name}: must be an http:// or https:// URL`,
      );
      expect(parseServiceConfig({ [name]: ' ' })).toBeDefined();
    },
  );

  it('refuses a MODEL_ALIASES target that names no model id, naming the pair', () => {
    expect(() => parseServiceConfig({ MODEL_ALIASES: 'fast=openai:gpt-4.1-mini,smart=gpt-4o' })).toThrow(
      'invalid setting MODEL_ALIASES: "smart=gpt-4o": gpt-4o must be echo or <provider>:<model>',
    );
    expect(parseServiceConfig({ MODEL_ALIASES: 'fast=openai:gpt-4.1-mini' }).modelAliases).toEqual({
      fast: 'openai:gpt-4.1-mini',
    });
  });

  it('takes a blank number or PUBLIC_DOCS as unset: the default, not 0 or false', () => {
    const defaults = parseServiceConfig({});
    const blank = parseServiceConfig({
      VIEW_CACHE_BYTES: ' ',
      RECORD_CACHE_BYTES: ' ',
      MODEL_MAX_RETRIES: ' ',
      PUBLIC_DOCS: '',
    });
    expect([blank.viewCacheBytes, blank.recordCacheBytes, blank.modelMaxRetries, blank.publicDocs]).toEqual([
      defaults.viewCacheBytes,
      defaults.recordCacheBytes,
      defaults.modelMaxRetries,
      true,
    ]);
    expect(defaults.viewCacheBytes).toBeGreaterThan(0);
  });

  it('treats a blank token as no token, and ignores bindings and unknown variables', () => {
    const config = parseServiceConfig({ API_TOKEN: '  ', BUCKET: { get() {} }, PATH: '/usr/bin' });
    expect(config.apiToken).toBeUndefined();
  });

  it.each([
    ['DEFAULT_MODEL', 'gpt-4o'],
    ['DEFAULT_MODEL', 'openaix'],
    ['DEFAULT_MODEL', 'mystery:model'],
    ['SUMMARY_MODEL', 'anthropic:'],
    ['MAX_BODY_BYTES', 'lots'],
    ['MAX_ITEM_BYTES', '0'],
    ['TURN_LEASE_MS', '-5'],
    ['ALLOW_ANONYMOUS', 'maybe'],
    ['KEY_PREFIX', 'a b'],
    ['VIEW_CACHE_BYTES', '-1'],
    ['RECORD_CACHE_BYTES', '4MB'],
    ['MODEL_MAX_RETRIES', '11'],
  ])('refuses %s=%j with not_configured naming it', (name, value) => {
    expect(() => parseServiceConfig({ [name]: value })).toThrow(NotConfiguredError);
    expect(() => parseServiceConfig({ [name]: value })).toThrow(name);
  });

  it.each([
    ['MAX_BODY_BYTES', '4MB'],
    ['TURN_LEASE_MS', '30s'],
    ['SESSION_TTL_DAYS', '2.5'],
    ['RATE_LIMIT_TURNS_PER_MINUTE_PER_TOKEN', 'ten'],
  ])('tells the operator %s=%j must be a whole number in digits, without a unit', (name, value) => {
    expect(() => parseServiceConfig({ [name]: value })).toThrow(
      `invalid setting ${name}: must be a whole number in digits, without a unit`,
    );
  });

  it.each([
    ['MAX_BODY_BYTES', '0x10'],
    ['TURN_LEASE_MS', '1e3'],
    ['VIEW_CACHE_BYTES', ' 0b11'],
    ['MODEL_MAX_RETRIES', '0o7'],
    ['SESSION_TTL_DAYS', '1_000'],
    ['RATE_LIMIT_TURNS_PER_MINUTE_PER_SESSION', '+5'],
  ])('refuses %s=%j, which is no decimal digits, naming the setting and the text', (name, value) => {
    expect(() => parseServiceConfig({ [name]: value })).toThrow(
      `invalid setting ${name}: must be a whole number in digits, without a unit`,
    );
    expect(() => parseServiceConfig({ [name]: value })).toThrow(JSON.stringify(value));
  });

  it('reads a whole-number setting written in decimal digits, blanks around it ignored', () => {
    expect(parseServiceConfig({ MAX_BODY_BYTES: ' 4194304 ', VIEW_CACHE_BYTES: '0' })).toMatchObject({
      maxBodyBytes: 4194304,
      viewCacheBytes: 0,
    });
  });

  it.each([
    ['MAX_BODY_BYTES', '-5', 'Too small: expected number to be >0'],
    ['VIEW_CACHE_BYTES', '-1', 'Too small: expected number to be >=0'],
    ['SESSION_TTL_DAYS', '0', 'Too small: expected number to be >=1'],
    ['SESSION_TTL_DAYS', '99999999', 'Too big: expected number to be <=36500'],
    ['RATE_LIMIT_TURNS_PER_MINUTE_PER_TOKEN', '0', 'Too small: expected number to be >0'],
    ['TURN_LEASE_MS', '2147483648', 'Too big: expected number to be <=2147483647'],
  ])('tells the operator a whole %s=%j out of its range what the range is, not to write digits', (name, value, why) => {
    expect(() => parseServiceConfig({ [name]: value })).toThrow(`invalid setting ${name}: ${why}`);
  });

  it.each(['TURN_LEASE_MS', 'MODEL_TIMEOUT_MS'])(
    'refuses %s over 2147483647, the longest a timer waits (a longer one fires at once)',
    (name) => {
      expect(() => parseServiceConfig({ [name]: '2147483648' })).toThrow(NotConfiguredError);
      expect(() => parseServiceConfig({ [name]: '1e12' })).toThrow(name);
      expect(() => parseServiceConfig({ [name]: '2147483647' })).not.toThrow();
    },
  );

  it.each(['localhost:9000', '127.0.0.1:9000', 'minio', 'ftp://minio:9000'])(
    'refuses S3_ENDPOINT=%j (no http:// or https://) with not_configured naming it',
    (endpoint) => {
      const refused = () => parseServiceConfig({ S3_ENDPOINT: endpoint, S3_BUCKET: 'tailgate' });
      expect(refused).toThrow(NotConfiguredError);
      expect(refused).toThrow('S3_ENDPOINT');
    },
  );

  it('accepts an http or https S3_ENDPOINT', () => {
    for (const endpoint of ['http://localhost:9000', 'https://account.r2.cloudflarestorage.com']) {
      expect(parseServiceConfig({ S3_ENDPOINT: endpoint, S3_BUCKET: 'tailgate' }).s3.endpoint).toBe(endpoint);
    }
  });

  it.each([
    ['EPOCH_SIZE', 'abc'],
    ['EPOCH_SIZE', '2.5'],
    ['MAX_TOOL_CHARS', '1e999'],
    ['CONTEXT_LIMIT', 'lots'],
    ['COMPACT_TRIGGER_RATIO', '7'],
    ['PROMPT_STRATEGY', 'shorten_tools,bogus'],
  ])('refuses the strategy setting %s=%j with not_configured naming it', (name, value) => {
    const error = (() => {
      try {
        parseServiceConfig({ [name]: value });
      } catch (caught) {
        return caught;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(NotConfiguredError);
    expect(error).toMatchObject({ code: 'not_configured', details: { variable: name } });
    expect((error as Error).message).toContain(`invalid setting ${name}: `);
  });

  it('names every invalid setting at once, not the first one only', () => {
    const error = (() => {
      try {
        parseServiceConfig({
          TURN_LEASE_MS: '10',
          MAX_BODY_BYTES: 'lots',
          EPOCH_SIZE: 'x',
          MODEL_ALIASES: 'broken',
          TOKEN_SIGNING_KEY: 'tailgate',
        });
      } catch (caught) {
        return caught;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(NotConfiguredError);
    const variables = ['TURN_LEASE_MS', 'MAX_BODY_BYTES', 'EPOCH_SIZE', 'MODEL_ALIASES', 'TOKEN_SIGNING_KEY'];
    expect(new Set(((error as NotConfiguredError).details as { variables: string[] }).variables)).toEqual(
      new Set(variables),
    );
    for (const name of variables) expect((error as Error).message).toContain(`invalid setting ${name}: `);
  });

  it('names every invalid strategy setting at once: each threshold and PROMPT_STRATEGY', () => {
    const error = (() => {
      try {
        parseServiceConfig({ EPOCH_SIZE: 'abc', FULL_IMAGES: 'x', PROMPT_STRATEGY: 'bogus' });
      } catch (caught) {
        return caught;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(NotConfiguredError);
    const variables = ['EPOCH_SIZE', 'FULL_IMAGES', 'PROMPT_STRATEGY'];
    expect(new Set(((error as NotConfiguredError).details as { variables: string[] }).variables)).toEqual(
      new Set(variables),
    );
    for (const name of variables) expect((error as Error).message).toContain(`invalid setting ${name}: `);
  });

  it.each([
    [{ EPOCH_SIZE: 'abc', CONTEXT_LIMIT: '100', RESPONSE_RESERVE: '200' }, ['EPOCH_SIZE', 'RESPONSE_RESERVE']],
    [{ CONTEXT_LIMIT: 'abc', RESPONSE_RESERVE: '200' }, ['CONTEXT_LIMIT']],
  ])('names a reserve leaving the window no room beside every other bad setting: %o', (env, variables) => {
    const error = (() => {
      try {
        parseServiceConfig(env);
      } catch (caught) {
        return caught;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(NotConfiguredError);
    const named = (error as NotConfiguredError).details as { variable?: string; variables?: string[] };
    expect(named.variables ?? [named.variable]).toEqual(variables);
    for (const name of variables) expect((error as Error).message).toContain(`invalid setting ${name}: `);
  });

  it('accepts good strategy settings', () => {
    expect(() =>
      parseServiceConfig({
        EPOCH_SIZE: ' 12 ',
        COMPACT_TRIGGER_RATIO: '0.5',
        PROMPT_STRATEGY: 'shorten_tools, inbox',
        MAX_TOOL_CHARS: '',
      }),
    ).not.toThrow();
  });

  it.each(['prod', 'sessions/', 'a/sessions/', 'a/sessions/x/', 'a/b', '/', '/prod/', 'a//b/', './', '../', 'a/../b/'])(
    'refuses KEY_PREFIX=%j with not_configured naming it',
    (prefix) => {
      expect(() => parseServiceConfig({ KEY_PREFIX: prefix })).toThrow(NotConfiguredError);
      expect(() => parseServiceConfig({ KEY_PREFIX: prefix })).toThrow('KEY_PREFIX');
    },
  );

  it.each(['', 'prod/', 'a/b/', 'mysessions/', 'sessions-old/', '.hidden/', 'a..b/'])(
    'accepts KEY_PREFIX=%j',
    (prefix) => {
      expect(parseServiceConfig({ KEY_PREFIX: prefix }).keyPrefix).toBe(prefix);
    },
  );

  it('trims whitespace and newlines around secrets', () => {
    const config = parseServiceConfig({
      API_TOKEN: ' secret\n',
      AWS_ACCESS_KEY_ID: 'id\r\n',
      AWS_SECRET_ACCESS_KEY: '\tkey ',
    });
    expect(config.apiToken).toBe('secret');
    expect(config.s3).toMatchObject({ accessKeyId: 'id', secretAccessKey: 'key' });
  });

  it('accepts a TOKEN_SIGNING_KEY of 32 or more random bytes in base64 or base64url, trimmed', () => {
    for (let round = 0; round < 200; round++) {
      const bytes = crypto.getRandomValues(new Uint8Array(32 + (round % 33)));
      const base64 = btoa(String.fromCharCode(...bytes));
      const base64url = base64.replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '');
      for (const key of [base64, base64url, base64.replace(/=+$/, '')])
        expect(parseServiceConfig({ TOKEN_SIGNING_KEY: key }).tokenSigningKey).toBe(key);
    }
    const key = 'aXgG7TWfirGzinwJdeHqr8xHQEH5yHGTO7JxU49qlyE=';
    const config = parseServiceConfig({ TOKEN_SIGNING_KEY: ` ${key}\n`, TOKEN_SIGNING_KEY_PREVIOUS: key });
    expect(config).toMatchObject({ tokenSigningKey: key, tokenSigningKeyPrevious: key });
    expect(parseServiceConfig({ TOKEN_SIGNING_KEY: ' ' }).tokenSigningKey).toBeUndefined();
  });

  it.each([
    ['x', 'is not base64 or base64url text'],
    ['tailgate', 'decodes to 6 bytes, fewer than 32'],
    ['aXgG7TWfirGzinwJdeHqr8xHQEH5yHGTO7JxU49q', 'decodes to 30 bytes, fewer than 32'],
    ['A'.repeat(44), 'repeats its bytes too much to be random'],
    ['0123456789abcdef'.repeat(3), 'repeats its bytes too much to be random'],
    ['a secret with spaces that is long enough to be 32 bytes', 'is not base64 or base64url text'],
    ['aXgG7TWfirGzinwJdeHqr8xHQEH5yHGTO7JxU49qlyE===', 'is not base64 or base64url text'],
  ])('refuses TOKEN_SIGNING_KEY=%j (%s), naming the rule', (key, reason) => {
    for (const variable of ['TOKEN_SIGNING_KEY', 'TOKEN_SIGNING_KEY_PREVIOUS']) {
      const env = { TOKEN_SIGNING_KEY: 'aXgG7TWfirGzinwJdeHqr8xHQEH5yHGTO7JxU49qlyE=', [variable]: key };
      expect(() => parseServiceConfig(env)).toThrow(NotConfiguredError);
      expect(() => parseServiceConfig(env)).toThrow(
        `invalid setting ${variable}: must be at least 32 random bytes in base64 or base64url ` +
          `(generate one with \`openssl rand -base64 32\`); this one ${reason}`,
      );
    }
  });

  it('refuses TOKEN_SIGNING_KEY_PREVIOUS without TOKEN_SIGNING_KEY', () => {
    expect(() =>
      parseServiceConfig({ TOKEN_SIGNING_KEY_PREVIOUS: 'aXgG7TWfirGzinwJdeHqr8xHQEH5yHGTO7JxU49qlyE=' }),
    ).toThrow(/TOKEN_SIGNING_KEY_PREVIOUS: it only verifies tokens during a key rotation; set TOKEN_SIGNING_KEY too/);
  });

  it('reads DEFAULT_SESSION_BUDGET as JSON, and refuses a bad one naming the variable and what is wrong', () => {
    expect(parseServiceConfig({}).defaultSessionBudget).toBeNull();
    expect(parseServiceConfig({ DEFAULT_SESSION_BUDGET: ' ' }).defaultSessionBudget).toBeNull();
    // A budget naming no limit is no default limit, as unset (a session's `budget: {}` is no limit too).
    expect(parseServiceConfig({ DEFAULT_SESSION_BUDGET: '{}' }).defaultSessionBudget).toBeNull();
    expect(parseServiceConfig({ DEFAULT_SESSION_BUDGET: ' { } ' }).defaultSessionBudget).toBeNull();
    expect(parseServiceConfig({ DEFAULT_SESSION_BUDGET: '{"max_cost_usd": 5, "max_turns": 3}' })).toMatchObject({
      defaultSessionBudget: { max_cost_usd: 5, max_turns: 3 },
    });
    const shape = 'must be JSON like {"max_cost_usd": 5, "max_turns": 100, "max_total_tokens": 2000000}';
    for (const [text, problem] of [
      ['max_cost_usd=5', 'this is not JSON'],
      ['{"max_cost": 5}', 'Unrecognized key: "max_cost"'],
      ['{"max_turns": -1}', 'max_turns: Too small: expected number to be >=0'],
      ['{"max_total_tokens": 1.5}', 'max_total_tokens: Invalid input: expected int, received number'],
      ['null', 'Invalid input: expected object, received null'],
    ] as const) {
      const error = (() => {
        try {
          parseServiceConfig({ DEFAULT_SESSION_BUDGET: text });
        } catch (caught) {
          return caught;
        }
      })();
      expect(error, text).toBeInstanceOf(NotConfiguredError);
      // The whole problem: a budget of the wrong shape is not also said to name no limit.
      expect((error as NotConfiguredError).message).toBe(
        `invalid setting DEFAULT_SESSION_BUDGET: ${shape}; ${problem}`,
      );
      expect((error as NotConfiguredError).details).toEqual({ variable: 'DEFAULT_SESSION_BUDGET' });
    }
  });

  it('turns the view and record caches off with VIEW_CACHE_BYTES=0 and RECORD_CACHE_BYTES=0', () => {
    expect(parseServiceConfig({ VIEW_CACHE_BYTES: '0' }).viewCacheBytes).toBe(0);
    expect(parseServiceConfig({ VIEW_CACHE_BYTES: '1048576' }).viewCacheBytes).toBe(1024 * 1024);
    expect(parseServiceConfig({ RECORD_CACHE_BYTES: '0' }).recordCacheBytes).toBe(0);
    expect(parseServiceConfig({ RECORD_CACHE_BYTES: '1048576' }).recordCacheBytes).toBe(1024 * 1024);
  });

  it('reads numbers back exactly, and is not memoized between calls', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2 ** 40 }), fc.integer({ min: 1, max: 2 ** 30 }), (body, item) => {
        const config = parseServiceConfig({ MAX_BODY_BYTES: String(body), MAX_ITEM_BYTES: String(item) });
        expect(config.maxBodyBytes).toBe(body);
        expect(config.maxItemBytes).toBe(item);
      }),
      { numRuns: 100 },
    );
  });
});
