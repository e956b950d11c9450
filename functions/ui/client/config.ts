/**
 * A session's strategies and thresholds: edited with a live /prompt preview, saved with PATCH,
 * which needs `admin`. A token without it is told so above the fields, which then only preview.
 */
import { api, sessionPath } from './api.ts';
import { $, el } from './dom.ts';
import { countsText } from './format.ts';
import { may } from './token.ts';
import { report, Unauthorized } from './view.ts';

const THRESHOLDS = [
  'epoch_tool_call_threshold',
  'epoch_full_tool_calls',
  'epoch_compacted_tool_calls',
  'epoch_size',
  'full_tool_calls',
  'full_tool_outputs',
  'max_tool_calls',
  'max_tool_outputs',
];

let previewTimer: ReturnType<typeof setTimeout> | undefined;
/** Saves pressed so far: a preview asked before the last one leaves the save's message in place. */
let saves = 0;

export function renderConfig(id: string, session: any): void {
  const savable = may('admin');
  $('config-save').hidden = !savable;
  $('config-readonly').hidden = savable;
  // The note describes every field while it shows (a hidden one would still be read out).
  const described: Record<string, string> = savable ? {} : { 'aria-describedby': 'config-readonly' };
  const strategies = $<HTMLInputElement>('config-strategies');
  if (savable) strategies.removeAttribute('aria-describedby');
  else strategies.setAttribute('aria-describedby', 'config-readonly');
  strategies.value = (session.strategies ?? []).join(',');
  const keys = [...new Set([...THRESHOLDS, ...Object.keys(session.strategy_config ?? {})])];
  $('config-thresholds').replaceChildren(
    ...keys.map((key) =>
      el(
        'div',
        { class: 'field' },
        el('label', { for: `threshold-${key}` }, key),
        el('input', {
          id: `threshold-${key}`,
          'data-key': key,
          type: 'number',
          min: '0',
          step: '1',
          value: session.strategy_config?.[key] === undefined ? '' : String(session.strategy_config[key]),
          placeholder: 'default',
          ...described,
        }),
      ),
    ),
  );
  const form = $('config-form');
  form.oninput = () => {
    clearTimeout(previewTimer);
    previewTimer = setTimeout(() => void preview(id).catch(report), 150);
  };
  form.onsubmit = async (event) => {
    event.preventDefault();
    // Enter in a field submits the form even with Save hidden: a token that cannot save sends nothing.
    if (!savable) return;
    saves++;
    clearTimeout(previewTimer);
    try {
      const { strategies, strategy_config } = configValues();
      const saved = await api(sessionPath(id), {
        method: 'PATCH',
        body: JSON.stringify({ strategies: strategies || null, strategy_config }),
      });
      $('session-counts').textContent = countsText(saved);
      $('config-status').textContent = 'Saved.';
    } catch (error) {
      if (error instanceof Unauthorized) return;
      $('config-status').textContent = `Not saved: ${error instanceof Error ? error.message : String(error)}`;
    }
  };
  void preview(id).catch(report);
}

function configValues(): { strategies: string; strategy_config: Record<string, number> } {
  const config: Record<string, number> = {};
  for (const input of $('config-thresholds').querySelectorAll('input')) {
    const value = (input as HTMLInputElement).value.trim();
    if (value !== '') config[input.getAttribute('data-key')!] = Number(value);
  }
  return { strategies: $<HTMLInputElement>('config-strategies').value.trim(), strategy_config: config };
}

/** The counts of the prompt the form's values would give (GET .../prompt, nothing written). */
export async function preview(id: string): Promise<void> {
  const { strategies, strategy_config } = configValues();
  const query = new URLSearchParams({ strategy_config: JSON.stringify(strategy_config) });
  if (strategies) query.set('strategies', strategies);
  const asked = saves;
  const say = (text: string) => {
    if (saves === asked) $('config-status').textContent = text;
  };
  try {
    const { context } = await api(sessionPath(id, `/prompt?${query}`));
    const rows: [string, unknown][] = [
      ['Items in prompt', context.items_in_prompt],
      ['Prompt chars', context.prompt_chars],
      ['Tool calls', context.tool_calls_total],
      ['Kept whole', context.kept_full],
      ['Compacted', context.compacted],
      ['Dropped', context.dropped],
    ];
    $('preview-counts').replaceChildren(
      ...rows.flatMap(([name, value]) => [el('dt', {}, name), el('dd', { 'data-count': name }, String(value))]),
    );
    say('');
  } catch (error) {
    if (error instanceof Unauthorized) return;
    say(`Preview: ${error instanceof Error ? error.message : String(error)}`);
  }
}
