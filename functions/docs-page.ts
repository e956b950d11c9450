/**
 * The /docs page: the OpenAPI document rendered by Scalar's API reference from a CDN. The
 * document is embedded in the page, so the page needs no second (authenticated) request.
 */
export function renderDocsPage(document: unknown): string {
  const json = JSON.stringify(document).replace(/</g, '\\u003c');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tailgate API</title>
</head>
<body>
<noscript>This page renders the OpenAPI document with JavaScript; the raw document is at /openapi.json.</noscript>
<script id="api-reference" type="application/json">${json}</script>
<script src="https://cdn.jsdelivr.net/npm/@scalar/api-reference@1"></script>
</body>
</html>
`;
}
