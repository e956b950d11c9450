import { createRouter } from '../router.ts';

/**
 * /metrics where no process counts (a Worker): a 404 that says so, answered before auth, so
 * that a scraper holding METRICS_TOKEN is not told its token is wrong; to every method, so that
 * no 405 names a GET that is this 404 (an `all` route: functions/allowed-methods.ts lists none).
 * Apart from routes/metrics.ts, which the Worker's bundle leaves out (the Node and Deno servers'
 * metrics, functions/metrics.ts, bring it).
 */
export function noMetricsRoute() {
  return createRouter().all('/metrics', (c) =>
    c.json(
      {
        error: {
          code: 'not_found',
          message:
            'a Worker serves no /metrics: it keeps no process to count in; each turn is one JSON log line ' +
            '(Workers Logs, wrangler tail; docs/API.md, "Metrics and logs")',
        },
      },
      404,
    ),
  );
}
