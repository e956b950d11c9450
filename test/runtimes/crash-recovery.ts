import { fileURLToPath } from 'node:url';
import { fixture, startFakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { startServer } from '../support/server-process.ts';

/**
 * kill -9 of a real Node server in the middle of a streamed turn, then a restart: how long
 * until the session takes a turn again, and what the killed turn left. The provider streams
 * the first words of an answer and then hangs, so the turn is mid-stream when the process dies.
 */

const root = fileURLToPath(new URL('../..', import.meta.url));

export interface CrashRecovery {
  /** From the kill to the first 200 of a new turn (the restart included). */
  recoveryMs: number;
  /** From the kill until the restarted server answered /healthz. */
  restartMs: number;
  /** Statuses of the turns tried before that, in order. */
  refused: number[];
  /** User and assistant contents of the session afterwards, oldest first. */
  contents: string[];
  /** What the stream had delivered when the process was killed. */
  streamed: string[];
}

export async function killMidTurnAndRecover(
  environment: (port: number) => Record<string, string>,
  token: string,
  options: { cancel?: boolean } = {},
): Promise<CrashRecovery> {
  const provider = await startFakeProvider(() => ({
    sse: `${fixture('openai-chat-text.sse').split('\n\n').slice(0, 3).join('\n\n')}\n\n`,
    hang: true,
  }));
  // Port 0: each start listens on a port of its own, read from its banner (startServer).
  const env = { ...environment(0), OPENAI_COMPATIBLE_BASE_URL: provider.baseURL, OPENAI_COMPATIBLE_API_KEY: 'test' };
  const start = () => startServer(process.execPath, ['--import', 'tsx', 'functions/node.ts'], { cwd: root, env });
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  let server = await start();
  try {
    let origin = server.origin;
    const id = `crash-${Date.now().toString(36)}`;
    const created = await fetch(`${origin}/v1/sessions`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ id, model: 'openai-compatible:fake' }),
    });
    if (created.status !== 201) throw new Error(`create answered ${created.status}`);
    await fetch(`${origin}/v1/sessions/${id}/turns`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ input: 'before', model: 'echo' }),
    });

    // A streamed turn: read until the first words arrive, then kill the server.
    const response = await fetch(`${origin}/v1/sessions/${id}/turns`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ input: 'interrupted', stream: true }),
    });
    const reader = response.body!.getReader();
    let text = '';
    while (!text.includes('output_text.delta')) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the stream ended before its first delta: ${text}`);
      text += new TextDecoder().decode(value);
    }
    const streamed = [...text.matchAll(/^event: (.+)$/gm)].map((match) => match[1]!);
    await server.kill();
    const killedAt = Date.now();
    await reader.cancel().catch(() => undefined);
    server = await start();
    origin = server.origin;
    const restartMs = Date.now() - killedAt;

    const refused: number[] = [];
    if (options.cancel) {
      const cancelled = await fetch(`${origin}/v1/sessions/${id}/turns/2/cancel`, { method: 'POST', headers });
      if (cancelled.status !== 200) throw new Error(`cancel answered ${cancelled.status}`);
    }
    for (;;) {
      const turn = await fetch(`${origin}/v1/sessions/${id}/turns`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ input: 'after', model: 'echo' }),
      });
      if (turn.status === 200) break;
      refused.push(turn.status);
      if (turn.status !== 409 || refused.length > 400)
        throw new Error(`turn answered ${turn.status}: ${await turn.text()}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const recoveryMs = Date.now() - killedAt;
    const page = (await (await fetch(`${origin}/v1/sessions/${id}/items`, { headers })).json()) as {
      items: { content?: string }[];
    };
    const contents = page.items.map((item) => item.content ?? '').reverse();
    return { recoveryMs, restartMs, refused, contents, streamed };
  } finally {
    await server.stop();
    await provider.close();
  }
}
