import { readdirSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { cloudflareTest } from '@cloudflare/vitest-plugin';
import { defineConfig } from 'vitest/config';
import { refuseDevVars } from './test/support/dev-vars.ts';

// The Worker under test gets no developer's variables (test/support/dev-vars.ts): no `.env`
// file is read for it, and a `.dev.vars` stops the run.
process.env.CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV = 'false';
refuseDevVars(import.meta.dirname);

// Four projects:
// - `unit` (`npm run test:unit`): lib/ on the memory store, models against in-process fake
//   servers on loopback; no global setup, no S3, no workerd, no child processes.
// - `node`: everything else outside test/workers (the HTTP app, S3 on fauxqs, the file store
//   across processes, Node/Deno servers, /ui in Chromium); its global setup starts fauxqs.
// - `workers`: inside workerd with a local R2 bucket from wrangler.toml.
// A test that needs fauxqs has `s3` as a word in its name (`s3-store`, `inbox-s3`) or lives in a
// node-only folder; one that goes through functions/app.ts is named `*-http.test.ts` or lives in test/http;
// the file store's own tests and its protocol simulation are node-project files too.
const UNIT_FOLDERS = [
  'compaction',
  'config',
  'docs',
  'inbox',
  'models',
  'session',
  'store',
  'strategies',
  'tokens',
  'turn',
  'webhooks',
];
const NOT_UNIT =
  /\bs3\b|-http\.test\.ts$|^test\/store\/file-store\.test\.ts$|^test\/session\/[a-z-]+-files?\.test\.ts$/;
const unitFiles = [
  'test/hash.test.ts',
  'test/prompt-shape.test.ts',
  ...UNIT_FOLDERS.flatMap((folder) =>
    readdirSync(`test/${folder}`, { recursive: true, encoding: 'utf8' }).map((name) => `test/${folder}/${name}`),
  ),
].filter((file) => file.endsWith('.test.ts') && !NOT_UNIT.test(file));

/** Node-project files that run with modules of their own (the `node-own-modules` project). */
const ownModuleFiles = ['test/http/http.test.ts'];

// wrangler/miniflare and Node's SQLite print an ExperimentalWarning in every process that
// loads them; child processes inherit NODE_OPTIONS from here.
if (!process.env.NODE_OPTIONS?.includes('--disable-warning=ExperimentalWarning'))
  process.env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ''} --disable-warning=ExperimentalWarning`.trim();

export default defineConfig({
  test: {
    // One worker more than the cores (vitest's default is one fewer): many files mostly wait (on
    // servers, Chromium, a lease, a shutdown's grace period), and the extra worker fills that time.
    // On 2 cores, 3 workers ran the suite in 168 s against 205 s with 2, taking no more CPU.
    maxWorkers: availableParallelism() + 1,
    projects: [
      {
        test: {
          name: 'unit',
          include: unitFiles,
          setupFiles: ['test/support/equality.ts'],
          // Files in one worker share their modules instead of loading lib/ again for each file (most
          // of the project's CPU time); no unit test mocks a module, and each restores the timers,
          // the environment and the OpenTelemetry globals it changes.
          isolate: false,
          testTimeout: 30_000,
          expect: { poll: { timeout: 15_000 } },
        },
      },
      {
        test: {
          name: 'node',
          include: ['test/**/*.test.ts'],
          exclude: ['test/workers/**', 'test/bundle/**', ...unitFiles, ...ownModuleFiles],
          globalSetup: ['test/support/global-setup.ts'],
          setupFiles: ['test/support/equality.ts', 'test/support/held-bodies.ts'],
          // As in `unit`: the files a worker runs share functions/app.ts and lib/ instead of loading
          // them again for each file (most of these files' CPU time). Each file closes the servers,
          // stores and fake timers it opens and stops the background loops it starts (the
          // @openai/agents trace exporter: test/openai/agents-tracing.ts), and ends with no request
          // body held by the app (test/support/held-bodies.ts); none mocks a module.
          isolate: false,
          testTimeout: 30_000,
          hookTimeout: 60_000,
          // expect.poll waits 1 s by default: a page in Chromium or a background write on a
          // loaded 2-core machine can take longer (the test's own timeout still bounds it).
          expect: { poll: { timeout: 15_000 } },
        },
      },
      {
        test: {
          name: 'node-own-modules',
          // A file whose assertions read module state of the whole process (functions/body-budget.ts
          // counts the request bodies held): it loads its own modules, so a body another file's test
          // left unfinished in the same worker cannot count in it.
          include: ownModuleFiles,
          globalSetup: ['test/support/global-setup.ts'],
          setupFiles: ['test/support/equality.ts'],
          isolate: true,
          testTimeout: 30_000,
          hookTimeout: 60_000,
          expect: { poll: { timeout: 15_000 } },
        },
      },
      {
        plugins: [
          cloudflareTest({
            wrangler: { configPath: './wrangler.toml' },
            // TOKEN_SIGNING_KEY is test/http/http-suite.ts's SIGNING_KEY. TEST_TURN_LIMIT is a Rate
            // Limiting binding that test/http/rate-limit-suite.ts hands the worker as its limits.
            // WEBHOOK_SECRET is test/support/webhook-receiver.ts's, whose receiver is on loopback.
            miniflare: {
              ratelimits: { TEST_TURN_LIMIT: { namespace_id: '1001', simple: { limit: 3, period: 60 } } },
              bindings: {
                ALLOW_ANONYMOUS: 'false',
                API_TOKEN: 'test-token',
                TOKEN_SIGNING_KEY: 'aXgG7TWfirGzinwJdeHqr8xHQEH5yHGTO7JxU49qlyE=',
                WEBHOOK_SECRET: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw4tPCZfYjzBs=',
                WEBHOOK_ALLOW_PRIVATE: 'true',
              },
            },
          }),
        ],
        test: {
          name: 'workers',
          include: ['test/workers/**/*.test.ts'],
          globalSetup: ['test/support/workers-global-setup.ts'],
          setupFiles: ['test/support/equality.ts'],
          // As in `unit` and `node`: the files a worker runs share the Worker's modules inside workerd
          // (83 s of CPU isolated against 56 s shared, back to back); none mocks a module or changes
          // a global, and each uses ids of its own in the R2 bucket.
          isolate: false,
          testTimeout: 30_000,
        },
      },
      {
        // The Worker as `npm run build` bundled it into dist/ (`npm run test:bundle`, run by
        // .ci/run after the build; `npm test` leaves it out, as it builds nothing).
        test: {
          name: 'bundle',
          include: ['test/bundle/**/*.test.ts'],
          testTimeout: 30_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});
