/**
 * The process's metrics in the Prometheus text format (version 0.0.4), counted in memory by the
 * Node and Deno servers and served at GET /metrics (functions/routes/metrics.ts). Each process
 * counts its own; a restart starts from zero, as Prometheus counters may.
 */
import type { Context } from 'hono';
import type { RuntimeEnvironment } from './router.ts';
import { metricsRoutes, metricsTokenRoute } from './routes/metrics.ts';

/** Seconds: a turn's duration and its time to first output. */
const SECONDS_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

type Labels = Record<string, string>;

interface Family {
  help: string;
  type: 'counter' | 'histogram';
  /** By the family's label text (`{a="1",b="2"}`). */
  series: Map<string, number | Histogram>;
}

interface Histogram {
  buckets: number[];
  sum: number;
  count: number;
}

const FAMILIES: Record<string, Pick<Family, 'help' | 'type'>> = {
  tailgate_turns_total: { help: 'Turns by how they ended and their model.', type: 'counter' },
  tailgate_turn_errors_total: {
    help: 'Refused and failed turns by error code (rate_limited included).',
    type: 'counter',
  },
  tailgate_turn_duration_seconds: { help: 'Turns from their request to their answer.', type: 'histogram' },
  tailgate_turn_time_to_first_token_seconds: {
    help: 'Streamed and background turns from their start to their first output.',
    type: 'histogram',
  },
  tailgate_storage_operations_total: { help: 'Object store operations by kind.', type: 'counter' },
  tailgate_tokens_total: {
    help: 'Tokens of model calls (completed turns, compaction summaries) by kind, model and source.',
    type: 'counter',
  },
  tailgate_cost_usd_total: {
    help: 'USD of model calls with a known price (completed turns, compaction summaries), by model and source.',
    type: 'counter',
  },
};

export type MetricName = keyof typeof FAMILIES;

function escapeLabel(value: string): string {
  return value.replaceAll('\\', '\\\\').replaceAll('"', '\\"').replaceAll('\n', '\\n');
}

function labelText(labels: Labels): string {
  const pairs = Object.entries(labels).map(([name, value]) => `${name}="${escapeLabel(value)}"`);
  return pairs.length === 0 ? '' : `{${pairs.join(',')}}`;
}

/** Adds `le` to a label text. */
function withBucket(text: string, bound: string): string {
  return text === '' ? `{le="${bound}"}` : `${text.slice(0, -1)},le="${bound}"}`;
}

/**
 * A sample's value: whole numbers as they are, others to 12 significant digits, so a sum of
 * floats prints 0.013, not 0.013000000000000001 (the noise of binary addition, not a measure).
 */
function sampleText(value: number): string {
  return String(Number.isInteger(value) ? value : Number(value.toPrecision(12)));
}

/**
 * How many models the `model` label names. A request names its model, and a provider that
 * refuses an unknown one still fails a turn under that name: without a bound, a client could
 * add series (memory, and lines of every scrape) with every name it makes up. Models beyond the
 * first this many seen are counted as `other`.
 */
export const MAX_MODEL_LABELS = 100;

export class Metrics {
  private readonly families = new Map<string, Family>();
  private readonly models = new Set<string>();

  /** `model` as the `model` label writes it: itself, or `other` once MAX_MODEL_LABELS others are named. */
  modelLabel(model: string): string {
    if (this.models.has(model)) return model;
    if (this.models.size >= MAX_MODEL_LABELS) return 'other';
    this.models.add(model);
    return model;
  }

  /** Adds `by` to a counter. */
  count(name: MetricName, labels: Labels, by = 1): void {
    const series = this.family(name).series;
    const key = labelText(labels);
    series.set(key, ((series.get(key) as number | undefined) ?? 0) + by);
  }

  /** Records one value of a histogram. */
  observe(name: MetricName, labels: Labels, value: number): void {
    const series = this.family(name).series;
    const key = labelText(labels);
    let histogram = series.get(key) as Histogram | undefined;
    if (!histogram) {
      histogram = { buckets: SECONDS_BUCKETS.map(() => 0), sum: 0, count: 0 };
      series.set(key, histogram);
    }
    SECONDS_BUCKETS.forEach((bound, index) => {
      if (value <= bound) histogram.buckets[index]! += 1;
    });
    histogram.sum += value;
    histogram.count += 1;
  }

  /**
   * GET /metrics for an admin token, the route of /openapi.json (functions/routes/metrics.ts).
   * createApp registers these routes from the metrics it is given, so that the Workers entry,
   * which keeps none, leaves them out of its bundle.
   */
  routes(): ReturnType<typeof metricsRoutes> {
    return metricsRoutes(this);
  }

  /** GET /metrics for the METRICS_TOKEN, answered before auth (functions/routes/metrics.ts). */
  tokenRoute(readEnvironment: (c: Context) => RuntimeEnvironment): ReturnType<typeof metricsTokenRoute> {
    return metricsTokenRoute(this, readEnvironment);
  }

  /** Every family counted so far, as Prometheus text. */
  render(): string {
    const lines: string[] = [];
    for (const [name, family] of this.families) {
      lines.push(`# HELP ${name} ${family.help}`, `# TYPE ${name} ${family.type}`);
      for (const [labels, value] of family.series) {
        if (typeof value === 'number') {
          lines.push(`${name}${labels} ${sampleText(value)}`);
          continue;
        }
        SECONDS_BUCKETS.forEach((bound, index) => {
          lines.push(`${name}_bucket${withBucket(labels, String(bound))} ${value.buckets[index]}`);
        });
        lines.push(`${name}_bucket${withBucket(labels, '+Inf')} ${value.count}`);
        lines.push(`${name}_sum${labels} ${sampleText(value.sum)}`, `${name}_count${labels} ${value.count}`);
      }
    }
    return `${lines.join('\n')}\n`;
  }

  private family(name: MetricName): Family {
    let family = this.families.get(name);
    if (!family) {
      family = { ...FAMILIES[name]!, series: new Map() };
      this.families.set(name, family);
    }
    return family;
  }
}
