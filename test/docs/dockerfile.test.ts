import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
const read = (path: string) => readFileSync(join(root, path), 'utf8');

/** The Dockerfile block of docs/DEPLOY.md, "Docker". */
function dockerfile(): string {
  const block = /### Docker\s+```dockerfile\n([\s\S]*?)```/.exec(read('docs/DEPLOY.md'));
  if (!block) throw new Error('docs/DEPLOY.md has no dockerfile block under "### Docker"');
  return block[1]!;
}

/** Whether one .dockerignore pattern (a path from the context's root, `*` within a name) excludes `path`. */
function excludes(pattern: string, path: string): boolean {
  const source = pattern
    .replace(/^\/+|\/+$/g, '')
    .replace(/[.+?^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '[^/]*');
  return new RegExp(`^${source}(/.*)?$`).test(path);
}

it("keeps a checkout's installs, local sessions and secrets out of the image of DEPLOY.md's Dockerfile", () => {
  // The block copies the whole build context over what `npm ci` installed in the image.
  expect(dockerfile()).toMatch(/^COPY \. \.$/m);
  expect(existsSync(join(root, '.dockerignore'))).toBe(true);
  const patterns = read('.dockerignore')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
  expect(patterns.filter((pattern) => pattern.startsWith('!'))).toEqual([]);
  // What the README's quick start leaves in a checkout: node_modules (another platform's
  // binaries would replace the image's), the built assets, the file store's and wrangler dev's
  // sessions, and the model keys of `.dev.vars`.
  const hostOnly = [
    'node_modules',
    'node_modules/.bin/tsx',
    '.assets/ui/app.js',
    '.tailgate/data/sessions/demo/meta',
    '.wrangler/state/v3/r2',
    '.dev.vars',
    '.dev.vars.local',
  ];
  for (const path of hostOnly) {
    expect(
      patterns.some((pattern) => excludes(pattern, path)),
      `${path} is not excluded`,
    ).toBe(true);
  }
  // What the image needs stays in the context.
  for (const path of ['package.json', 'functions/node.ts', 'lib/config.ts', 'scripts/assets.mjs']) {
    expect(
      patterns.some((pattern) => excludes(pattern, path)),
      `${path} is excluded`,
    ).toBe(false);
  }
});

it("builds the assets from what DEPLOY.md's Dockerfile copies before `RUN npm ci`, which builds them", () => {
  const lines = dockerfile().split('\n');
  const install = lines.findIndex((line) => /^RUN npm ci\b/.test(line));
  expect(install).toBeGreaterThan(0);
  const context = mkdtempSync(join(tmpdir(), 'tailgate-docker-'));
  try {
    for (const line of lines.slice(0, install)) {
      const copy = /^COPY (.+)$/.exec(line);
      if (!copy) continue;
      const [destination, ...sources] = copy[1]!.split(/\s+/).reverse();
      for (const source of sources) {
        // COPY's rules: a directory's contents go into the destination, a file into it when it ends in /.
        const target =
          destination!.endsWith('/') && !statSync(join(root, source)).isDirectory()
            ? join(context, destination!, basename(source))
            : join(context, destination!);
        cpSync(join(root, source), target, { recursive: true });
      }
    }
    // `npm ci` installs node_modules; the checkout's own stands in for it.
    symlinkSync(join(root, 'node_modules'), join(context, 'node_modules'));
    // What `npm ci` runs once it has installed: package.json's postinstall.
    const [program, ...args] = (
      JSON.parse(read('package.json')) as { scripts: { postinstall: string } }
    ).scripts.postinstall.split(' ');
    expect([program, args[0]]).toEqual(['node', 'scripts/assets.mjs']);
    execFileSync(process.execPath, args, { cwd: context, stdio: 'pipe' });
    expect(existsSync(join(context, '.assets/ui/app.js'))).toBe(true);
  } finally {
    rmSync(context, { recursive: true, force: true });
  }
});
