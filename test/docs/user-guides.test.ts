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
