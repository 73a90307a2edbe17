/**
 * HTTP helpers for tests. `send` writes the request line and headers exactly as given over a raw
 * socket, so tests can send what clients and attackers really send: duplicate headers,
 * absolute-form targets, `//` paths, fat GET bodies. Nothing is normalised on the way.
 */
import { connect } from 'node:net';

export interface RawResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  /** Every header line, in order, lower-cased names (to see duplicates). */
  readonly headerList: ReadonlyArray<readonly [string, string]>;
  readonly body: Buffer;
  readonly text: string;
  json(): unknown;
}

export interface SendOptions {
  readonly method?: string;
  /** Header lines as pairs, sent in order; duplicates allowed. */
  readonly headers?: ReadonlyArray<readonly [string, string]>;
  readonly body?: string;
  /** Leaves out the `Host` line `send` otherwise writes first. */
  readonly omitHost?: boolean;
  /** `HTTP/1.1` unless told. */
  readonly httpVersion?: '1.0' | '1.1';
}

function parseResponse(raw: Buffer, method: string): RawResponse {
  const split = raw.indexOf('\r\n\r\n');
  if (split === -1) throw new Error(`incomplete response: ${raw.toString('latin1').slice(0, 200)}`);
  const lines = raw.subarray(0, split).toString('latin1').split('\r\n');
  const status = Number(lines[0]?.split(' ')[1]);
  const headerList: Array<readonly [string, string]> = [];
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headerList.push([name, value]);
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
  }
  let body = raw.subarray(split + 4);
  if (headers['transfer-encoding']?.includes('chunked')) body = dechunk(body);
  else if (headers['content-length'] !== undefined && method !== 'HEAD')
    body = body.subarray(0, Number(headers['content-length']));
  if (method === 'HEAD' || status === 204 || status === 304) body = Buffer.alloc(0);
  const text = body.toString('utf8');
  return { status, headers, headerList, body, text, json: () => JSON.parse(text) as unknown };
}

function dechunk(body: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = body.indexOf('\r\n', at);
    if (lineEnd === -1) break;
    const size = Number.parseInt(body.subarray(at, lineEnd).toString('latin1'), 16);
    if (!(size > 0)) break;
    parts.push(body.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
  return Buffer.concat(parts);
}

/** Sends one request on a fresh connection (`Connection: close`) and reads the whole answer. */
export function send(baseUrl: string, target: string, options: SendOptions = {}): Promise<RawResponse> {
  const url = new URL(baseUrl);
  const method = options.method ?? 'GET';
  const headerLines = [
    ...(options.omitHost === true ? [] : [`Host: ${url.host}`]),
    ...(options.headers ?? []).map(([n, v]) => `${n}: ${v}`),
    'Connection: close',
  ];
  if (options.body !== undefined) headerLines.push(`Content-Length: ${Buffer.byteLength(options.body)}`);
  const head = `${method} ${target} HTTP/${options.httpVersion ?? '1.1'}\r\n${headerLines.join('\r\n')}\r\n\r\n`;
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname);
    const chunks: Buffer[] = [];
    socket.setTimeout(15_000, () => socket.destroy(new Error(`timeout: ${method} ${target}`)));
    socket.on('connect', () => socket.write(options.body === undefined ? head : head + options.body));
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      try {
        resolve(parseResponse(Buffer.concat(chunks), method));
      } catch (error) {
        reject(error instanceof Error ? error : new Error(String(error)));
      }
    });
  });
}

/** GET with a bearer token: the common case. */
export function getWithToken(
  baseUrl: string,
  target: string,
  token: string,
  extra: SendOptions = {},
): Promise<RawResponse> {
  return send(baseUrl, target, { ...extra, headers: [['Authorization', `Bearer ${token}`], ...(extra.headers ?? [])] });
}
