import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTailgate, TOKEN } from '../openai/server.ts';

// CORS_ORIGINS in a real browser: a page on another origin calls the API with a token, the
// official client's headers and a JSON body (a preflighted request), and reads the headers the
// API exposes; a page on an origin not listed is refused by the browser.
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

let page: Server;
let pagePort: number;
let tailgate: Awaited<ReturnType<typeof startTailgate>>;
let browser: Browser;
beforeAll(async () => {
  page = createServer((_request, response) => response.end('<!doctype html><title>page</title>'));
  await new Promise<void>((resolve) => page.listen(0, '127.0.0.1', resolve));
  pagePort = (page.address() as AddressInfo).port;
  tailgate = await startTailgate({ CORS_ORIGINS: `http://127.0.0.1:${pagePort}` }, undefined, { logLine: () => {} });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await tailgate?.close();
  await new Promise((resolve) => page?.close(resolve));
});

/** What a page on `origin` gets from POST /v1/responses: the status and the headers it may read, or the failure. */
async function callFrom(origin: string, baseURL: string) {
  const tab = await browser.newPage();
  try {
    await tab.goto(origin);
    return await tab.evaluate(
      async ({ baseURL, token }) => {
        try {
          const response = await fetch(`${baseURL}/responses`, {
            method: 'POST',
            headers: {
              authorization: `Bearer ${token}`,
              'content-type': 'application/json',
              'x-stainless-retry-count': '0',
              'idempotency-key': crypto.randomUUID(),
            },
            body: JSON.stringify({ model: 'echo', input: 'from a page' }),
          });
          const body = (await response.json()) as { output_text?: string };
          return { status: response.status, requestId: response.headers.get('x-request-id'), text: body.output_text };
        } catch (error) {
          return { failed: String(error) };
        }
      },
      { baseURL, token: TOKEN },
    );
  } finally {
    await tab.close();
  }
}

describe('CORS_ORIGINS in Chromium', () => {
  it('lets a page on a listed origin call the API and read x-request-id', { timeout: 30_000 }, async () => {
    const answer = await callFrom(`http://127.0.0.1:${pagePort}/`, tailgate.baseURL);
    expect(answer).toEqual({ status: 200, requestId: expect.stringMatching(/^req_/), text: 'echo: from a page' });
  });

  it('refuses a page on another origin', { timeout: 30_000 }, async () => {
    const answer = await callFrom(`http://localhost:${pagePort}/`, tailgate.baseURL);
    expect(answer).toEqual({ failed: expect.stringContaining('Failed to fetch') });
  });
});
