import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
const read = (path: string) => readFileSync(join(root, path), 'utf8');
const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;

// Deno runs V8 and allocates through glibc's malloc as Node does, so the heap cap and the mmap
// threshold of `npm run start:node` (docs/DEPLOY.md, "Running on Node or Deno") hold for it too;
// Deno takes V8's flags through --v8-flags (or DENO_V8_FLAGS), not NODE_OPTIONS.
it('starts Deno with the memory settings Node starts with', () => {
  const heap = /--max-old-space-size=(\d+)/.exec(scripts['start:node']!)?.[1];
  const threshold = /\bMALLOC_MMAP_THRESHOLD_=(\d+)/.exec(scripts['start:node']!)?.[1];
  expect(heap).toBeDefined();
  expect(threshold).toBeDefined();
  const deno = scripts['start:deno']!;
  expect(deno).toMatch(new RegExp(`^MALLOC_MMAP_THRESHOLD_=${threshold} exec deno run `));
  expect(deno).toContain(` --v8-flags=--max-old-space-size=${heap} `);
  // DEPLOY.md shows the command the script runs (its --allow-anonymous told of apart), and how
  // to give Deno the settings by hand.
  const deploy = read('docs/DEPLOY.md');
  expect(deploy).toContain(
    `npm run start:deno    # Deno: ${deno.replace(/^.*?exec /, '').replace(/ --allow-anonymous$/, '')}\n`,
  );
  expect(deploy).toContain(`DENO_V8_FLAGS=--max-old-space-size=${heap}`);
});
