/**
 * The `Host` header, checked before anything else reads the request (RFC 9112 §3.2): a server
 * MUST answer 400 to an HTTP/1.1 request without one, with more than one, or with an invalid
 * value. Node's parser keeps both of two `Host` lines, and its own check for a missing one
 * (`requireHostHeader`) answers a bare 400 without a body; the servers turn that check off and
 * answer all three here, as problem+json.
 */
import type { IncomingMessage } from 'node:http';
import { InvalidRequestError } from '../errors/proxy-error.js';
import { fieldLines } from './raw-headers.js';

/**
 * `uri-host [ ":" port ]` (RFC 9110 §7.2, RFC 3986 §3.2.2): an IP literal in brackets, or a
 * reg-name (IPv4 addresses included) of unreserved characters, sub-delims and percent-escapes.
 * Empty is allowed: it is what a client sends for a target URI without an authority.
 */
const HOST = /^(?:\[[0-9A-Za-z._~!$&'()*+,;=:-]+\]|(?:[A-Za-z0-9._~!$&'()*+,;=-]|%[0-9A-Fa-f]{2})*)(?::[0-9]*)?$/;

/** The 400 this request's Host header deserves, or `undefined` when it is fine. */
export function hostHeaderProblem(req: IncomingMessage): InvalidRequestError | undefined {
  const hosts = fieldLines(req, 'host');
  if (hosts === undefined) {
    // HTTP/1.0 has no Host requirement.
    return req.httpVersionMajor === 1 && req.httpVersionMinor === 0
      ? undefined
      : new InvalidRequestError('The request has no Host header.');
  }
  if (hosts.length !== 1) return new InvalidRequestError('The request has more than one Host header.');
  const host = hosts[0];
  return host !== undefined && HOST.test(host)
    ? undefined
    : new InvalidRequestError('The Host header is not a valid host.');
}
