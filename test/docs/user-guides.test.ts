import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
const read = (path: string) => readFileSync(join(root, path), 'utf8');

/** The text of a markdown section, from its heading to the next heading of its level or above. */
function section(path: string, heading: string): string {
  const text = read(path);
  const start = text.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`${path} has no "${heading}"`);
  const level = heading.split(' ')[0]!;
  const rest = text.slice(start + heading.length + 2);
  const end = rest.search(new RegExp(`^#{1,${level.length}} `, 'm'));
  return end < 0 ? rest : rest.slice(0, end);
}

describe("the inspector's documentation", () => {
  it('gives the direct link to a session, in the form its router reads', () => {
    const inspector = section('docs/DEVELOPING.md', '## Inspector (`/ui`)');
    expect(inspector).toContain('/ui#/s/<session id>');
    // The router (functions/ui/client/session.ts, currentSession) reads the session id from that hash.
    const pattern = /const match = \/(.+)\/\.exec\(location\.hash\)/.exec(read('functions/ui/client/session.ts'));
    expect(pattern).not.toBeNull();
    const match = new RegExp(pattern![1]!).exec(`#/s/${encodeURIComponent('my session')}`);
    expect(match && decodeURIComponent(match[1]!)).toBe('my session');
  });
});

describe('the guides to a model of your own', () => {
  // resolve-model.ts reads these: `openai-compatible:<model>` at OPENAI_COMPATIBLE_BASE_URL,
  // `openai:<model>` at OPENAI_BASE_URL.
  const resolver = read('lib/models/resolve-model.ts');
  it.each([
    ['README.md', '(docs/CONFIGURATION.md#configuration)'],
    ['docs/OPENAI.md', '(CONFIGURATION.md#configuration)'],
  ])('%s says how to point tailgate at a local or self-hosted OpenAI-style provider', (path, link) => {
    const text = read(path);
    for (const variable of ['OPENAI_COMPATIBLE_BASE_URL', 'OPENAI_BASE_URL']) {
      expect(resolver).toContain(`'${variable}'`);
      expect(text).toContain(`\`${variable}`);
    }
    expect(text).toContain('openai-compatible:');
    expect(text).toMatch(/local or self-hosted/);
    expect(text).toContain(link);
    expect(read('docs/CONFIGURATION.md')).toMatch(/^## Configuration$/m);
  });
});
