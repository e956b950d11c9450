import { MAX_TTL_DAYS } from './session/fields.ts';
import { z } from 'zod';
import { NotConfiguredError } from './errors.ts';
import { strategySettingProblems } from './strategy-settings.ts';
import type { ModelPrices } from './ledger/prices.ts';
import type { Budget } from './ledger/usage.ts';
import {
  booleanText,
  budgetText,
  corsOriginsText,
  headerListText,
  httpUrlText,
  nonNegativeInteger,
  numberText,
  wholeNumber,
  optionalText,
  MAX_TIMER_MS,
  positiveInteger,
  secretText,
  signingKeyText,
  webhookSecretText,
} from './setting-values.ts';
import { webhookUrlProblem } from './webhooks/url.ts';
import { DEFAULTS } from './defaults.ts';
import { modelIdSchema, parseModelAliases, parseModelPrices } from './model-settings.ts';

/**
 * The service settings: one schema, parsed from a plain env object (workerd bindings and
 * vars, `process.env`, `Deno.env`). Runtime entries pass the env in; lib/ never reads it.
 *
 * Read on every request, and parsed again whenever what it reads changed (lib/config-cache.ts),
 * so a changed variable takes effect without a restart and a long-lived isolate never freezes
 * thresholds. Strategy thresholds are not here:
 * lib/strategies resolves them (defaults < env < session < request) from the same env object.
 */

/**
 * Empty, or ending in `/`, with no empty, `.` or `..` segment (MinIO refuses such keys, and a proxy
 * may resolve them into another bucket's path), and no path segment named `sessions`: deployments `a/` and
 * `a/sessions/x/` would share keys (the second's objects would be session x of the first).
 */
const keyPrefixSchema = z
  .string()
  .regex(/^[A-Za-z0-9._/-]*$/, 'may hold only A-Z a-z 0-9 . _ / -')
  .max(256)
  .refine((prefix) => prefix === '' || prefix.endsWith('/'), 'must be empty or end in "/"')
  .refine(
    (prefix) =>
      prefix
        .split('/')
        .slice(0, -1)
        .every((segment) => segment !== '' && segment !== '.' && segment !== '..'),
    'must not start with "/" nor have an empty, "." or ".." segment (stores and proxies refuse or resolve them)',
  )
  .refine(
    (prefix) => !`/${prefix}`.includes('/sessions/'),
    'must not have a segment "sessions/" (it would overlap another deployment\'s sessions)',
  );

export const serviceEnvSchema = z.object({
  API_TOKEN: secretText(),
  TOKEN_SIGNING_KEY: signingKeyText(),
  // Verifies tokens only, during a key rotation (docs/SECURITY.md).
  TOKEN_SIGNING_KEY_PREVIOUS: signingKeyText(),
  ALLOW_ANONYMOUS: booleanText,
  KEY_PREFIX: z.preprocess((value) => (value === undefined ? '' : value), keyPrefixSchema),
  DEFAULT_MODEL: z.preprocess(
    (value) => (value === undefined || value === '' ? DEFAULTS.defaultModel : value),
    modelIdSchema,
  ),
  PROMPT_STRATEGY: optionalText(),
  MAX_BODY_BYTES: positiveInteger(DEFAULTS.maxBodyBytes),
  MAX_BUFFERED_BODY_BYTES: positiveInteger(DEFAULTS.maxBufferedBodyBytes),
  MAX_ITEM_BYTES: positiveInteger(DEFAULTS.maxItemBytes),
  MAX_NOTICE_BYTES: positiveInteger(DEFAULTS.maxNoticeBytes),
  MAX_NOTICES_PER_TURN: positiveInteger(DEFAULTS.maxNoticesPerTurn),
  MAX_PENDING_NOTICES: positiveInteger(DEFAULTS.maxPendingNotices),
  MAX_METADATA_BYTES: positiveInteger(DEFAULTS.maxMetadataBytes),
  MAX_INSTRUCTIONS_BYTES: positiveInteger(DEFAULTS.maxInstructionsBytes),
  // Renewed every third of itself while the turn runs, so it need not outlast a model call;
  // below 3 s a renewal (one storage write) would have too little time to land.
  TURN_LEASE_MS: positiveInteger(DEFAULTS.turnLeaseMs, MAX_TIMER_MS).refine(
    (value) => value >= 3000,
    'must be at least 3000 (the lease is renewed every third of it)',
  ),
  BLOB_THRESHOLD_BYTES: positiveInteger(DEFAULTS.blobThresholdBytes),
  MAX_IMAGE_BYTES: positiveInteger(DEFAULTS.maxImageBytes),
  MAX_FILE_BYTES: positiveInteger(DEFAULTS.maxFileBytes),
  // Days a session may stay idle before the retention sweep deletes it (unset: kept for ever).
  SESSION_TTL_DAYS: z.preprocess(numberText, wholeNumber().min(1).max(MAX_TTL_DAYS).optional()),
  VIEW_CACHE_BYTES: nonNegativeInteger(DEFAULTS.viewCacheBytes),
  // Node and Deno's default; functions/worker.ts gives a Worker a smaller one.
  RECORD_CACHE_BYTES: nonNegativeInteger(DEFAULTS.recordCacheBytes),
  // A timer set longer than 2^31 - 1 ms fires at once: every call would time out.
  MODEL_TIMEOUT_MS: positiveInteger(DEFAULTS.modelTimeoutMs, MAX_TIMER_MS),
  MODEL_MAX_RETRIES: nonNegativeInteger(DEFAULTS.modelMaxRetries, 10),
  SUMMARY_MODEL: z.preprocess(
    (value) => (typeof value === 'string' && value.trim() === '' ? undefined : value),
    modelIdSchema.optional(),
  ),
  // `name=provider:model,...`: model names the OpenAI-compatible API accepts besides tailgate ids.
  MODEL_ALIASES: optionalText(),
  // JSON: USD per million tokens by model id, over the defaults of lib/ledger/prices.ts.
  MODEL_PRICES: optionalText(),
  SUMMARY_PROMPT: optionalText(),
  OPENAI_API_KEY: optionalText(),
  OPENAI_BASE_URL: httpUrlText(),
  OPENAI_COMPATIBLE_BASE_URL: httpUrlText(),
  OPENAI_COMPATIBLE_API_KEY: optionalText(),
  // Whether openai-compatible: models take images and files (off: text placeholders instead).
  OPENAI_COMPATIBLE_IMAGES: booleanText,
  ANTHROPIC_API_KEY: optionalText(),
  ANTHROPIC_BASE_URL: httpUrlText(),
  S3_ENDPOINT: httpUrlText(),
  S3_BUCKET: optionalText(),
  S3_REGION: optionalText(),
  AWS_ACCESS_KEY_ID: secretText(),
  AWS_SECRET_ACCESS_KEY: secretText(),
  AWS_SESSION_TOKEN: secretText(),
  DATA_DIR: optionalText(),
  PUBLIC_DOCS: z.preprocess(
    (value) => (value === undefined || (typeof value === 'string' && value.trim() === '') ? 'true' : value),
    booleanText,
  ),
  // Turns a minute per session and per token (functions/rate-limit.ts; unset: no limit).
  RATE_LIMIT_TURNS_PER_MINUTE_PER_SESSION: z.preprocess(numberText, wholeNumber().positive().optional()),
  RATE_LIMIT_TURNS_PER_MINUTE_PER_TOKEN: z.preprocess(numberText, wholeNumber().positive().optional()),
  // GET /metrics with this bearer token besides an admin one (Node and Deno).
  METRICS_TOKEN: secretText(),
  // The per-turn log line carries the turn's input and output (off: no content is logged).
  LOG_CONTENT: booleanText,
  // OpenTelemetry traces of every turn (functions/tracing.ts): off unless the endpoint is set.
  OTEL_EXPORTER_OTLP_ENDPOINT: httpUrlText(),
  OTEL_EXPORTER_OTLP_HEADERS: headerListText(),
  OTEL_SERVICE_NAME: optionalText(),
  // Signed turn events (lib/webhooks/): where they go by default, the Standard Webhooks secret,
  // and whether http and private addresses are taken (docs/SECURITY.md, "Webhooks").
  WEBHOOK_URL: optionalText(),
  WEBHOOK_SECRET: webhookSecretText(),
  WEBHOOK_ALLOW_PRIVATE: booleanText,
  // The origins browser pages may call the API from (functions/cors.ts; unset: no CORS).
  CORS_ORIGINS: corsOriginsText(),
  // JSON: the budget of sessions created without one (lib/ledger/usage.ts budgetSchema; `{}`: none).
  DEFAULT_SESSION_BUDGET: budgetText(),
});

/** Where turns' spans are exported with OTLP over HTTP (JSON), from the OTEL_* settings. */
export interface TracingConfig {
  /** OTEL_EXPORTER_OTLP_ENDPOINT with `v1/traces` appended, as the OpenTelemetry spec says. */
  url: string;
  headers: Record<string, string>;
  /** OTEL_SERVICE_NAME, default `tailgate`. */
  serviceName: string;
}

export interface ServiceConfig {
  apiToken: string | undefined;
  /**
   * The HS256 key that signs and verifies scoped tokens (functions/tokens.ts): at least 32
   * random bytes in base64. Without it no token is minted or accepted but API_TOKEN.
   */
  tokenSigningKey: string | undefined;
  /** The key of a rotation's previous generation: verifies tokens, never signs. */
  tokenSigningKeyPrevious: string | undefined;
  allowAnonymous: boolean;
  keyPrefix: string;
  defaultModel: string;
  maxBodyBytes: number;
  /** Bytes of request bodies held at once per process or isolate (503 `overloaded` above). */
  maxBufferedBodyBytes: number;
  maxItemBytes: number;
  maxNoticeBytes: number;
  maxNoticesPerTurn: number;
  maxPendingNotices: number;
  /** Largest session `metadata`, as JSON bytes (413 above). */
  maxMetadataBytes: number;
  /** Largest session `instructions`, as UTF-8 bytes (413 above). */
  maxInstructionsBytes: number;
  turnLeaseMs: number;
  blobThresholdBytes: number;
  /** The largest image (MAX_IMAGE_BYTES) and file (MAX_FILE_BYTES) payload taken, decoded. */
  maxImageBytes: number;
  maxFileBytes: number;
  /**
   * SESSION_TTL_DAYS: idle days after which the retention sweep deletes a session, unless its
   * `expires_after_days` says otherwise (null: never).
   */
  sessionTtlDays: number | null;
  /**
   * DEFAULT_SESSION_BUDGET: the `budget` of a session created or imported without one of its
   * own (null: none; a fork keeps its parent's).
   */
  defaultSessionBudget: Budget | null;
  /** Bytes of parsed views kept per store (0: none). */
  viewCacheBytes: number;
  /** Bytes of parsed records kept per store (0: none). */
  recordCacheBytes: number;
  modelTimeoutMs: number;
  modelMaxRetries: number;
  /** The model that writes compaction summaries (default: the turn's model). */
  summaryModel: string | undefined;
  /** The summary model's instructions (default: lib/compaction DEFAULT_SUMMARY_PROMPT). */
  summaryPrompt: string | undefined;
  /** Model names the OpenAI-compatible API maps to tailgate model ids (MODEL_ALIASES). */
  modelAliases: Record<string, string>;
  /** USD per million tokens by model id (lib/ledger/prices.ts defaults, MODEL_PRICES over them). */
  modelPrices: ModelPrices;
  s3: {
    endpoint?: string | undefined;
    bucket?: string | undefined;
    region: string;
    accessKeyId?: string | undefined;
    secretAccessKey?: string | undefined;
    /** Temporary credentials' third part (an assumed role, a Lambda or ECS task). */
    sessionToken?: string | undefined;
  };
  /** The file store's directory on Node and Deno when no S3 is set (relative to the working directory). */
  dataDir: string;
  /** /docs and /openapi.json without a token (the API routes stay authenticated). */
  publicDocs: boolean;
  /** Turns a minute per session and per token (null: no limit; functions/rate-limit.ts). */
  turnsPerMinute: { session: number | null; token: number | null };
  metricsToken: string | undefined;
  logContent: boolean;
  /** OpenTelemetry traces (null: off, OTEL_EXPORTER_OTLP_ENDPOINT unset). */
  tracing: TracingConfig | null;
  /** Webhooks (lib/webhooks/): null when WEBHOOK_SECRET is unset (no event is sent). */
  webhooks: { url: string | undefined; secret: string; allowPrivate: boolean } | null;
  /** CORS_ORIGINS: `*`, the origins allowed, or null (off: no CORS header, preflights 404). */
  corsOrigins: '*' | string[] | null;
}

/** Every variable the service reads, for documentation (docs/CONFIGURATION.md). */
export const SERVICE_ENV_NAMES = Object.keys(serviceEnvSchema.shape);

/**
 * Parses the service settings from a plain env object (non-string values such as bindings are
 * ignored). Throws NotConfiguredError naming every invalid variable (`details.variables` if several).
 *
 * @example parseServiceConfig({ API_TOKEN: 'secret', KEY_PREFIX: 'prod/' }).maxBodyBytes // 4194304
 */
export function parseServiceConfig(env: Record<string, unknown>): ServiceConfig {
  const plain: Record<string, unknown> = {};
  for (const name of SERVICE_ENV_NAMES) {
    const value = env[name];
    if (typeof value === 'string' || typeof value === 'boolean' || typeof value === 'number') plain[name] = value;
  }
  const parsed = serviceEnvSchema.safeParse(plain);
  // Every invalid setting is named at once, not one per attempt.
  const problems: NotConfiguredError[] = [];
  const collect = <T>(work: () => T): T | undefined => {
    try {
      return work();
    } catch (error) {
      if (!(error instanceof NotConfiguredError)) throw error;
      problems.push(error);
      return undefined;
    }
  };
  const seen = new Set<string>();
  for (const issue of parsed.error?.issues ?? []) {
    const name = String(issue.path[0] ?? 'environment');
    if (seen.has(name)) continue;
    seen.add(name);
    problems.push(new NotConfiguredError(`invalid setting ${name}: ${issue.message}`, { variable: name }));
  }
  if (parsed.data?.TOKEN_SIGNING_KEY_PREVIOUS !== undefined && parsed.data.TOKEN_SIGNING_KEY === undefined) {
    problems.push(
      new NotConfiguredError(
        'invalid setting TOKEN_SIGNING_KEY_PREVIOUS: it only verifies tokens during a key rotation; ' +
          'set TOKEN_SIGNING_KEY too',
        { variable: 'TOKEN_SIGNING_KEY_PREVIOUS' },
      ),
    );
  }
  problems.push(...strategySettingProblems(stringEnv(env)));
  // Read from the raw text too, so that they are checked when another setting is invalid.
  const text = (name: string) => (typeof plain[name] === 'string' ? (plain[name] as string) : undefined);
  const modelAliases = collect(() => parseModelAliases(parsed.data?.MODEL_ALIASES ?? text('MODEL_ALIASES')));
  const modelPrices = collect(() => parseModelPrices(parsed.data?.MODEL_PRICES ?? text('MODEL_PRICES')));
  collect(() => checkWebhookSettings(parsed.data?.WEBHOOK_URL ?? text('WEBHOOK_URL'), plain));
  if (problems.length === 1) throw problems[0]!;
  if (problems.length > 1) {
    const variables = problems.map((problem) => (problem.details as { variable: string }).variable);
    throw new NotConfiguredError(problems.map((problem) => problem.message).join('; '), {
      variable: variables[0],
      variables,
    });
  }
  const value = parsed.data!;
  return {
    apiToken: value.API_TOKEN,
    tokenSigningKey: value.TOKEN_SIGNING_KEY,
    tokenSigningKeyPrevious: value.TOKEN_SIGNING_KEY_PREVIOUS,
    allowAnonymous: value.ALLOW_ANONYMOUS,
    keyPrefix: value.KEY_PREFIX,
    defaultModel: value.DEFAULT_MODEL,
    maxBodyBytes: value.MAX_BODY_BYTES,
    maxBufferedBodyBytes: value.MAX_BUFFERED_BODY_BYTES,
    maxItemBytes: value.MAX_ITEM_BYTES,
    maxNoticeBytes: value.MAX_NOTICE_BYTES,
    maxNoticesPerTurn: value.MAX_NOTICES_PER_TURN,
    maxPendingNotices: value.MAX_PENDING_NOTICES,
    maxMetadataBytes: value.MAX_METADATA_BYTES,
    maxInstructionsBytes: value.MAX_INSTRUCTIONS_BYTES,
    turnLeaseMs: value.TURN_LEASE_MS,
    blobThresholdBytes: value.BLOB_THRESHOLD_BYTES,
    maxImageBytes: value.MAX_IMAGE_BYTES,
    maxFileBytes: value.MAX_FILE_BYTES,
    sessionTtlDays: value.SESSION_TTL_DAYS ?? null,
    defaultSessionBudget: value.DEFAULT_SESSION_BUDGET ?? null,
    viewCacheBytes: value.VIEW_CACHE_BYTES,
    recordCacheBytes: value.RECORD_CACHE_BYTES,
    modelTimeoutMs: value.MODEL_TIMEOUT_MS,
    modelMaxRetries: value.MODEL_MAX_RETRIES,
    summaryModel: value.SUMMARY_MODEL,
    summaryPrompt: value.SUMMARY_PROMPT,
    modelAliases: modelAliases!,
    modelPrices: modelPrices!,
    s3: {
      endpoint: value.S3_ENDPOINT,
      bucket: value.S3_BUCKET,
      region: value.S3_REGION ?? DEFAULTS.s3Region,
      accessKeyId: value.AWS_ACCESS_KEY_ID,
      secretAccessKey: value.AWS_SECRET_ACCESS_KEY,
      sessionToken: value.AWS_SESSION_TOKEN,
    },
    dataDir: value.DATA_DIR ?? DEFAULTS.dataDir,
    publicDocs: value.PUBLIC_DOCS,
    turnsPerMinute: {
      session: value.RATE_LIMIT_TURNS_PER_MINUTE_PER_SESSION ?? null,
      token: value.RATE_LIMIT_TURNS_PER_MINUTE_PER_TOKEN ?? null,
    },
    metricsToken: value.METRICS_TOKEN,
    logContent: value.LOG_CONTENT,
    tracing:
      value.OTEL_EXPORTER_OTLP_ENDPOINT === undefined
        ? null
        : {
            url: `${value.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/?$/, '/')}v1/traces`,
            headers: value.OTEL_EXPORTER_OTLP_HEADERS,
            serviceName: value.OTEL_SERVICE_NAME ?? 'tailgate',
          },
    webhooks: value.WEBHOOK_SECRET
      ? { url: value.WEBHOOK_URL, secret: value.WEBHOOK_SECRET, allowPrivate: value.WEBHOOK_ALLOW_PRIVATE }
      : null,
    corsOrigins: value.CORS_ORIGINS,
  };
}

/** WEBHOOK_URL must be a URL webhooks may go to, and needs WEBHOOK_SECRET to sign them. */
function checkWebhookSettings(url: string | undefined, plain: Record<string, unknown>): void {
  if (url === undefined) return;
  const allowPrivate = booleanText.safeParse(plain.WEBHOOK_ALLOW_PRIVATE).data ?? false;
  const problem = webhookUrlProblem(url, allowPrivate);
  if (problem !== null)
    throw new NotConfiguredError(`invalid setting WEBHOOK_URL: ${problem}`, { variable: 'WEBHOOK_URL' });
  if (typeof plain.WEBHOOK_SECRET !== 'string' || plain.WEBHOOK_SECRET.trim() === '')
    throw new NotConfiguredError('invalid setting WEBHOOK_SECRET: WEBHOOK_URL is set, and its events must be signed', {
      variable: 'WEBHOOK_SECRET',
    });
}

/**
 * The plain string variables of an env object (bindings dropped), as lib/strategies and
 * lib/models take them.
 */
export function stringEnv(env: Record<string, unknown>): Record<string, string | undefined> {
  const strings: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(env)) if (typeof value === 'string') strings[name] = value;
  return strings;
}
