import type { ZodError } from 'zod';

/**
 * The one issue a refusal of a zod schema answers, and its words, for a request's body, query or
 * path (functions/error-handler.ts validationError) and an import's line
 * (lib/session/export-format.ts parseExportLine) alike (docs/API.md, "Conventions").
 */

/** The issue answered: its path (an unknown field's key last), its message, and every issue so read. */
export interface AnsweredIssue {
  path: PropertyKey[];
  message: string;
  /** The path ends in a field the object does not take (answered `unknown field`). */
  unknownField: boolean;
  issues: Issue[];
}

/**
 * The issue a refusal names, `undefined` when zod gave none; `value` is what was validated (an
 * enum's refusal reads `required` where it lacks the field). `issues` holds each issue as the
 * message reads it: a union's as its most relevant branch's, not every branch's.
 */
export function answeredIssue(error: ZodError, value?: unknown): AnsweredIssue | undefined {
  const issues = error.issues.map((issue) => requiredIssue(innermostIssue(issue), value));
  const issue = relevantIssue(issues);
  if (!issue) return undefined;
  if (issue.code === 'unrecognized_keys')
    return { path: [...issue.path, issue.keys[0] ?? ''], message: 'unknown field', unknownField: true, issues };
  return { path: [...issue.path], message: issue.message, unknownField: false, issues };
}

type Issue = ZodError['issues'][number];

/**
 * A field the request lacks reads `required`, not zod's `Invalid input: expected string,
 * received undefined`: a JSON body, query or path holds no undefined value, so a type refused
 * for receiving one (alone, or by every branch of a union) is a field not sent. An enum or a
 * literal refused (`Invalid option`) reads `required` when `value`, what was validated, lacks it.
 */
function requiredIssue(issue: Issue, value: unknown): Issue {
  const required = { ...issue, message: 'required' } as Issue;
  // An enum's or a literal's issue does not say what it received: the value at its path does.
  if (issue.code === 'invalid_value') return value !== undefined && lacks(value, issue.path) ? required : issue;
  if (issue.code !== 'invalid_type' && issue.code !== 'invalid_union') return issue;
  return issue.message.endsWith(', received undefined') ? required : issue;
}

/** Whether `value` holds an object (or array) at `path` but for its last key, which it lacks. */
function lacks(value: unknown, path: readonly PropertyKey[]): boolean {
  let at = value;
  for (const key of path) {
    if (typeof at !== 'object' || at === null) return false;
    at = (at as Record<PropertyKey, unknown>)[key];
  }
  return path.length > 0 && at === undefined;
}

/**
 * The issue an answer names of an object's: a `type` it does not take first (a built-in tool,
 * `{type: "computer_use_preview", display_width}`, is refused for its type, not for the fields
 * of its kind), then a field the object does not take (an unsupported `file_id` says more than
 * the `image_url` missing beside it), else the first.
 */
function relevantIssue(issues: readonly Issue[]): Issue | undefined {
  return issues.find(typeRefused) ?? issues.find((issue) => issue.code === 'unrecognized_keys') ?? issues[0];
}

/** An object's `type` refused: it is another kind of object than the one taken there. */
function typeRefused(issue: Issue): boolean {
  return issue.code === 'invalid_value' && issue.path.at(-1) === 'type';
}

/**
 * For a union (`input` is a string or items), the issue of the branch that got furthest,
 * with its full path: `body.input.0.role` says more than `body.input: Invalid input`. Branches
 * that all refused the same field's value (an item's `type`) are answered with the values they
 * take, or the union's own message where it has one. No branch's issues are kept beside it.
 */
function innermostIssue(issue: Issue): Issue {
  const discriminator = unmatchedDiscriminator(issue);
  if (discriminator) return discriminator;
  if (issue.code !== 'invalid_union' || !Array.isArray(issue.errors) || issue.errors.length === 0) return issue;
  const { errors, ...union } = issue;
  // A branch whose literal (an item's `type`) the value does not carry is not the kind it meant.
  const meant = errors.filter((branch) => !branch.some(literalRefused));
  const candidates = meant.length > 0 && meant.length < errors.length ? meant : errors;
  let best: Issue[] | undefined;
  for (const branch of candidates) {
    const first = branch[0];
    if (first && (!best || first.path.length > best[0]!.path.length)) best = branch;
  }
  const first = best?.[0];
  if (!best || !first || first.path.length === 0) {
    // One branch took the value's type and refused the value itself (a list over its limit): its issue.
    const typed = errors.filter((branch) => branch[0] !== undefined && branch[0].code !== 'invalid_type');
    if (typed.length === 1) {
      const chosen = relevantIssue(typed[0]!)!;
      return { ...chosen, path: [...issue.path, ...chosen.path] } as Issue;
    }
    return { ...union, errors: [], message: rootTypeMessage(errors) ?? issue.message } as Issue;
  }
  const values = candidates === errors ? sameFieldValues(errors, first.path) : undefined;
  if (values)
    return {
      code: 'invalid_value',
      values,
      path: [...issue.path, ...first.path],
      message:
        issue.message === 'Invalid input'
          ? `Invalid input: expected one of ${values.map((value) => JSON.stringify(value)).join(', ')}`
          : issue.message,
    } as Issue;
  const chosen = relevantIssue(best)!;
  return innermostIssue({ ...chosen, path: [...issue.path, ...chosen.path] } as Issue);
}

/**
 * A discriminated union's value whose discriminator (an item's `type`) names none of its kinds:
 * answered as a union whose branches all refused that field, with the values it takes (zod's
 * own words and its bookkeeping, `note`, `options`, an empty `errors`, are left out).
 */
function unmatchedDiscriminator(issue: Issue): Issue | undefined {
  if (issue.code !== 'invalid_union' || !('options' in issue) || !Array.isArray(issue.options)) return undefined;
  const values = issue.options as unknown[];
  if (values.length === 0) return undefined;
  const message = issue.message.startsWith('Invalid discriminator value')
    ? `Invalid input: expected one of ${values.map((value) => JSON.stringify(value)).join(', ')}`
    : issue.message;
  return { code: 'invalid_value', values, path: issue.path, message } as Issue;
}

/** An object's own field refused for not being its one literal value (`type: "function_call"`). */
function literalRefused(issue: Issue): boolean {
  return issue.code === 'invalid_value' && issue.path.length === 1 && issue.values.length === 1;
}

/** When every branch of a union refused the value at `path` (its own value list), those values together. */
function sameFieldValues(branches: Issue[][], path: readonly PropertyKey[]): unknown[] | undefined {
  const values: unknown[] = [];
  for (const branch of branches) {
    const first = branch[0];
    if (first?.code !== 'invalid_value' || first.path.join('.') !== path.join('.')) return undefined;
    values.push(...first.values);
  }
  return branches.length > 1 ? values : undefined;
}

/**
 * When every branch of a union refused the value's type itself, what the union takes:
 * `Invalid input: expected string or array, received undefined` (no field sent, or a number).
 */
function rootTypeMessage(branches: Issue[][]): string | undefined {
  const firsts = branches.map((branch) => branch[0]);
  const expected: string[] = [];
  for (const first of firsts) {
    if (first?.code !== 'invalid_type' || first.path.length > 0) return undefined;
    expected.push(String(first.expected));
  }
  const received = /, received (\w+)$/.exec(firsts[0]?.message ?? '')?.[1];
  return `Invalid input: expected ${expected.join(' or ')}${received ? `, received ${received}` : ''}`;
}
