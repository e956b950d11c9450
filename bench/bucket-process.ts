import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { peakRssKiB } from './child-probe.ts';

/**
 * An S3 bucket in a process of its own, for a bench that loads the server through S3
 * (bench/append-load.ts): fauxqs behind the conditional gateway of test/support/s3-store.ts, with
 * its key index (the bench is the bucket's only writer). Apart from the server, so that the
 * server's process holds the server's memory only, and the bucket's (the stored bytes, fauxqs's
 * and the gateway's work) is measured on its own.
 *
 * The process ends when asked for its peak RSS (`stop`), when its parent exits (an `exit`
 * handler kills it), and when its parent dies without one (a signal): its IPC channel then
 * closes, and it exits on `disconnect`.
 */
export interface BucketProcess {
  endpoint: string;
  bucket: string;
  pid: number;
  /** Ends the process and gives its peak RSS in MiB (null if it had already ended). */
  stop(): Promise<number | null>;
}

interface Ready {
  endpoint: string;
}

export function startBucketProcess(bucket: string): Promise<BucketProcess> {
  const child = fork(fileURLToPath(import.meta.url), [bucket], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const kill = () => child.kill('SIGKILL');
  process.once('exit', kill);
  const ended = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async (): Promise<number | null> => {
    const peak = new Promise<number | null>((resolve) => {
      child.once('message', (message: { peakRssKiB: number }) => resolve(message.peakRssKiB / 1024));
      void ended.then(() => resolve(null));
    });
    if (child.connected) child.send('peak');
    const mebibytes = await peak;
    kill();
    await ended;
    process.removeListener('exit', kill);
    return mebibytes;
  };
  return new Promise((resolve, reject) => {
    child.once('message', (message: Ready) => resolve({ endpoint: message.endpoint, bucket, pid: child.pid!, stop }));
    child.once('exit', (code, signal) =>
      reject(new Error(`the bucket process ended (${code ?? signal}) before it served`)),
    );
  });
}

async function serve(bucket: string): Promise<void> {
  // Imported only here: fauxqs needs node:sqlite (Node 22.5 and later).
  const { startFauxqs } = await import('fauxqs');
  const { startConditionalGateway } = await import('../test/support/s3-store.ts');
  const server = await startFauxqs({ port: 0, logger: false, host: '127.0.0.1' } as Parameters<typeof startFauxqs>[0]);
  server.createBucket(bucket);
  const gateway = await startConditionalGateway(server.address, { keyIndex: true });
  process.on('disconnect', () => process.exit(0));
  process.on('message', (message) => {
    if (message === 'peak') process.send!({ peakRssKiB: peakRssKiB() }, () => process.exit(0));
  });
  process.send!({ endpoint: gateway.endpoint } satisfies Ready);
}

if (import.meta.url === `file://${process.argv[1]}`) await serve(process.argv[2] ?? 'bench');
