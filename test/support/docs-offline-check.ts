/**
 * Starts functions/node.ts in this process and fetches /docs and every asset it references,
 * without a token; prints one JSON line (test/runtimes/docs-offline.test.ts runs it in a
 * network namespace with only loopback). Also reports whether the outside world answers.
 */
export {};

process.env.PORT = '18787';
process.env.HOST = '127.0.0.1';
process.env.API_TOKEN ??= 'docs-token';
await import('../../functions/node.ts');
const origin = 'http://127.0.0.1:18787';
for (let attempt = 0; attempt < 100; attempt++) {
  try {
    if ((await fetch(`${origin}/healthz`)).ok) break;
  } catch {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
const page = await fetch(`${origin}/docs`);
const html = await page.text();
const references = [...html.matchAll(/\b(?:src|href)="([^"]+)"/g)].map((match) => match[1]!);
const assets = [];
for (const reference of references) {
  const url = new URL(reference, `${origin}/docs`);
  const response = await fetch(url);
  const body = new Uint8Array(await response.arrayBuffer());
  assets.push({
    reference,
    origin: url.origin,
    status: response.status,
    type: response.headers.get('content-type'),
    bytes: body.length,
  });
}
let outsideReachable: boolean;
try {
  await fetch('https://cdn.jsdelivr.net/npm/@scalar/api-reference', { signal: AbortSignal.timeout(3000) });
  outsideReachable = true;
} catch {
  outsideReachable = false;
}
const openapi = await fetch(`${origin}/openapi.json`);
const session = await fetch(`${origin}/v1/sessions/nope`);
// Exit only once the line is written: a pipe takes it in pieces, and exiting earlier cuts it.
const line = JSON.stringify({
  status: page.status,
  type: page.headers.get('content-type'),
  html,
  assets,
  outsideReachable,
  openapiStatus: openapi.status,
  sessionStatus: session.status,
});
process.stdout.write(`${line}\n`, () => process.exit(0));
