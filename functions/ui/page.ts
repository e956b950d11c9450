/**
 * The inspector's HTML shell, the same for every request but for whether the API needs a token
 * (functions/ui/routes.ts marks its `<body>`). It holds no session data: the script (/ui/app.js)
 * fetches everything with the bearer token kept in sessionStorage, so the page itself is public
 * and every byte of data goes through the API's auth. Plain HTML (no JSX), so that Node runs this file as it is.
 */
/** The page's icon (/ui/favicon.svg): a white T on the header's blue. */
export const INSPECTOR_FAVICON =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#12355b"/>' +
  '<path d="M3.5 3.5h9v2.2H9.1V13H6.9V5.7H3.5z" fill="#ffffff"/></svg>';

export const INSPECTOR_PAGE = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>tailgate inspector</title>
    <link rel="icon" href="/ui/favicon.svg" type="image/svg+xml" />
    <link rel="stylesheet" href="/ui/app.css" />
  </head>
  <body>
    <header class="top">
      <h1>
        <a href="#/">tailgate inspector</a>
      </h1>
      <button type="button" id="sign-out" hidden>
        Forget token
      </button>
    </header>
    <main id="main">
      <p id="live-state" class="error row" role="status" hidden>
        <span id="live-message"></span>
        <button type="button" id="live-retry">Retry now</button>
      </p>
      <section id="token-view" hidden aria-labelledby="token-title">
        <h2 id="token-title">Sign in</h2>
        <p>
          The API needs a bearer token: enter API_TOKEN or a scoped token. It is kept in this tab's session storage
          only.
        </p>
        <p id="token-error" class="error" role="alert" hidden></p>
        <form id="token-form">
          <label for="token-input">Bearer token</label>
          <input id="token-input" name="token" type="password" autocomplete="off" required />
          <button type="submit">Use token</button>
        </form>
      </section>
      <section id="list-view" hidden aria-labelledby="list-title">
        <h2 id="list-title">Sessions</h2>
        <form id="search-form" class="row">
          <label for="search-input">Search by id</label>
          <input id="search-input" type="search" autocomplete="off" />
          <button type="submit">Open</button>
          <button type="button" id="new-session">
            New session
          </button>
        </form>
        <table id="session-table">
          <caption class="visually-hidden">Sessions by id</caption>
          <thead>
            <tr>
              <th scope="col">Id</th>
              <th scope="col">Items</th>
              <th scope="col">Turns</th>
              <th scope="col">Tool calls</th>
              <th scope="col">Cost</th>
              <th scope="col">Last activity</th>
            </tr>
          </thead>
          <tbody></tbody>
        </table>
        <p id="list-more" class="muted" aria-live="polite"></p>
      </section>
      <section id="session-view" hidden aria-labelledby="session-title">
        <h2 id="session-title">Session</h2>
        <div id="session-body">
          <p id="session-counts" class="muted"></p>
          <div id="session-budget-box"></div>
          <div id="session-lineage"></div>
          <div id="session-forks"></div>
          <div class="columns">
            <div class="timeline-column">
              <section aria-labelledby="chart-title">
                <h3 id="chart-title">Prompt size and reused prefix by turn</h3>
                <div id="strip-chart"></div>
              </section>
              <section aria-labelledby="cost-title">
                <h3 id="cost-title">Cost (green) and cache-read share of the input (blue) by turn</h3>
                <div id="cost-chart"></div>
              </section>
              <section id="queue-section" aria-labelledby="queue-title">
                <h3 id="queue-title" tabindex="-1">Queued inputs, next first</h3>
                <p id="queue-held" role="status"></p>
                <ol id="queue-list"></ol>
                <p id="queue-empty" class="muted" aria-live="polite"></p>
                <p id="queue-status" role="status"></p>
              </section>
              <section aria-labelledby="timeline-title">
                <h3 id="timeline-title">Turns, newest first</h3>
                <ol id="timeline" class="timeline"></ol>
                <p id="timeline-more" class="muted" aria-live="polite"></p>
              </section>
            </div>
            <section id="chat-section" aria-labelledby="chat-title">
              <h3 id="chat-title">Take a turn</h3>
              <form id="chat-form">
                <label for="chat-input">Input</label>
                <textarea id="chat-input" rows="3" aria-describedby="chat-keys"></textarea>
                <p id="chat-keys" class="muted hint">
                  Ctrl+Enter sends; paste an image (PNG, JPEG, GIF or WebP) to attach it.
                </p>
                <div class="row">
                  <label for="chat-image">Image</label>
                  <input id="chat-image" type="file" accept="image/png,image/jpeg,image/gif,image/webp" />
                  <button type="submit" id="chat-send">Send (streamed)</button>
                </div>
                <p id="chat-attached" class="row"></p>
                <p id="chat-image-error" class="error" role="alert" hidden></p>
              </form>
              <pre id="chat-output" aria-live="polite"></pre>
            </section>
            <aside class="side-column">
              <section id="inbox-section" aria-labelledby="inbox-title">
                <h3 id="inbox-title">Inbox</h3>
                <form id="notice-form">
                  <label for="notice-name">Name</label>
                  <input id="notice-name" autocomplete="off" placeholder="0001-note.md" />
                  <label for="notice-content">Notice</label>
                  <textarea id="notice-content" rows="2" required></textarea>
                  <button type="submit">Post notice</button>
                </form>
                <form id="abort-form" class="row">
                  <label for="abort-reason">Abort reason</label>
                  <input id="abort-reason" autocomplete="off" value="stopped from the inspector" />
                  <button type="submit" class="danger">
                    Abort next turn
                  </button>
                </form>
                <p id="inbox-status" aria-live="polite"></p>
                <h4>Pending</h4>
                <ul id="inbox-pending"></ul>
                <p id="inbox-pending-more"></p>
                <h4>Delivered</h4>
                <ul id="inbox-delivered"></ul>
                <p id="inbox-delivered-more"></p>
              </section>
              <section aria-labelledby="config-title">
                <h3 id="config-title">Strategies and thresholds</h3>
                <form id="config-form">
                  <p id="config-readonly" class="muted hint" hidden>
                    This token cannot save these settings (saving needs the admin scope): what you change here only
                    previews the prompt.
                  </p>
                  <label for="config-strategies">Strategies (comma-separated)</label>
                  <input id="config-strategies" autocomplete="off" placeholder="default" />
                  <div id="config-thresholds"></div>
                  <button type="submit" id="config-save">Save (PATCH)</button>
                </form>
                <p id="config-status" aria-live="polite"></p>
                <dl id="preview-counts" class="counts"></dl>
              </section>
            </aside>
          </div>
        </div>
      </section>
      <p id="status" role="status" aria-live="polite"></p>
    </main>
    <script src="/ui/app.js" defer></script>
  </body>
</html>
`;
