/**
 * The inspector's browser script, served as /ui/app.js (its source text, so it must not
 * reference anything outside itself). It renders into the server-rendered shell of
 * page.ts with plain DOM calls: the API is the state, every view is a fetch away.
 *
 * - The bearer token lives in sessionStorage and goes in the Authorization header, never in
 *   a URL; a 401 shows the token form.
 * - Lists load a page at a time as the end of the list scrolls into view
 *   (IntersectionObserver): sessions, turns, and a turn's items. Nothing loads a whole history.
 */
export function inspectorClient(): void {
  const TOKEN_KEY = 'tailgate.token';
  const PAGE = 30;
  const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;

  class Unauthorized extends Error {}

  async function api(path: string, init: RequestInit = {}): Promise<any> {
    const headers = new Headers(init.headers);
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.set('authorization', `Bearer ${token}`);
    if (init.body !== undefined) headers.set('content-type', 'application/json');
    const response = await fetch(path, { ...init, headers });
    if (response.status === 401) {
      showToken();
      throw new Unauthorized('unauthorized');
    }
    const text = await response.text();
    const body = text && (response.headers.get('content-type') ?? '').includes('json') ? JSON.parse(text) : text;
    if (!response.ok) throw new Error(body?.error?.message ?? `HTTP ${response.status}`);
    return body;
  }

  /** Appends nodes and text (Node.appendChild: the Workers types redefine Element.append). */
  function add(parent: Node, ...children: (Node | string | null)[]): void {
    for (const child of children)
      if (child !== null) parent.appendChild(typeof child === 'string' ? document.createTextNode(child) : child);
  }

  function el(
    tag: string,
    attributes: Record<string, string> = {},
    ...children: (Node | string | null)[]
  ): HTMLElement {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) {
      if (name === 'class') node.className = value;
      else node.setAttribute(name, value);
    }
    add(node, ...children);
    return node;
  }

  function status(message: string): void {
    $('status').textContent = message;
  }

  function report(error: unknown): void {
    if (error instanceof Unauthorized) return;
    status(error instanceof Error ? error.message : String(error));
  }

  /** Calls `load` whenever `sentinel` scrolls into view, until it returns false or is stopped. */
  function onScrollEnd(sentinel: HTMLElement, load: () => Promise<boolean>): () => void {
    let busy = false;
    let stopped = false;
    const observer = new IntersectionObserver(async (entries) => {
      if (!entries.some((entry) => entry.isIntersecting) || busy || stopped) return;
      busy = true;
      let more = false;
      try {
        more = await load();
      } catch (error) {
        report(error);
      } finally {
        busy = false;
      }
      if (!more || stopped) stop();
      else {
        // Still in view (a short page): ask again.
        observer.unobserve(sentinel);
        observer.observe(sentinel);
      }
    });
    const stop = () => {
      stopped = true;
      observer.disconnect();
    };
    observer.observe(sentinel);
    return stop;
  }

  let stopLoading: (() => void)[] = [];
  function show(view: 'token-view' | 'list-view' | 'session-view'): void {
    for (const id of ['token-view', 'list-view', 'session-view']) $(id).hidden = id !== view;
    $('sign-out').hidden = !sessionStorage.getItem(TOKEN_KEY);
  }

  function showToken(): void {
    for (const stop of stopLoading) stop();
    stopLoading = [];
    show('token-view');
    $('token-input').focus();
  }

  /**
   * Loads pages into `list` while `sentinel` scrolls into view: `fetchPage(cursor)` gives a
   * page's rows and the next cursor (null at the end).
   */
  function paged(
    list: HTMLElement,
    sentinel: HTMLElement,
    noun: string,
    fetchPage: (cursor: string | null) => Promise<{ rows: Node[]; next: string | null }>,
  ): void {
    list.replaceChildren();
    let cursor: string | null = null;
    sentinel.textContent = 'Loading…';
    stopLoading.push(
      onScrollEnd(sentinel, async () => {
        const page = await fetchPage(cursor);
        add(list, ...page.rows);
        cursor = page.next;
        sentinel.textContent = cursor === null ? `${list.children.length} ${noun}` : `Scroll for more ${noun}…`;
        return cursor !== null;
      }),
    );
  }

  // ---- sessions list ----
  function listSessions(): void {
    show('list-view');
    paged($('session-table').querySelector('tbody')!, $('list-more'), 'sessions', async (after) => {
      const page = await api(`/v1/sessions?limit=${PAGE}${after ? `&after=${encodeURIComponent(after)}` : ''}`);
      const rows = page.sessions.map((session: any) => {
        const counts = session.counts ?? { items: '', turns: '', tool_calls: '' };
        const row = el(
          'tr',
          { 'data-id': session.id },
          el('td', {}, el('a', { href: `#/s/${encodeURIComponent(session.id)}` }, session.id)),
          el('td', {}, String(counts.items)),
          el('td', {}, String(counts.turns)),
          el('td', {}, String(counts.tool_calls)),
          el('td', {}, session.last_activity_at ? new Date(session.last_activity_at).toLocaleString() : ''),
        );
        row.hidden = !matchesSearch(session.id);
        return row;
      });
      return { rows, next: page.has_more ? page.next_after : null };
    });
  }

  function matchesSearch(id: string): boolean {
    const query = $<HTMLInputElement>('search-input').value.trim();
    return query === '' || id.includes(query);
  }

  function filterRows(): void {
    for (const row of $('session-table').querySelectorAll('tbody tr'))
      (row as HTMLElement).hidden = !matchesSearch(row.getAttribute('data-id') ?? '');
  }

  // ---- session view ----
  async function openSession(id: string): Promise<void> {
    show('session-view');
    $('session-title').textContent = `Session ${id}`;
    const session = await api(`/v1/sessions/${encodeURIComponent(id)}`);
    renderCounts(session);
    renderConfig(id, session);
    void refreshInbox(id).catch(report);
    loadTimeline(id);
  }

  function renderCounts(session: any): void {
    $('session-counts').textContent =
      `${session.counts.items} items · ${session.counts.turns} turns · ${session.counts.tool_calls} tool calls · ` +
      `model ${session.model ?? 'default'}${usageText(session.usage)}${tokensText(session.usage)}`;
  }

  /** A session's totals by token kind, with the completed turns they count. */
  function tokensText(usage: any): string {
    if (!usage) return '';
    return (
      ` · ${usage.turns} completed turns: ${usage.input_tokens} input tokens ` +
      `(${usage.cached_input_tokens} cached, ${usage.cache_write_tokens} written to cache), ` +
      `${usage.output_tokens} output (${usage.reasoning_tokens} reasoning)`
    );
  }

  /** Cost and cache-read share of a turn's or a session's usage, for a summary line. */
  function usageText(usage: any): string {
    if (!usage) return '';
    const cost = usage.cost_usd === null ? 'cost unknown' : `$${usage.cost_usd.toFixed(6)}`;
    const share = usage.input_tokens > 0 ? Math.round((100 * usage.cached_input_tokens) / usage.input_tokens) : 0;
    return ` · ${cost} · ${share}% cache read`;
  }

  const chartTurns: any[] = [];
  function loadTimeline(id: string): void {
    chartTurns.length = 0;
    renderChart();
    paged($('timeline'), $('timeline-more'), 'turns', async (before) => {
      const page = await api(
        `/v1/sessions/${encodeURIComponent(id)}/turns?limit=${PAGE}${before ? `&before=${before}` : ''}`,
      );
      chartTurns.push(...page.turns);
      renderChart();
      renderCostChart();
      return {
        rows: page.turns.map((turn: any) => el('li', {}, turnEntry(id, turn))),
        next: page.has_more ? String(page.next_before) : null,
      };
    });
  }

  function renderChart(): void {
    const turns = [...chartTurns].reverse();
    const box = $('strip-chart');
    if (turns.length === 0) {
      box.replaceChildren(el('p', { class: 'muted' }, 'No turns yet.'));
      return;
    }
    const width = 6;
    const height = 80;
    const max = Math.max(1, ...turns.map((turn) => turn.context?.prompt_chars ?? 0));
    const ns = 'http://www.w3.org/2000/svg';
    const svg = document.createElementNS(ns, 'svg');
    svg.setAttribute('viewBox', `0 0 ${turns.length * width} ${height}`);
    svg.setAttribute('preserveAspectRatio', 'none');
    svg.setAttribute('role', 'img');
    const epochs = turns.filter(
      (turn, index) =>
        index > 0 &&
        turn.prefix_reused_chars !== null &&
        turn.prefix_reused_chars < (turns[index - 1].context?.prompt_chars ?? 0),
    ).length;
    svg.setAttribute(
      'aria-label',
      `Prompt size of ${turns.length} turns (grey) and the part reused from the previous turn (blue); ${epochs} ` +
        `turns reused less than the previous prompt.`,
    );
    turns.forEach((turn, index) => {
      const size = turn.context?.prompt_chars ?? 0;
      const reused = Math.min(size, turn.prefix_reused_chars ?? 0);
      const total = document.createElementNS(ns, 'rect');
      const h = (size / max) * height;
      total.setAttribute('x', String(index * width));
      total.setAttribute('y', String(height - h));
      total.setAttribute('width', String(width - 1));
      total.setAttribute('height', String(h));
      total.setAttribute('class', 'bar-total');
      const title = document.createElementNS(ns, 'title');
      title.textContent = `turn ${turn.turn}: ${size} chars, ${reused} reused`;
      add(total, title);
      const part = document.createElementNS(ns, 'rect');
      const r = (reused / max) * height;
      part.setAttribute('x', String(index * width));
      part.setAttribute('y', String(height - r));
      part.setAttribute('width', String(width - 1));
      part.setAttribute('height', String(r));
      part.setAttribute('class', 'bar-reused');
      add(svg, total, part);
    });
    box.replaceChildren(svg);
  }

  /** One bar per turn: its cost against the costliest (green), its input's cache-read share (blue). */
  function renderCostChart(): void {
    const turns = [...chartTurns].reverse();
    const height = 60;
    const max = Math.max(1e-12, ...turns.map((turn) => turn.usage?.cost_usd ?? 0));
    const ns = 'http://www.w3.org/2000/svg';
    const svg = document.createElementNS(ns, 'svg');
    svg.setAttribute('viewBox', `0 0 ${Math.max(1, turns.length) * 6} ${height}`);
    svg.setAttribute('preserveAspectRatio', 'none');
    svg.setAttribute('role', 'img');
    svg.setAttribute('aria-label', `Cost and cache-read share of ${turns.length} turns`);
    const bar = (index: number, fraction: number, kind: string, text: string) => {
      const rect = document.createElementNS(ns, 'rect');
      for (const [name, value] of Object.entries({ x: index * 6, y: height * (1 - fraction), width: 2.5 }))
        rect.setAttribute(name, String(kind === 'bar-cache' && name === 'x' ? value + 3 : value));
      rect.setAttribute('height', String(height * fraction));
      rect.setAttribute('class', kind);
      const title = document.createElementNS(ns, 'title');
      title.textContent = text;
      add(rect, title);
      add(svg, rect);
    };
    turns.forEach((turn, index) => {
      const usage = turn.usage;
      if (!usage) return;
      const text = `turn ${turn.turn}${usageText(usage)}`;
      bar(index, usage.cost_usd === null ? 0 : usage.cost_usd / max, 'bar-cost', text);
      bar(index, usage.input_tokens > 0 ? usage.cached_input_tokens / usage.input_tokens : 0, 'bar-cache', text);
    });
    $('cost-chart').replaceChildren(svg);
  }

  function share(turn: any): string {
    const size = turn.context?.prompt_chars;
    if (!size || turn.prefix_reused_chars === null) return '';
    return ` · ${Math.round((100 * turn.prefix_reused_chars) / size)}% reused`;
  }

  function turnEntry(id: string, turn: any): HTMLElement {
    const details = el('details', { class: `turn status-${turn.status}`, 'data-turn': String(turn.turn) });
    const summary = el(
      'summary',
      {},
      `Turn ${turn.turn} · ${turn.status} · ${turn.model ?? ''} · ${turn.context?.prompt_chars ?? '?'} ` +
        `chars${share(turn)}${usageText(turn.usage)}`,
      turn.notices.length > 0 ? el('span', { class: 'mark inbox-mark' }, ` ${turn.notices.length} notice(s)`) : null,
      turn.error ? el('span', { class: 'mark error-mark' }, ` ${turn.error.code}`) : null,
    );
    add(details, summary);
    let loaded = false;
    details.addEventListener('toggle', () => {
      if (!details.hasAttribute('open') || loaded) return;
      loaded = true;
      void expandTurn(id, turn, details).catch(report);
    });
    return details;
  }

  async function expandTurn(id: string, turn: any, details: HTMLElement): Promise<void> {
    const base = `/v1/sessions/${encodeURIComponent(id)}`;
    const detail = await api(`${base}/turns/${turn.turn}`);
    const body = el('div', { class: 'turn-body' });
    add(details, body);
    const times = `${turn.started_at ?? '?'} → ${turn.completed_at ?? 'running'}`;
    add(
      body,
      el(
        'p',
        { class: 'muted' },
        `${times} · strategies ${turn.strategies.join(', ')}` +
          (turn.usage ? ` · ${turn.usage.input_tokens} in / ${turn.usage.output_tokens} out tokens` : ''),
      ),
    );
    if (turn.error) add(body, el('p', { class: 'error' }, `${turn.error.code}: ${turn.error.message}`));
    // Input and output: stored items by seq range.
    for (const [label, range] of [
      ['Input', turn.input],
      ['Output', turn.output],
    ] as const) {
      const section = el('section', { class: `turn-${label.toLowerCase()}` }, el('h4', {}, label));
      if (range) {
        const page = await api(
          `${base}/items?before=${range.last_seq + 1}&limit=${Math.min(100, range.last_seq - range.first_seq + 1)}`,
        );
        const items = el('ol', { class: 'items' });
        for (const item of [...page.items].reverse()) add(items, itemEntry(item));
        add(section, items);
      } else add(section, el('p', { class: 'muted' }, 'none'));
      add(body, section);
    }
    // What the model saw.
    const seen = el('section', { class: 'turn-seen' }, el('h4', {}, 'What the model saw'));
    add(body, seen);
    const receipt = detail.receipt;
    if (!receipt) {
      add(seen, el('p', { class: 'muted' }, 'No receipt: the turn ended before its prompt was built.'));
      return;
    }
    if (receipt.abort)
      add(
        seen,
        el('p', { class: 'mark error-mark' }, `Aborted by notice ${receipt.abort.name}: ${receipt.abort.reason}`),
      );
    const synthetic = el('ul', { class: 'synthetic' });
    for (const entry of receipt.synthetic) {
      const text =
        entry.synthetic === 'context_notice'
          ? `Context notice (position ${entry.index}): ${entry.content ?? ''}`
          : entry.synthetic === 'inbox'
            ? `Inbox notice ${entry.name ?? ''} (position ${entry.index}, ${entry.chars} chars)`
            : `Summary (position ${entry.index}, ${entry.chars} chars)`;
      add(synthetic, el('li', { class: `mark synthetic-${entry.synthetic}` }, text));
    }
    if (receipt.synthetic.length > 0) add(seen, synthetic);
    const runs = receipt.seen.map(
      (run: any) =>
        `${run.first_seq === run.last_seq ? run.first_seq : `${run.first_seq}-${run.last_seq}`} ${run.treatment}`,
    );
    add(seen, el('p', { class: 'muted runs' }, `Seqs: ${runs.join(', ')}`));
    const items = el('ol', { class: 'items' });
    const sentinel = el('p', { class: 'muted' }, 'Loading…');
    add(seen, items, sentinel);
    let before: number | null = null;
    const loadItems = async () => {
      const page = await api(`${base}/turns/${turn.turn}/items?limit=50${before ? `&before=${before}` : ''}`);
      for (const item of page.items) add(items, itemEntry(item));
      before = page.next_before;
      sentinel.textContent = page.has_more ? 'Scroll for older items…' : 'Start of the history.';
      return page.has_more as boolean;
    };
    // The newest page at once; older ones as the list's end scrolls into view.
    if (await loadItems()) stopLoading.push(onScrollEnd(sentinel, loadItems));
  }

  function itemText(item: any): string {
    if (item.type === 'message') return `${item.role}: ${item.content}`;
    if (item.type === 'function_call') return `call ${item.name}(${item.arguments})`;
    return `output ${item.call_id}: ${item.output}`;
  }

  function itemEntry(item: any): HTMLElement {
    const treatment = item.treatment ?? 'stored';
    const entry = el(
      'li',
      { class: `item treatment-${treatment}`, 'data-seq': String(item.seq) },
      el('span', { class: 'seq' }, `#${item.seq} ${treatment === 'stored' ? '' : treatment}`),
    );
    if (treatment !== 'compacted' || !item.compacted_as) {
      add(entry, el('pre', {}, itemText(item)));
      return entry;
    }
    const compactedText =
      item.type === 'function_call'
        ? `call ${item.name}(${item.compacted_as.arguments})`
        : `output ${item.call_id}: ${item.compacted_as.output}`;
    const stamp = /md5 ([0-9a-f]{5})/.exec(compactedText)?.[1];
    const shown = el('pre', { class: 'compacted-text' }, compactedText);
    const toggle = el(
      'button',
      { type: 'button', 'aria-pressed': 'false', class: 'toggle-original' },
      'Show stored original',
    );
    add(entry, el('span', { class: 'mark stamp' }, `stamp md5 ${stamp ?? '?'}`), toggle, shown);
    toggle.addEventListener('click', () => {
      const original = toggle.getAttribute('aria-pressed') !== 'true';
      toggle.setAttribute('aria-pressed', String(original));
      toggle.textContent = original ? 'Show what the model got' : 'Show stored original';
      shown.textContent = original ? itemText(item) : compactedText;
      shown.className = original ? 'original-text' : 'compacted-text';
    });
    return entry;
  }

  // ---- inbox ----
  async function refreshInbox(id: string): Promise<void> {
    const base = `/v1/sessions/${encodeURIComponent(id)}/inbox`;
    const [pending, delivered] = await Promise.all([api(base), api(`${base}/delivered`)]);
    $('inbox-pending').replaceChildren(
      ...pending.pending.map((notice: any) => el('li', {}, `${notice.name} (${notice.size} bytes)`)),
    );
    $('inbox-delivered').replaceChildren(
      ...delivered.delivered.map((notice: any) =>
        el(
          'li',
          {},
          `${notice.name} → turn ` +
            `${notice.turn ?? '?'}${notice.stored_as !== notice.name ? ` as ${notice.stored_as}` : ''}`,
        ),
      ),
    );
  }

  // ---- config and live preview ----
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
  function renderConfig(id: string, session: any): void {
    $<HTMLInputElement>('config-strategies').value = (session.strategies ?? []).join(',');
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
      try {
        const { strategies, strategy_config } = configValues();
        const saved = await api(`/v1/sessions/${encodeURIComponent(id)}`, {
          method: 'PATCH',
          body: JSON.stringify({ strategies: strategies || null, strategy_config }),
        });
        renderCounts(saved);
        $('config-status').textContent = 'Saved.';
      } catch (error) {
        report(error);
        $('config-status').textContent = error instanceof Error ? error.message : String(error);
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

  async function preview(id: string): Promise<void> {
    const { strategies, strategy_config } = configValues();
    const query = new URLSearchParams({ strategy_config: JSON.stringify(strategy_config) });
    if (strategies) query.set('strategies', strategies);
    const counts = $('preview-counts');
    try {
      const result = await api(`/v1/sessions/${encodeURIComponent(id)}/prompt?${query}`);
      const context = result.context;
      const rows: [string, unknown][] = [
        ['Items in prompt', context.items_in_prompt],
        ['Prompt chars', context.prompt_chars],
        ['Tool calls', context.tool_calls_total],
        ['Kept whole', context.kept_full],
        ['Compacted', context.compacted],
        ['Dropped', context.dropped],
      ];
      counts.replaceChildren(
        ...rows.flatMap(([name, value]) => [el('dt', {}, name), el('dd', { 'data-count': name }, String(value))]),
      );
      $('config-status').textContent = '';
    } catch (error) {
      if (error instanceof Unauthorized) return;
      $('config-status').textContent = `Preview: ${error instanceof Error ? error.message : String(error)}`;
    }
  }

  // ---- chat (SSE over fetch) ----
  async function takeTurn(id: string, input: string): Promise<void> {
    const out = $('chat-output');
    out.textContent = '';
    const token = sessionStorage.getItem(TOKEN_KEY);
    const response = await fetch(`/v1/sessions/${encodeURIComponent(id)}/turns`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'text/event-stream',
        ...(token ? { authorization: `Bearer ${token}` } : {}),
      },
      body: JSON.stringify({ input, stream: true }),
    });
    if (response.status === 401) return showToken();
    if (!response.ok || !response.body) {
      const body: any = await response.json().catch(() => null);
      out.textContent = `Refused: ${body?.error?.code ?? response.status} ${body?.error?.message ?? ''}`;
      return;
    }
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event = /^event: (.*)$/m.exec(frame)?.[1];
        const data = JSON.parse(/^data: (.*)$/m.exec(frame)?.[1] ?? 'null');
        if (event === 'output_text.delta') out.textContent += data.delta;
        else if (event === 'output_item.done' && data.item.type === 'function_call')
          out.textContent += `\ncall ${data.item.name}(${data.item.arguments})`;
        else if (event === 'turn.completed') out.textContent += `\n[turn ${data.turn} completed]`;
        else if (event === 'error') out.textContent += `\n[error ${data.error.code}: ${data.error.message}]`;
      }
    }
  }

  // ---- wiring ----
  function currentSession(): string | null {
    const match = /^#\/s\/(.+)$/.exec(location.hash);
    return match ? decodeURIComponent(match[1]!) : null;
  }

  function route(): void {
    for (const stop of stopLoading) stop();
    stopLoading = [];
    status('');
    const id = currentSession();
    if (id) void openSession(id).catch(report);
    else listSessions();
  }

  $('token-form').addEventListener('submit', (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $<HTMLInputElement>('token-input').value.trim());
    $<HTMLInputElement>('token-input').value = '';
    route();
  });
  $('sign-out').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY);
    route();
  });
  $('search-input').addEventListener('input', filterRows);
  $('search-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const query = $<HTMLInputElement>('search-input').value.trim();
    if (query) location.hash = `#/s/${encodeURIComponent(query)}`;
  });
  $('new-session').addEventListener('click', async () => {
    try {
      const created = await api('/v1/sessions', { method: 'POST', body: '{}' });
      location.hash = `#/s/${encodeURIComponent(created.id)}`;
    } catch (error) {
      report(error);
    }
  });
  $('chat-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const id = currentSession();
    const input = $<HTMLTextAreaElement>('chat-input').value;
    if (!id || !input.trim()) return;
    try {
      await takeTurn(id, input);
      $<HTMLTextAreaElement>('chat-input').value = '';
      await openSession(id);
    } catch (error) {
      report(error);
    }
  });
  $('notice-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const id = currentSession();
    if (!id) return;
    const name = $<HTMLInputElement>('notice-name').value.trim();
    try {
      await api(`/v1/sessions/${encodeURIComponent(id)}/inbox`, {
        method: 'POST',
        body: JSON.stringify({ content: $<HTMLTextAreaElement>('notice-content').value, ...(name ? { name } : {}) }),
      });
      $<HTMLTextAreaElement>('notice-content').value = '';
      $<HTMLInputElement>('notice-name').value = '';
      await refreshInbox(id);
      await preview(id);
    } catch (error) {
      report(error);
    }
  });
  $('abort-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const id = currentSession();
    if (!id) return;
    try {
      await api(`/v1/sessions/${encodeURIComponent(id)}/inbox`, {
        method: 'POST',
        body: JSON.stringify({ name: 'abort', content: $<HTMLInputElement>('abort-reason').value || 'aborted' }),
      });
      await refreshInbox(id);
      status('Abort posted: the next turn stops before calling the model.');
    } catch (error) {
      report(error);
    }
  });
  window.addEventListener('hashchange', route);
  route();
}
