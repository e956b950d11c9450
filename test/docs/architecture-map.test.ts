import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
const read = (path: string) => readFileSync(join(root, path), 'utf8');

/**
 * The repository paths a page names: words starting with one of the top folders, as far as
 * path characters go; placeholders (`<provider>`) and globs are not paths, a final `.` ends the
 * sentence. A path inside a URL or a key (`/docs/...`, `turn/<g>/`) is not one.
 */
function namedPaths(text: string): string[] {
  const paths = new Set<string>();
  for (const match of text.matchAll(/(?<![\w./<>-])(?:lib|functions|test|bench|scripts|docs)\/[\w./<>*-]*/g)) {
    const path = match[0].replace(/[.]+$/, '');
    if (!/[<>*]/.test(path)) paths.add(path);
  }
  return [...paths];
}

/** The symbols a page names as `` `Symbol` (file.ts) ``, with that file. */
function namedSymbols(text: string): Array<{ symbol: string; file: string }> {
  return [...text.matchAll(/`([A-Za-z_$][\w$]*)`\s+\(((?:lib|functions)\/[\w./-]+\.ts)\)/g)].map((match) => ({
    symbol: match[1]!,
    file: match[2]!,
  }));
}

/**
 * The elements of an XML document as a tree of names, or the first reason it is not well formed
 * (unbalanced or crossed tags, a stray `<` or `&`, more than one root). Enough for a hand-written SVG.
 */
function parseXml(xml: string): { root: string; names: string[] } | { error: string } {
  const body = xml.replace(/<!--[\s\S]*?-->/g, '').replace(/^<\?xml[^>]*\?>/, '');
  const stack: string[] = [];
  const names: string[] = [];
  let roots = 0;
  let at = 0;
  for (const match of body.matchAll(/<(\/?)([A-Za-z][\w:.-]*)((?:\s+[\w:.-]+="[^"<]*")*)\s*(\/?)>/g)) {
    const between = body.slice(at, match.index);
    if (/[<>]/.test(between)) return { error: `stray markup before ${match[0]}` };
    if (/&(?!(?:lt|gt|amp|quot|apos|#\d+);)/.test(between + match[3])) return { error: `bad entity near ${match[0]}` };
    at = match.index + match[0].length;
    const [, closing, name, , empty] = match;
    if (closing) {
      if (stack.pop() !== name) return { error: `</${name}> closes nothing open` };
      continue;
    }
    if (stack.length === 0) roots++;
    names.push(name!);
    if (!empty) stack.push(name!);
  }
  if (/[<>]/.test(body.slice(at)) || stack.length > 0) return { error: `unclosed ${stack.join(' > ')}` };
  if (roots !== 1) return { error: `${roots} root elements` };
  return { root: names[0]!, names };
}

function exports(source: string, symbol: string): boolean {
  const kind = '(?:function\\*?|const|let|class|abstract\\s+class|interface|type|enum)';
  const declared = new RegExp(`export\\s+(?:declare\\s+)?(?:async\\s+)?${kind}\\s+${symbol}\\b`);
  const listed = new RegExp(`export\\s+(?:type\\s+)?\\{[^}]*\\b${symbol}\\b[^}]*\\}`);
  return declared.test(source) || listed.test(source);
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
const anchorOf = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\w\- ]/g, '')
    .replace(/ /g, '-');

/** The relative Markdown links (`[text](target)`, images too) of `page` whose file or heading is not there. */
function brokenLinks(page: string, text: string): string[] {
  const broken: string[] = [];
  for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
    if (/^[a-z]+:/.test(target!)) continue;
    const [file, anchor] = target!.split('#') as [string, string | undefined];
    const path = file ? join(dirname(page), file) : page;
    if (!existsSync(join(root, path))) broken.push(target!);
    else if (anchor && ![...read(path).matchAll(/^#+ (.*)$/gm)].some((h) => anchorOf(h[1]!) === anchor))
      broken.push(target!);
  }
  return broken;
}

const missingPaths = (text: string) => namedPaths(text).filter((path) => !existsSync(join(root, path)));
const unexported = (text: string) =>
  namedSymbols(text)
    .filter(({ symbol, file }) => !existsSync(join(root, file)) || !exports(read(file), symbol))
    .map(({ symbol, file }) => `${symbol} (${file})`);

describe('the architecture map', () => {
  it.for(['docs/ARCHITECTURE.md', 'docs/DEVELOPING.md', 'docs/STORAGE.md'])(
    '%s names only paths that exist',
    (page) => {
      const paths = namedPaths(read(page));
      expect(paths.length).toBeGreaterThan(5);
      expect(missingPaths(read(page))).toEqual([]);
    },
  );

  it.for(['README.md', ...readdirSync(join(root, 'docs')).flatMap((f) => (f.endsWith('.md') ? [`docs/${f}`] : []))])(
    "%s links only to files and headings that exist (a link is relative to the page's folder)",
    (page) => {
      expect(brokenLinks(page, read(page))).toEqual([]);
    },
  );

  it('fails on a link to a missing file or heading', () => {
    const page = '![shot](../inspector.png) [api](API.md#conventions) [no](API.md#nothing) [x](https://e.com/y)';
    expect(brokenLinks('docs/DEVELOPING.md', page)).toEqual(['../inspector.png', 'API.md#nothing']);
  });

  it('names symbols as `Symbol` (file.ts), each exported by its file', () => {
    const map = read('docs/ARCHITECTURE.md');
    expect(namedSymbols(map).length).toBeGreaterThan(30);
    expect(unexported(map)).toEqual([]);
  });

  it('fails on a made-up path or symbol', () => {
    const page =
      'The pipeline is lib/turn/pipeline.ts, the teleporter lib/turn/teleport.ts; `runTurn` (lib/turn/pipeline.ts) ' +
      'and `flyTurn` (lib/turn/pipeline.ts), `runTurn` (lib/turn/teleport.ts). A key: turn/<g>/, a placeholder ' +
      'lib/models/<provider>-model.ts, a URL https://example.com/docs/nothing.md.';
    expect(missingPaths(page)).toEqual(['lib/turn/teleport.ts']);
    expect(unexported(page)).toEqual(['flyTurn (lib/turn/pipeline.ts)', 'runTurn (lib/turn/teleport.ts)']);
  });

  it('embeds the turn diagram, an SVG that parses and names the objects it shows', () => {
    expect(read('docs/ARCHITECTURE.md')).toContain('](turn-path.svg)');
    const svg = read('docs/turn-path.svg');
    expect(parseXml(svg)).toMatchObject({ root: 'svg' });
    expect(parseXml('<svg><g><text>a</g></text></svg>')).toHaveProperty('error');
    expect(parseXml('<svg><text>a & b</text></svg>')).toHaveProperty('error');
    const text = [...svg.matchAll(/<text[^>]*>([^<]*)<\/text>/g)].map((match) => match[1]).join('\n');
    for (const shown of [
      'session.json',
      'list inbox/',
      'get newest record',
      'get its .done',
      'get .view',
      'model call',
      'put record (the claim)',
      'put .done',
      'background packing',
      'turn/&lt;g&gt;/&lt;inv n&gt;.view',
      '.seg: a segment',
      'inbox_removed/',
    ])
      expect(text).toContain(shown);
  });
});
