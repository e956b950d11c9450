import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer, type RunningServer } from '../test/support/server-process.ts';
import { startBucketProcess } from './bucket-process.ts';

/**
 * A chaos soak of the Node server on S3: `SOAK_SERVERS` servers (functions/node.ts) on one
 * bucket (fauxqs behind the conditional gateway, ./bucket-process.ts), or with `SOAK_STORE=file`
 * on one DATA_DIR (the file store, shared by the servers of one machine), `SOAK_CLIENTS` clients
 * sending a mix of appends, turns (plain, streamed, background, queued, interrupting), notices
 * (`abort` among them), forks, exports and imports, compactions, cancels, withdrawals, deletes
 * and budget changes for `SOAK_MINUTES`, while a random server is killed (kill -9) every
 * `SOAK_KILL_SECONDS` and started again. Half the sessions talk to a slow fake provider (an
 * OpenAI-compatible server in this process), so turns overlap and sessions are busy; a share
 * `SOAK_STALLS` (0.05) of its calls stalls past `MODEL_TIMEOUT_MS` (5 s here), a streamed one after
 * its first output, so turns and compactions time out and are charged their estimates.
 *
 * Every acknowledged write is kept in a ledger; at the end, once every lease ran out and the
 * queues were swept, it checks that no acknowledged append, turn or queued input is lost or
 * stored twice, no notice delivered twice, no session busy, no 5xx, session totals equal to
 * their turn receipts, and that idempotent replays answered as the first answers did.
 *
 *   npm run soak        (SOAK_STORE=s3 SOAK_MINUTES=15 SOAK_CLIENTS=18 SOAK_SERVERS=3 SOAK_KILL_SECONDS=30)
 *
 * It prints a JSON summary; the servers' output goes to SOAK_DIR (a directory under /tmp), and
 * the file store's DATA_DIR is its data/.
 */

const root = fileURLToPath(new URL('..', import.meta.url));
const TOKEN = 'soak-token';
const minutes = Number(process.env.SOAK_MINUTES ?? 15);
const clients = Number(process.env.SOAK_CLIENTS ?? 18);
const serverCount = Number(process.env.SOAK_SERVERS ?? 3);
const killEveryMs = Number(process.env.SOAK_KILL_SECONDS ?? 30) * 1000;
const storeKind = process.env.SOAK_STORE ?? 's3';
if (storeKind !== 's3' && storeKind !== 'file') throw new Error(`SOAK_STORE is s3 or file, not ${storeKind}`);
const leaseMs = 6000;
const modelTimeoutMs = 5000;
const stalls = Number(process.env.SOAK_STALLS ?? 0.05);
const outDir = process.env.SOAK_DIR ?? `/tmp/tailgate-soak-${Date.now().toString(36)}`;
mkdirSync(outDir, { recursive: true });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const pick = <T>(list: readonly T[]): T => list[Math.floor(Math.random() * list.length)]!;
const chance = (p: number) => Math.random() < p;

// ---- the slow fake provider (OpenAI chat completions) ----
function startFakeProvider(): Promise<Server> {
  const server = createServer(async (request, response) => {
    let body = '';
    for await (const chunk of request) body += chunk;
    const json = JSON.parse(body || '{}') as { stream?: boolean };
    const usage = { prompt_tokens: 100, completion_tokens: 10, total_tokens: 110 };
    const chunk = (delta: object, finish: string | null, extra = {}) => {
      const choices = [{ index: 0, delta, finish_reason: finish }];
      const data = { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'slow', choices, ...extra };
      return `data: ${JSON.stringify(data)}\n\n`;
    };
    // A stalled call outlasts the model timeout: the server gives up on it (after output, if streamed).
    const stall = chance(stalls);
    if (json.stream) {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      for (let i = 0; i < 8; i++) {
        if (response.destroyed) return;
        response.write(chunk({ content: `w${i} ` }, null));
        await sleep(i === 1 && stall ? modelTimeoutMs + 3000 : 200);
      }
      response.write(chunk({}, 'stop', { usage }));
      response.end('data: [DONE]\n\n');
      return;
    }
    await sleep(stall ? modelTimeoutMs + 3000 : 1500);
    if (response.destroyed) return;
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(
      JSON.stringify({
        id: 'c',
        object: 'chat.completion',
        created: 1,
        model: 'slow',
        choices: [{ index: 0, message: { role: 'assistant', content: 'slow answer' }, finish_reason: 'stop' }],
        usage,
      }),
    );
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

// ---- figures ----
const STORED_FAILURES = new Set(['aborted', 'turn_cancelled', 'lease_expired', 'model_error', 'model_timeout']);
const figures = {
  requests: 0,
  byStatus: {} as Record<string, number>,
  connectionErrors: 0,
  refused: 0,
  kills: 0,
  restartMs: [] as number[],
  ops: {} as Record<string, number>,
  /** 5xx naming a stored failure (502 model_error, 504 model_timeout): a turn's answer, not in fiveXX. */
  modelFailures: 0,
  fiveXX: [] as string[],
  replays: 0,
  /** Turn receipts whose usage is an estimate (a call timed out or broke off after output, or died). */
  estimatedReceipts: 0,
  defects: [] as string[],
};
const defect = (line: string) => {
  figures.defects.push(line);
  console.log(`DEFECT ${line}`);
};

// ---- servers ----
interface Slot {
  /** The slot's number, naming its log. */
  index: number;
  server: RunningServer | undefined;
  up: boolean;
  log: string;
}
const slots: Slot[] = [];
let env: Record<string, string> = {};

async function boot(slot: Slot): Promise<void> {
  const started = Date.now();
  slot.server = await startServer(process.execPath, ['--import', 'tsx', 'functions/node.ts'], {
    cwd: root,
    // A port the server picks each start (startServer reads it from the banner).
    env: { ...env, PORT: '0' },
    timeoutMs: 60_000,
  });
  slot.up = true;
  figures.restartMs.push(Date.now() - started);
}

async function killOne(): Promise<void> {
  const slot = pick(slots.filter((s) => s.up));
  if (!slot?.server) return;
  slot.up = false;
  slot.log += slot.server.output();
  await slot.server.kill();
  figures.kills++;
  await boot(slot);
}

// ---- HTTP ----
interface Answer {
  status: number;
  text: string;
  json: any;
}
type Outcome = Answer | { lost: true };
const isLost = (o: Outcome): o is { lost: true } => 'lost' in o;

async function call(
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Outcome> {
  for (let attempt = 0; ; attempt++) {
    const slot = pick(slots.filter((s) => s.up).length ? slots.filter((s) => s.up) : slots);
    figures.requests++;
    const origin = slot.up ? slot.server?.origin : undefined;
    try {
      // A slot whose server is down refuses, as a port nothing listens on would.
      if (origin === undefined) throw new Error('down', { cause: { code: 'ECONNREFUSED' } });
      const response = await fetch(`${origin}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${TOKEN}`,
          ...(body === undefined
            ? {}
            : { 'content-type': typeof body === 'string' ? 'application/x-ndjson' : 'application/json' }),
          ...headers,
        },
        ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
        signal: AbortSignal.timeout(60_000),
      });
      const text = await response.text();
      figures.byStatus[response.status] = (figures.byStatus[response.status] ?? 0) + 1;
      let json: any;
      try {
        json = JSON.parse(text);
      } catch {
        json = undefined;
      }
      const failed = STORED_FAILURES.has(json?.error?.code);
      if (response.status >= 500 && failed) figures.modelFailures++;
      else if (response.status >= 500)
        figures.fiveXX.push(`${method} ${path} ${response.status} ${text.slice(0, 300)}`);
      return { status: response.status, text, json };
    } catch (error) {
      const code = String((error as { cause?: { code?: string } }).cause?.code ?? (error as Error).message);
      if (code === 'ECONNREFUSED' && attempt < 20) {
        figures.refused++;
        await sleep(200);
        continue;
      }
      figures.connectionErrors++;
      return { lost: true };
    }
  }
}

// ---- the ledger ----
type MarkerState = 'acked' | 'maybe' | 'queued' | 'withdrawn';
interface Session {
  id: string;
  model: string;
  budget: number | undefined;
  original: boolean;
  deleted: boolean;
  /** A delete was sent whose answer was lost: the session may be gone. */
  deleting: boolean;
  markers: Map<string, MarkerState>;
  notices: Map<string, 'acked'>;
  compactTokens: number;
  lostCompactions: number;
}
const sessions: Session[] = [];
const live = () => sessions.filter((s) => !s.deleted);
let counter = 0;
const marker = (client: number) => `m${client}x${(counter++).toString(36)}q`;
const MARKER = /m\d+x[0-9a-z]+q/g;

async function createSession(): Promise<void> {
  const id = `s${(counter++).toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const model = chance(0.5) ? 'openai-compatible:slow' : 'echo';
  const budget = chance(0.2) ? 8 : undefined;
  const answer = await call('POST', '/v1/sessions', {
    id,
    model,
    ...(budget ? { budget: { max_turns: budget } } : {}),
    ...(chance(0.3) ? { on_busy: 'enqueue' } : {}),
  });
  if (!isLost(answer) && answer.status === 201) adopt(id, model, true, budget);
}

/** A session into the ledger: one the soak created (`original`), or a fork or an import. */
function adopt(id: string, model: string, original: boolean, budget?: number): void {
  sessions.push({
    id,
    model,
    budget,
    original,
    deleted: false,
    deleting: false,
    markers: new Map(),
    notices: new Map(),
    compactTokens: 0,
    lostCompactions: 0,
  });
}

/**
 * Per marker, turn requests sent again under its key (a retry, a replay), counted when each starts
 * and when it ends (odd: one in flight). A withdraw meanwhile may be followed by the resend
 * queueing the input again (a withdrawn input's key is free), which then runs.
 */
const resends = new Map<string, number>();
async function resend<T>(m: string, send: () => Promise<T>): Promise<T> {
  resends.set(m, (resends.get(m) ?? 0) + 1);
  try {
    return await send();
  } finally {
    resends.set(m, (resends.get(m) ?? 0) + 1);
  }
}

const count = (op: string) => (figures.ops[op] = (figures.ops[op] ?? 0) + 1);

// ---- operations ----
async function append(client: number, s: Session) {
  const m = marker(client);
  const answer = await call('POST', `/v1/sessions/${s.id}/items`, {
    items: [{ type: 'message', role: 'user', content: m }],
  });
  if (isLost(answer) || answer.status >= 500) s.markers.set(m, 'maybe');
  else if (answer.status === 201) s.markers.set(m, 'acked');
}

async function turn(client: number, s: Session) {
  const m = marker(client);
  const kind = pick(['plain', 'plain', 'stream', 'background']);
  const onBusy = pick(['reject', 'enqueue', 'enqueue', 'interrupt', undefined]);
  count(`turn.${kind}.${onBusy ?? 'session'}`);
  const body: Record<string, unknown> = { input: m };
  if (kind === 'stream') body.stream = true;
  if (kind === 'background') body.background = true;
  if (onBusy) body.on_busy = onBusy;
  const key = `k-${m}`;
  let first: Answer | undefined;
  let uncertain = false;
  for (let attempt = 0; attempt < 8; attempt++) {
    const send = () => call('POST', `/v1/sessions/${s.id}/turns`, body, { 'idempotency-key': key });
    const answer = attempt === 0 ? await send() : await resend(m, send);
    const code: string | undefined = isLost(answer) ? undefined : answer.json?.error?.code;
    // A 502 or 504 naming a stored failure (model_error, model_timeout) is the turn's answer.
    if (isLost(answer) || (answer.status >= 500 && !STORED_FAILURES.has(code ?? ''))) {
      uncertain = true;
      await sleep(1000 + attempt * 1000);
      continue;
    }
    if (answer.status === 409 && code === 'turn_in_progress' && uncertain) {
      await sleep(1500 + attempt * 1000);
      continue;
    }
    if (kind === 'stream' && answer.status === 200) {
      if (answer.text.includes('event: turn.completed')) return record(s, m, 'acked', answer, body, key);
      const error = /event: error\ndata: (.*)/.exec(answer.text)?.[1];
      const errorCode = error ? JSON.parse(error).error?.code : undefined;
      if (STORED_FAILURES.has(errorCode)) return s.markers.set(m, 'acked');
      if (errorCode === 'not_found') return;
      uncertain = true;
      await sleep(1000);
      continue;
    }
    first = answer;
    break;
  }
  if (!first) {
    s.markers.set(m, 'maybe');
    return;
  }
  const code: string | undefined = first.json?.error?.code;
  if (first.status === 200) return record(s, m, 'acked', first, body, key);
  if (first.status === 202) return record(s, m, first.json?.queued_turn ? 'queued' : 'acked', first, body, key);
  if (STORED_FAILURES.has(code ?? '') || first.status === 502 || first.status === 504) return s.markers.set(m, 'acked');
  if (uncertain) return s.markers.set(m, 'maybe');
  if (code === 'idempotency_key_reused') defect(`422 on a key used once: ${s.id} ${key}`);
}

/** Records the marker and, for some, sends the request again under its key: the answer must be the same. */
async function record(
  s: Session,
  m: string,
  state: MarkerState,
  first: Answer,
  body: Record<string, unknown>,
  key: string,
) {
  s.markers.set(m, state);
  if (body.stream || !chance(0.3)) return;
  const again = await resend(m, () => call('POST', `/v1/sessions/${s.id}/turns`, body, { 'idempotency-key': key }));
  // A client deleted the session meanwhile.
  if (isLost(again) || (again.status === 404 && (s.deleted || s.deleting))) return;
  figures.replays++;
  if (first.status === 200 && again.status !== 200) {
    if (!(again.status === 409 && again.json?.error?.code === 'turn_in_progress')) {
      defect(`replay of ${s.id} ${key}: first 200, then ${again.status} ${again.text.slice(0, 200)}`);
    }
  } else if (first.status === 200 && again.text !== first.text) {
    defect(`replay of ${s.id} ${key} differs: ${first.text.slice(0, 200)} / ${again.text.slice(0, 200)}`);
  } else if (first.status === 202 && first.json?.turn !== undefined) {
    if (again.status !== 202 && again.status !== 409)
      defect(`background replay ${s.id} ${key}: ${again.status} ${again.text.slice(0, 200)}`);
    else if (again.status === 202 && again.json?.turn !== first.json.turn)
      defect(`background replay ${s.id} ${key} names turn ${again.json?.turn}, first ${first.json.turn}`);
  } else if (first.status === 202 && first.json?.queued_turn) {
    // Still queued: the same 202; taken up since: 409 while it runs, or its answer.
    // Taken up as a background turn not started yet: 202 with its turn.
    if (again.status === 202 && again.json?.queued_turn !== first.json.queued_turn && again.json?.turn === undefined) {
      defect(`queued replay ${s.id} ${key}: ${again.text.slice(0, 200)} / first ${first.text.slice(0, 200)}`);
    }
    if (again.status === 422 || again.status >= 500)
      defect(`queued replay ${s.id} ${key}: ${again.status} ${again.text.slice(0, 200)}`);
  }
}

async function notice(client: number, s: Session) {
  const abort = chance(0.1);
  const m = marker(client);
  const name = abort ? 'abort' : `n-${m}`;
  const answer = await call('POST', `/v1/sessions/${s.id}/inbox`, { name, content: abort ? 'stop' : m });
  if (!isLost(answer) && answer.status === 201 && !abort) s.notices.set(name, 'acked');
}

async function newestTurn(s: Session): Promise<any | undefined> {
  const answer = await call('GET', `/v1/sessions/${s.id}/turns?limit=1`);
  return isLost(answer) ? undefined : answer.json?.turns?.[0];
}

async function fork(s: Session) {
  const newest = await newestTurn(s);
  if (!newest) return;
  const answer = await call('POST', `/v1/sessions/${s.id}/fork`, { at_turn: newest.turn ?? newest.number });
  if (!isLost(answer) && answer.status === 201) adopt(answer.json.id, s.model, false);
}

async function exportImport(s: Session) {
  const exported = await call('GET', `/v1/sessions/${s.id}/export`);
  if (isLost(exported) || exported.status !== 200 || !exported.text.endsWith('\n')) return;
  const lines = exported.text.split('\n');
  const header = JSON.parse(lines[0]!);
  const id = `${s.id.slice(0, 20)}i${(counter++).toString(36)}`;
  lines[0] = JSON.stringify({ ...header, id });
  const body = lines.join('\n');
  const imported = await call('POST', '/v1/sessions/import', body);
  if (isLost(imported) || imported.status !== 201) return;
  // Compared before the clients may write to it.
  const again = await call('GET', `/v1/sessions/${id}/export`);
  if (!isLost(again) && again.status === 200 && again.text !== body) {
    const theirs = again.text.split('\n');
    const at = theirs.findIndex((line, i) => line !== lines[i]);
    defect(
      `export(import(e)) != e for ${s.id} -> ${id} at line ${at}: ` +
        `${lines[at]?.slice(0, 300)} / ${theirs[at]?.slice(0, 300)}`,
    );
  }
  adopt(id, s.model, false);
}

async function compact(s: Session) {
  const answer = await call('POST', `/v1/sessions/${s.id}/compact`, {});
  if (isLost(answer) || answer.status >= 500) s.lostCompactions++;
  else if (answer.status === 200 && answer.json?.usage) {
    s.compactTokens += (answer.json.usage.input_tokens ?? 0) + (answer.json.usage.output_tokens ?? 0);
  }
}

async function cancel(s: Session) {
  const newest = await newestTurn(s);
  if (newest?.status === 'in_progress' || newest?.status === 'queued') {
    await call('POST', `/v1/sessions/${s.id}/turns/${newest.turn}/cancel`);
  }
}

async function withdraw(s: Session) {
  const listed = await call('GET', `/v1/sessions/${s.id}/queue`);
  if (isLost(listed) || listed.status !== 200 || !listed.json.queued.length) return;
  const entry = pick(listed.json.queued as { queued_turn: string; preview: string }[]);
  const m = entry.preview.match(MARKER)?.[0];
  const before = (m && resends.get(m)) || 0;
  const answer = await call('DELETE', `/v1/sessions/${s.id}/queue/${entry.queued_turn}`);
  const overlapped = before % 2 === 1 || ((m && resends.get(m)) || 0) !== before;
  if (m && !isLost(answer) && answer.status === 200) s.markers.set(m, overlapped ? 'maybe' : 'withdrawn');
  else if (m && (isLost(answer) || answer.status >= 500)) s.markers.set(m, 'maybe');
}

async function remove(s: Session) {
  s.deleting = true;
  const answer = await call('DELETE', `/v1/sessions/${s.id}`);
  if (!isLost(answer) && (answer.status === 204 || answer.status === 404)) s.deleted = true;
  else s.deleting = true;
  await createSession();
}

async function raiseBudget(s: Session) {
  if (!s.budget) return;
  const answer = await call('PATCH', `/v1/sessions/${s.id}`, { budget: { max_turns: s.budget + 4 } });
  if (!isLost(answer) && answer.status === 200) s.budget += 4;
}

const OPS: [number, string, (client: number, s: Session) => Promise<unknown>][] = [
  [20, 'append', append],
  [34, 'turn', turn],
  [12, 'notice', notice],
  [2, 'fork', (_c, s) => fork(s)],
  [2, 'export-import', (_c, s) => exportImport(s)],
  [4, 'compact', (_c, s) => compact(s)],
  [5, 'cancel', (_c, s) => cancel(s)],
  [4, 'withdraw', (_c, s) => withdraw(s)],
  [2, 'delete', (_c, s) => remove(s)],
  [3, 'budget', (_c, s) => raiseBudget(s)],
  [8, 'read', (_c, s) => call('GET', `/v1/sessions/${s.id}`)],
];
const totalWeight = OPS.reduce((sum, [w]) => sum + w, 0);

async function client(n: number, until: number) {
  while (Date.now() < until) {
    // The newest sessions are busiest: a few are shared by many clients at once.
    const pool = live().filter((s) => s.original || chance(0.3));
    const s = chance(0.5) ? pick(pool.slice(-8)) : pick(pool);
    if (!s) {
      await sleep(100);
      continue;
    }
    const roll = Math.random() * totalWeight;
    let reached = 0;
    const op = OPS.find(([weight]) => {
      reached += weight;
      return roll < reached;
    })!;
    count(op[1]);
    try {
      await op[2](n, s);
    } catch (error) {
      defect(`client ${n} ${op[1]} threw: ${(error as Error).stack}`);
    }
    await sleep(Math.random() * 150);
  }
}

// ---- the checks at the end ----
async function allPages(path: string, field: string): Promise<any[]> {
  const out: any[] = [];
  let cursor: string | undefined;
  for (;;) {
    const sep = path.includes('?') ? '&' : '?';
    const answer = await call(
      'GET',
      `${path}${sep}limit=${field === 'items' ? 1000 : 100}${cursor ? `&before=${cursor}` : ''}`,
    );
    if (isLost(answer)) throw new Error(`lost ${path}`);
    if (answer.status !== 200) throw new Error(`${path}: ${answer.status} ${answer.text}`);
    out.push(...answer.json[field]);
    if (!answer.json.has_more) return out;
    cursor = answer.json.next_before ?? String(out.at(-1).turn);
  }
}

async function settle(s: Session): Promise<boolean> {
  const deadline = Date.now() + 6 * leaseMs + 75_000;
  while (Date.now() < deadline) {
    const queue = await call('GET', `/v1/sessions/${s.id}/queue`);
    const newest = await newestTurn(s);
    const session = await call('GET', `/v1/sessions/${s.id}`);
    if (!isLost(queue) && queue.status === 404) return true;
    const open = newest && (newest.status === 'in_progress' || newest.status === 'queued');
    const waiting = !isLost(queue) && queue.json?.total > 0;
    // Inputs the session's spent budget holds wait (an import or a fork keeps its budget).
    const held = waiting && !isLost(session) && session.json?.budget != null;
    if (!open && (!waiting || held)) return true;
    // A turn whose process died, on a session no one writes to, stays open in the listing until a
    // reader of its receipt (or the next writer) closes it once its lease ran out.
    if (open) await call('GET', `/v1/sessions/${s.id}/turns/${newest.turn}`);
    await sleep(2000);
  }
  return false;
}

async function verify(s: Session) {
  if (s.deleted) {
    const answer = await call('GET', `/v1/sessions/${s.id}`);
    if (!isLost(answer) && answer.status !== 404) defect(`deleted session ${s.id} answers ${answer.status}`);
    return;
  }
  if (s.deleting) {
    const answer = await call('GET', `/v1/sessions/${s.id}`);
    if (!isLost(answer) && answer.status === 404) return;
  }
  if (!(await settle(s))) defect(`session ${s.id} still busy after the leases and sweeps`);
  // One append folds the spend of turns someone else closed into the session's totals.
  await call('POST', `/v1/sessions/${s.id}/items`, { items: [{ type: 'message', role: 'user', content: 'final' }] });
  const items = await allPages(`/v1/sessions/${s.id}/items`, 'items');
  const seen = new Map<string, number>();
  for (const item of items) {
    if (item.type !== 'message' || item.role !== 'user') continue;
    for (const m of JSON.stringify(item.content).match(MARKER) ?? []) seen.set(m, (seen.get(m) ?? 0) + 1);
  }
  for (const [m, times] of seen)
    if (times > 1) defect(`${s.id}: ${m} stored ${times} times (${s.markers.get(m) ?? 'not in ledger'})`);
  const queue = await call('GET', `/v1/sessions/${s.id}/queue`);
  const queued = isLost(queue) ? '' : queue.text;
  for (const [m, state] of s.markers) {
    const times = seen.get(m) ?? 0;
    if (state === 'acked' && times !== 1) defect(`${s.id}: acknowledged ${m} stored ${times} times`);
    if (state === 'queued' && times !== 1 && !queued.includes(m)) defect(`${s.id}: queued ${m} stored ${times} times`);
    if (state === 'withdrawn' && times !== 0) defect(`${s.id}: withdrawn ${m} stored ${times} times`);
  }
  // Notices: each delivered once, each acknowledged one delivered or pending.
  const delivered = await call('GET', `/v1/sessions/${s.id}/inbox/delivered`);
  const pending = await call('GET', `/v1/sessions/${s.id}/inbox`);
  if (isLost(delivered) || isLost(pending)) return;
  const names = new Map<string, number>();
  for (const d of delivered.json.delivered) if (d.name !== 'abort') names.set(d.name, (names.get(d.name) ?? 0) + 1);
  for (const [name, times] of names) if (times > 1) defect(`${s.id}: notice ${name} delivered ${times} times`);
  const pendingNames = new Set(pending.json.pending.map((p: { name: string }) => p.name));
  for (const name of s.notices.keys()) {
    if (!names.has(name) && !pendingNames.has(name))
      defect(`${s.id}: acknowledged notice ${name} neither delivered nor pending`);
  }
  const turns = await allPages(`/v1/sessions/${s.id}/turns`, 'turns');
  const carried = new Map<string, number>();
  figures.estimatedReceipts += turns.filter((t) => t.usage_estimated).length;
  for (const t of turns) {
    if (t.status === 'in_progress' || t.status === 'queued') defect(`${s.id}: turn ${t.turn} still ${t.status}`);
    if (t.status !== 'completed') continue;
    for (const n of t.notices ?? []) carried.set(n.stored_as, (carried.get(n.stored_as) ?? 0) + 1);
  }
  for (const [storedAs, times] of carried) {
    if (times < 2) continue;
    const carriers = turns
      .filter((t) => (t.notices ?? []).some((n: { stored_as: string }) => n.stored_as === storedAs))
      .map((t) => ({
        turn: t.turn,
        status: t.status,
        error: t.error?.code,
        notices: t.notices,
        started: t.started_at,
      }));
    const record = delivered.json.delivered.filter((d: { stored_as: string }) => d.stored_as === storedAs);
    defect(`${s.id}: notice ${storedAs} in ${times} completed turns' prompts: ${JSON.stringify({ carriers, record })}`);
  }
  if (!s.original) return;
  // Totals: completed turns, and tokens of every receipt plus the compactions.
  const session = await call('GET', `/v1/sessions/${s.id}`);
  if (isLost(session)) return;
  const usage = session.json.usage;
  const completed = turns.filter((t) => t.status === 'completed').length;
  if (usage.turns !== completed) defect(`${s.id}: usage.turns ${usage.turns}, completed receipts ${completed}`);
  if (s.budget !== undefined && usage.turns > s.budget) defect(`${s.id}: ${usage.turns} turns over budget ${s.budget}`);
  const tokens = (u: any) => (u ? (u.input_tokens ?? 0) + (u.output_tokens ?? 0) : 0);
  const receipts = turns.reduce((sum, t) => sum + tokens(t.usage) + tokens(t.compaction_usage), 0) + s.compactTokens;
  const total = usage.input_tokens + usage.output_tokens;
  if (total !== receipts && !(s.lostCompactions && total > receipts)) {
    defect(
      `${s.id}: session tokens ${total}, receipts and compactions ${receipts} (lost compactions ${s.lostCompactions})`,
    );
  }
}

async function main() {
  const started = Date.now();
  const bucket = storeKind === 's3' ? await startBucketProcess('soak') : undefined;
  const provider = await startFakeProvider();
  env = {
    API_TOKEN: TOKEN,
    ...(bucket
      ? {
          S3_ENDPOINT: bucket.endpoint,
          S3_BUCKET: 'soak',
          S3_REGION: 'us-east-1',
          AWS_ACCESS_KEY_ID: 'test',
          AWS_SECRET_ACCESS_KEY: 'test',
        }
      : { DATA_DIR: join(outDir, 'data') }),
    KEY_PREFIX: 'soak/',
    DEFAULT_MODEL: 'echo',
    TURN_LEASE_MS: String(leaseMs),
    MODEL_TIMEOUT_MS: String(modelTimeoutMs),
    OPENAI_COMPATIBLE_BASE_URL: `http://127.0.0.1:${(provider.address() as AddressInfo).port}/v1`,
    OPENAI_COMPATIBLE_API_KEY: 'fake',
  };
  for (let i = 0; i < serverCount; i++) slots.push({ index: i, server: undefined, up: false, log: '' });
  await Promise.all(slots.map(boot));
  figures.restartMs.length = 0;
  for (let i = 0; i < 24; i++) await createSession();
  const until = Date.now() + minutes * 60_000;
  const killer = (async () => {
    while (Date.now() + killEveryMs < until) {
      await sleep(killEveryMs);
      await killOne();
    }
  })();
  const progress = setInterval(
    () =>
      console.log(
        JSON.stringify({
          at: Math.round((Date.now() - started) / 1000),
          requests: figures.requests,
          kills: figures.kills,
          sessions: live().length,
          defects: figures.defects.length,
        }),
      ),
    30_000,
  );
  await Promise.all([killer, ...Array.from({ length: clients }, (_, n) => client(n, until))]);
  clearInterval(progress);
  const soakSeconds = (Date.now() - started) / 1000;
  const requestsDuringSoak = figures.requests;
  const verifyStart = Date.now();
  const toVerify = [...sessions];
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      for (let s = toVerify.shift(); s; s = toVerify.shift()) {
        try {
          await verify(s);
        } catch (error) {
          defect(`verify ${s.id}: ${(error as Error).message}`);
        }
      }
    }),
  );
  for (const slot of slots) {
    slot.log += slot.server?.output() ?? '';
    writeFileSync(join(outDir, `server-${slot.index}.log`), slot.log);
    await slot.server?.stop();
  }
  provider.close();
  await bucket?.stop();
  const restart = figures.restartMs.sort((a, b) => a - b);
  console.log(
    JSON.stringify(
      {
        store: storeKind,
        ...figures,
        restartMs: { min: restart[0], median: restart[Math.floor(restart.length / 2)], max: restart.at(-1) },
        fiveXX: figures.fiveXX.slice(0, 30),
        fiveXXCount: figures.fiveXX.length,
        sessions: sessions.length,
        deleted: sessions.filter((s) => s.deleted).length,
        markers: sessions.reduce((sum, s) => sum + s.markers.size, 0),
        notices: sessions.reduce((sum, s) => sum + s.notices.size, 0),
        soakSeconds,
        requestsDuringSoak,
        verifySeconds: (Date.now() - verifyStart) / 1000,
        outDir,
      },
      null,
      1,
    ),
  );
  process.exit(figures.defects.length ? 1 : 0);
}

await main();
