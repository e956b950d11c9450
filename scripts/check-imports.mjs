#!/usr/bin/env node
// `npm run lint` runs this after Biome: the relative imports of lib/ and functions/ (static,
// dynamic, type-only and re-exports) form no cycle, follow the layers transitively (a file may
// not reach, through any chain of imports, a folder its layer must not depend on), and enter
// lib/inbox/ only through its index.ts. Prints each cycle and each breach with the chain that
// shows it, and exits 1.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/** `from`: files under this folder; `never`: folders they must not reach, directly or not. */
export const LAYERS = [
  { from: 'lib/', never: ['functions/'] },
  { from: 'lib/session/', never: ['lib/strategies/'] },
  { from: 'lib/strategies/', never: ['lib/session/', 'lib/turn/', 'lib/store/', 'lib/openai/'] },
];

/** Folders whose files outside them import only the entry (`lib/inbox/index.ts`, say), directly. */
export const ENTRIES = [{ folder: 'lib/inbox/', entry: 'lib/inbox/index.ts' }];

/** Every module specifier a file imports or re-exports (static, dynamic and type-only). */
export function specifiers(text) {
  const found = [];
  for (const match of text.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*)['"]([^'"]+)['"]/g)) found.push(match[1]);
  return found;
}

function sourceFiles(root, dir) {
  if (!existsSync(join(root, dir))) return [];
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return sourceFiles(root, path);
    return /\.(ts|mts|mjs|js)$/.test(entry.name) && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

/** The repository-relative file a relative specifier names, or undefined when it is not a file. */
function resolve(root, file, specifier) {
  const target = relative(root, join(root, dirname(file), specifier))
    .split(sep)
    .join('/');
  for (const candidate of [target, target.replace(/\.js$/, '.ts'), `${target}.ts`, `${target}/index.ts`]) {
    const path = join(root, candidate);
    if (existsSync(path) && statSync(path).isFile()) return candidate;
  }
  return undefined;
}

/** file -> the files it imports (relative imports only, within the scanned folders). */
export function importGraph(root, folders = ['lib', 'functions']) {
  const graph = new Map();
  for (const file of folders.flatMap((folder) => sourceFiles(root, folder))) {
    const targets = new Set();
    for (const specifier of specifiers(readFileSync(join(root, file), 'utf8'))) {
      if (!specifier.startsWith('.')) continue;
      const target = resolve(root, file, specifier);
      if (target !== undefined) targets.add(target);
    }
    graph.set(file, [...targets].sort());
  }
  return graph;
}

/** The strongly connected components with more than one file (or a file importing itself), Tarjan's. */
export function cycles(graph) {
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const found = [];
  let next = 0;
  const visit = (file) => {
    index.set(file, next);
    low.set(file, next);
    next++;
    stack.push(file);
    onStack.add(file);
    for (const target of graph.get(file) ?? []) {
      if (!graph.has(target)) continue;
      if (!index.has(target)) {
        visit(target);
        low.set(file, Math.min(low.get(file), low.get(target)));
      } else if (onStack.has(target)) low.set(file, Math.min(low.get(file), index.get(target)));
    }
    if (low.get(file) !== index.get(file)) return;
    const component = [];
    let member;
    do {
      member = stack.pop();
      onStack.delete(member);
      component.push(member);
    } while (member !== file);
    if (component.length > 1 || (graph.get(file) ?? []).includes(file)) found.push(component.sort());
  };
  for (const file of [...graph.keys()].sort()) if (!index.has(file)) visit(file);
  return found.sort((a, b) => a[0].localeCompare(b[0]));
}

/** The shortest import chain from `file` to a file under `folder`, or undefined. */
function chainTo(graph, file, folder) {
  const previous = new Map([[file, undefined]]);
  const queue = [file];
  while (queue.length > 0) {
    const current = queue.shift();
    if (current !== file && current.startsWith(folder)) {
      const chain = [];
      for (let at = current; at !== undefined; at = previous.get(at)) chain.unshift(at);
      return chain;
    }
    for (const target of graph.get(current) ?? []) {
      if (previous.has(target)) continue;
      previous.set(target, current);
      queue.push(target);
    }
  }
  return undefined;
}

/** Each layering breach as the chain of imports that makes it. */
export function breaches(graph, layers = LAYERS) {
  const found = [];
  for (const file of [...graph.keys()].sort()) {
    for (const layer of layers) {
      if (!file.startsWith(layer.from)) continue;
      for (const folder of layer.never) {
        if (file.startsWith(folder)) continue;
        const chain = chainTo(graph, file, folder);
        if (chain !== undefined) found.push(chain);
      }
    }
  }
  return found;
}

/** Each import of a folder's file, from outside it, that is not its entry: [importer, imported]. */
export function bypasses(graph, entries = ENTRIES) {
  const found = [];
  for (const [file, targets] of [...graph].sort(([a], [b]) => a.localeCompare(b))) {
    for (const { folder, entry } of entries) {
      if (file.startsWith(folder)) continue;
      for (const target of targets) if (target.startsWith(folder) && target !== entry) found.push([file, target]);
    }
  }
  return found;
}

/** The problems of the tree at `root`, one line each; empty when it follows the rules. */
export function checkImports(root) {
  const graph = importGraph(root);
  return [
    ...cycles(graph).map((component) => `import cycle: ${component.join(', ')}`),
    ...breaches(graph).map((chain) => `layering: ${chain.join(' -> ')}`),
    ...bypasses(graph).map(([file, target]) => `not through its entry: ${file} -> ${target}`),
  ];
}

// `node scripts/check-imports.mjs [root]`: the repository this script is in, or `root`.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const problems = checkImports(process.argv[2] ?? fileURLToPath(new URL('..', import.meta.url)));
  for (const problem of problems) console.error(problem);
  if (problems.length > 0) {
    console.error(`${problems.length} import problem${problems.length === 1 ? '' : 's'}`);
    process.exit(1);
  }
}
