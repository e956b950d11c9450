import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { MAX_TURN_DELIVERIES } from '../../lib/turn/index.ts';
import { MAX_ATTEMPTS } from '../../lib/webhooks/deliver.ts';

// wrangler.toml's queues against what docs/DEPLOY.md tells a deployer to create (a deploy whose
// bound queues do not exist fails), and their consumers' retries against what the code counts on.

const root = fileURLToPath(new URL('../..', import.meta.url));
const read = (path: string) => readFileSync(join(root, path), 'utf8');
const toml = read('wrangler.toml');
/** wrangler.toml without its comments. */
const settings = toml
  .split('\n')
  .filter((line) => !line.trimStart().startsWith('#'))
  .join('\n');
const topLevel = settings.slice(0, settings.indexOf('[env.'));
const local = settings.slice(settings.indexOf('[env.local]'));

/** The queues a part of wrangler.toml names: produced to, consumed, or dead letters. */
const queuesOf = (part: string) =>
  new Set([...part.matchAll(/\b(?:queue|dead_letter_queue)\s*=\s*"([^"]+)"/g)].map((m) => m[1]!));

/** Each consumer's settings in a part of wrangler.toml (a [[queues.consumers]] table or an inline one). */
function consumers(part: string): Map<string, Record<string, string>> {
  const found = new Map<string, Record<string, string>>();
  const tables = [
    ...part
      .split('[[queues.consumers]]')
      .slice(1)
      .map((table) => table.split('\n[')[0]!),
    ...[...part.matchAll(/consumers\s*=\s*\[(.*?)\]\s*\}/g)].flatMap((m) => m[1]!.split('}')),
  ];
  for (const table of tables) {
    const fields = Object.fromEntries([...table.matchAll(/(\w+)\s*=\s*("[^"]*"|\d+)/g)].map((m) => [m[1]!, m[2]!]));
    if (fields.queue) found.set(JSON.parse(fields.queue) as string, fields);
  }
  return found;
}

describe('wrangler.toml and docs/DEPLOY.md', () => {
  it('creates, in the deploy steps, every queue wrangler.toml binds, and no other', () => {
    const created = [...read('docs/DEPLOY.md').matchAll(/npx wrangler queues create ([\w-]+)/g)].map((m) => m[1]!);
    expect(new Set(created)).toEqual(queuesOf(topLevel));
    expect(queuesOf(topLevel)).toEqual(new Set(['tailgate-turns', 'tailgate-webhooks', 'tailgate-webhooks-dead']));
  });

  it("gives `npm start`'s [env.local] the consumers of the top level, settings and all", () => {
    expect(consumers(topLevel).size).toBe(2);
    expect(consumers(local)).toEqual(consumers(topLevel));
  });

  it('retries each message as many times as the code counts on', () => {
    const [turns, webhooks] = [
      consumers(topLevel).get('tailgate-turns')!,
      consumers(topLevel).get('tailgate-webhooks')!,
    ];
    // A background turn's last delivery is given up (functions/worker.ts), so no delivery comes after it.
    expect(Number(turns.max_retries) + 1).toBe(MAX_TURN_DELIVERIES);
    // A webhook event's last attempt is logged as given up, and its message goes to the dead letter queue.
    expect(Number(webhooks.max_retries) + 1).toBe(MAX_ATTEMPTS);
    expect(webhooks.dead_letter_queue).toBe('"tailgate-webhooks-dead"');
    expect(read('docs/DEPLOY.md')).toContain(`given up after ${MAX_ATTEMPTS} attempts`);
  });
});

describe("docs/DEPLOY.md's deploy steps", () => {
  it('write the static assets the Worker reads (the inspector page, the OpenAPI document) before deploying', () => {
    // wrangler deploy uploads .assets/ as it is: a checkout updated since its `npm install` holds
    // none of the files added since (functions/ui/inspector-assets.ts answers their routes 500),
    // and an OpenAPI document of the code before (functions/openapi-asset.ts would serve it). So
    // wrangler runs `npm run assets` itself before it bundles, deploy and dev alike ([build],
    // which [env.local] inherits), and again in dev when the code changes.
    const build = topLevel.slice(topLevel.indexOf('\n[build]\n')).split('\n[')[1]!;
    expect(build).toMatch(/^build]\ncommand = "node scripts\/assets\.mjs"\n/);
    expect(build).toContain('watch_dir = ["functions", "lib"]');
    expect(JSON.parse(read('package.json')).scripts.assets).toBe('node scripts/assets.mjs');
    const steps = read('docs/DEPLOY.md').split('```sh\n')[1]!.split('```')[0]!.split('\n');
    expect(steps.filter((line) => /^npx wrangler deploy\b/.test(line))).toEqual([
      expect.stringMatching(/# runs `npm run assets` first/),
    ]);
  });
});
