import { SECTIONS } from './sections.ts';

/** What `npm run bench -- --help` prints: the options of bench/run.ts. */
export const USAGE = `Usage: npm run bench -- [options]

Every benchmark of the project in one run, written to bench/RESULTS.md and bench/prompt-cache.svg
(the cache section, unless --quick, also writes bench/epoch-sweep.svg). Options:
  --only=<sections>                run some of (comma-separated):
${wrapped(SECTIONS.join(', '), ' '.repeat(35), 100)};
                                   prints the markdown and leaves RESULTS.md alone
  --quick                          small sizes, to try the harness (no files); exits 1 when a section
                                   that ran has no sound figures (bench/quick-check.ts; CI runs it)
  --append-items=<n>               items the append-load section loads per store
                                   (default 100,000; 1,000,000 is the target size)
  --append-stores=<stores>         the stores the append-load section loads (comma-separated, of
                                   memory, file, s3; default all three)
  --cold-sizes=<n,...>             sizes of the cold-turn section (default 100,10000,100000;
                                   1000000 loads for many minutes)
  --window-items=<n,...>           session sizes of the realistic-window section
                                   (default 100,100000,1000000)
  --workerd-log=<level>            wrangler's log level for the worker (default error)
  --workerd-load-budget=<seconds>  time allowed for loading workerd's history (default 240; a size
                                   that would not load in time is reported with its projected load time)
  --help, -h                       print this and exit
`;

/** `text` in lines of at most `width` characters, each starting with `indent`, broken at spaces. */
function wrapped(text: string, indent: string, width: number): string {
  const lines: string[] = [];
  let line = indent;
  for (const word of text.split(' ')) {
    if (line !== indent && line.length + 1 + word.length > width) {
      lines.push(line);
      line = indent;
    }
    line += line === indent ? word : ` ${word}`;
  }
  return [...lines, line].join('\n');
}

/** The options of bench/run.ts that take a value (`--name=value`), and those that take none. */
const VALUED = [
  'only',
  'append-items',
  'append-stores',
  'cold-sizes',
  'window-items',
  'workerd-log',
  'workerd-load-budget',
];
const FLAGS = ['quick'];
/** The stores `--append-stores` may name (bench/append-load.ts `LoadStore`). */
const APPEND_STORES = ['memory', 'file', 's3'];

/**
 * Whether bench/run.ts should stop before running anything, given its arguments: with `--help`
 * (or `-h`), the usage and exit code 0; with an argument it does not know (an unknown option, a
 * flag given a value, an option missing its value, an unknown section in `--only`), what is
 * wrong, the usage, and exit code 2. Undefined when the run should go ahead.
 */
export function benchArgumentsExit(argv: readonly string[]): { code: 0 | 2; text: string } | undefined {
  if (argv.includes('--help') || argv.includes('-h')) return { code: 0, text: USAGE };
  for (const argument of argv) {
    const problem = argumentProblem(argument);
    if (problem) return { code: 2, text: `bench: ${problem}\n\n${USAGE}` };
  }
  return undefined;
}

function argumentProblem(argument: string): string | undefined {
  const match = /^--([a-z-]+)(?:=(.*))?$/s.exec(argument);
  const name = match?.[1];
  const value = match?.[2];
  if (name === undefined) return `unknown argument ${argument}`;
  if (FLAGS.includes(name)) return value === undefined ? undefined : `--${name} takes no value`;
  if (!VALUED.includes(name)) return `unknown option --${name}`;
  if (!value) return `--${name} needs a value (--${name}=...)`;
  if (name === 'append-stores') {
    const unknownStores = value.split(',').filter((store) => !APPEND_STORES.includes(store));
    return unknownStores.length > 0
      ? `unknown store ${unknownStores.join(', ')}; known: ${APPEND_STORES.join(', ')}`
      : undefined;
  }
  if (name !== 'only') return undefined;
  const unknown = value.split(',').filter((section) => !(SECTIONS as readonly string[]).includes(section));
  return unknown.length > 0 ? `unknown section ${unknown.join(', ')}; known: ${SECTIONS.join(', ')}` : undefined;
}
