import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { InvalidRequestError, PayloadTooLargeError, TailgateError } from '../lib/errors.ts';
import { errorBody } from './error-handler.ts';
import { newRequestId, REQUEST_ID_HEADER } from './request-id.ts';
import { OPENAI_PATH, openaiErrorBody } from './routes/openai/errors.ts';

/** What node:http passes to a server's `clientError` listener. */
interface ClientError extends Error {
  code?: string;
}

/** The socket of a `clientError`: its in-flight response, if a request of it is being answered. */
interface ClientSocket extends Duplex {
  _httpMessage?: { headersSent?: boolean } | null;
}

/**
 * The answer of the Node and Deno servers (node:http) to bytes that are no HTTP request, or a
 * request the parser refused, which never reach the service: in the API's error JSON
 * (docs/API.md, Errors) where Node's own answer is a bare status line. A 400 `invalid_request`
 * naming the parser's reason, e.g. the bytes after a body its `Content-Length` cut short,
 * parsed as the next request; 431 `headers_too_large` for headers over the parser's limit, 413
 * `payload_too_large` for chunk extensions over it; `408 Request Timeout` stays without a body (HEADERS_TIMEOUT_MS,
 * REQUEST_TIMEOUT_MS: the request never arrived). Each carries a fresh `x-request-id`, as the
 * app's answers do. As Node does, nothing is written once a response of the connection has
 * begun (it would corrupt it), and the connection is closed.
 */
export function answerClientError(error: ClientError, socket: ClientSocket): void {
  if (socket.writable && !socket._httpMessage?.headersSent) socket.write(clientErrorResponse(error));
  socket.destroy(error);
}

export function clientErrorResponse(error: ClientError): string {
  const id = `${REQUEST_ID_HEADER}: ${newRequestId()}\r\n`;
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT')
    return `HTTP/1.1 408 Request Timeout\r\n${id}Connection: close\r\n\r\n`;
  const reason = error.message.replace(/\s+/g, ' ').trim() || 'unreadable request';
  const details = { reason: error.code ?? null };
  let refused: TailgateError;
  let status = '400 Bad Request';
  if (error.code === 'HPE_HEADER_OVERFLOW') {
    status = '431 Request Header Fields Too Large';
    refused = new TailgateError('headers_too_large', `the request's headers are too large (${reason})`, details);
  } else if (error.code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW') {
    status = '413 Payload Too Large';
    refused = new PayloadTooLargeError(`the request's chunk extensions are too large (${reason})`, details);
  } else {
    refused = new InvalidRequestError(
      `malformed HTTP request (${reason}); a body longer than its Content-Length is read as a next request`,
      details,
    );
  }
  const body = JSON.stringify(errorBody(refused).body);
  return (
    `HTTP/1.1 ${status}\r\nContent-Type: application/json\r\n${id}` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  );
}

/**
 * The answer of the Node and Deno servers to a request whose `Expect` is other than
 * `100-continue` (node:http's `checkExpectation`, whose own answer is a bare 417): a 417
 * `expectation_failed` in the API's error JSON (OpenAI's shape on the OpenAI-compatible paths,
 * as their other errors), the request not run, the connection closed.
 */
export function answerExpectation(request: IncomingMessage, response: ServerResponse): void {
  const expectation = request.headers.expect ?? '';
  const refused = new TailgateError(
    'expectation_failed',
    `Expect: ${expectation} cannot be met: only 100-continue is taken`,
    { expect: expectation },
  );
  const body = JSON.stringify(
    OPENAI_PATH.test(pathOf(request.url)) ? openaiErrorBody(refused, console.error).body : errorBody(refused).body,
  );
  response.writeHead(417, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    [REQUEST_ID_HEADER]: newRequestId(),
    connection: 'close',
  });
  response.end(body);
}

/** The path of a request target (origin or absolute form), or '' for one that is no URL. */
function pathOf(target = ''): string {
  try {
    return new URL(target, 'http://localhost').pathname;
  } catch {
    return '';
  }
}
