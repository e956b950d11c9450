const MIB = 1024 * 1024;

/**
 * The default of every setting that has one, and the only place each is written: the env
 * schema of lib/config.ts falls back to these, and lib/ modules built without a config (the
 * session log, the inbox, the model registry) take theirs from here. This file imports
 * nothing, so the session log reads its defaults without reaching the strategies.
 */
/** The providers a model id names (`<provider>:<model>`), and `echo`, a model id alone. */
export const MODEL_PROVIDERS = ['echo', 'openai', 'openai-compatible', 'anthropic', 'workers-ai'] as const;

export const DEFAULTS = {
  defaultModel: 'echo',
  maxBodyBytes: 4 * MIB,
  /** Request bodies one process (isolate) holds at once (functions/body-budget.ts). */
  maxBufferedBodyBytes: 64 * MIB,
  maxItemBytes: MIB,
  maxNoticeBytes: 256 * 1024,
  /** Notices one turn takes from the inbox at most; the rest wait for the next turns. */
  maxNoticesPerTurn: 32,
  /** Pending notices past which a post is refused (409 `inbox_full`). */
  maxPendingNotices: 1000,
  maxMetadataBytes: 64 * 1024,
  maxInstructionsBytes: 256 * 1024,
  turnLeaseMs: 30_000,
  blobThresholdBytes: 8 * 1024,
  maxImageBytes: 5 * MIB,
  maxFileBytes: 10 * MIB,
  /** Parsed views kept per store for the process's life (lib/session/log/view-cache.ts). */
  viewCacheBytes: 16 * MIB,
  /**
   * Records kept parsed per store for the process's life (lib/session/log/record-cache.ts), on
   * Node and Deno; a Worker takes `workerRecordCacheBytes` instead (functions/worker.ts).
   */
  recordCacheBytes: 32 * MIB,
  /** The same in a Worker isolate: 128 MB in all, shared with the view cache and the requests. */
  workerRecordCacheBytes: 4 * MIB,
  modelTimeoutMs: 120_000,
  modelMaxRetries: 1,
  openaiBaseUrl: 'https://api.openai.com/v1',
  s3Region: 'auto',
  /** Where the Node and Deno servers keep sessions when no S3 store is configured. */
  dataDir: '.tailgate/data',
} as const;
