import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startHookTimeout, startServer } from './server-process.ts';

const require = createRequire(import.meta.url);

/** A JSON call to `origin` with `token` as the bearer: the body answered, or an error naming the status. */
export function apiCaller(origin: () => string, token: string) {
  return async (method: string, path: string, body?: unknown): Promise<any> => {
    const response = await fetch(`${origin()}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`);
    return text ? JSON.parse(text) : null;
  };
}

/**
 * The WCAG 2.1 A and AA violations axe-core finds in `page`, each as its rule and the nodes it
 * names. axe-core is evaluated through the browser's debugging protocol, which the page's
 * Content-Security-Policy does not govern, so the page keeps its CSP.
 */
export async function axeViolations(page: Page): Promise<unknown[]> {
  const source = await readFile(require.resolve('axe-core/axe.min.js'), 'utf8');
  await page.evaluate(source);
  return page.evaluate(async () => {
    const result = await (window as any).axe.run(document, {
      runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] },
    });
    return result.violations.map((violation: any) => ({
      id: violation.id,
      nodes: violation.nodes.map((node: any) => node.target),
    }));
  });
}

/** A chunk of an OpenAI-compatible stream carrying `content`. */
export function chunk(content: string): string {
  const choices = [{ index: 0, delta: { role: 'assistant', content }, finish_reason: null }];
  const data = { id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'fake', choices };
  return `data: ${JSON.stringify(data)}\n\n`;
}

/** The end of an OpenAI-compatible stream: its finish, with the usage of the call. */
export function finish(): string {
  const choices = [{ index: 0, delta: {}, finish_reason: 'stop' }];
  const usage = { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17 };
  const data = { id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'fake', choices, usage };
  return `data: ${JSON.stringify(data)}\n\ndata: [DONE]\n\n`;
}

export interface InspectorNode {
  origin: string;
  browser: Browser;
  close(): Promise<void>;
}

/** startInspectorNode's wait for the server. */
const INSPECTOR_SERVER_START_MS = 60_000;

/** The timeout of a hook that starts inspector nodes side by side: their servers, then Chromium. */
export const INSPECTOR_HOOK_MS = startHookTimeout(INSPECTOR_SERVER_START_MS, 45_000);

/**
 * The Node server (functions/node.ts) on files in a temporary DATA_DIR, with `environment`
 * (API_TOKEN among it), and Debian's Chromium (`CHROMIUM_PATH` overrides /usr/bin/chromium).
 */
export async function startInspectorNode(environment: Record<string, string>): Promise<InspectorNode> {
  const data = await mkdtemp(join(tmpdir(), 'tailgate-ui-'));
  const server = await startServer(process.execPath, ['--import', 'tsx', 'functions/node.ts', '--port', '0'], {
    cwd: process.cwd(),
    env: { DATA_DIR: data, ...environment },
    timeoutMs: INSPECTOR_SERVER_START_MS,
  });
  // A browser that fails to launch leaves no server behind: nobody would know of it.
  const browser = await chromium
    .launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium' })
    .catch(async (error: unknown) => {
      await server.stop();
      await rm(data, { recursive: true, force: true });
      throw error;
    });
  return {
    origin: server.origin,
    browser,
    async close() {
      await browser.close();
      await server.stop();
      await rm(data, { recursive: true, force: true });
    },
  };
}
