/**
 * Content negotiation of a cached page's coding (RFC 9110 §12.5.3, docs/clients.md#content-coding): the
 * stored brotli bytes to a client that accepts `br`, a gzip body to one that accepts only `gzip`,
 * the upstream's identity bytes to everyone else, and never a coding the client did not accept.
 *
 * `Accept-Encoding` is a list of codings with optional weights (`br;q=0.8`); names are
 * case-insensitive, `x-gzip` is `gzip` (§8.4.1.3), and `*` stands for every coding the list does
 * not name. Identity is acceptable unless excluded (`identity;q=0`, or `*;q=0` without an identity
 * member); with no header at all the proxy sends identity, as the upstream would. A malformed
 * member is ignored. Among the acceptable codings the highest weight wins, and on a tie the smaller
 * body.
 */

/** Weights in thousandths (a qvalue has at most three decimals): 0 is "not acceptable". */
export interface CodingWeights {
  readonly br: number;
  readonly gzip: number;
  readonly identity: number;
}

export type Coding = 'br' | 'gzip' | 'identity';

const NO_HEADER: CodingWeights = { br: 0, gzip: 0, identity: 1000 };
/** `coding [ ; q=qvalue ]`, with the OWS the grammar allows around `;`. */
const MEMBER = /^([A-Za-z0-9!#$%&'*+.^_`|~-]+)[ \t]*(?:;[ \t]*[qQ]=(0(?:\.[0-9]{0,3})?|1(?:\.0{0,3})?))?$/;

export function parseAcceptEncoding(header: string): CodingWeights {
  const named = new Map<string, number>();
  for (const raw of header.split(',')) {
    const member = MEMBER.exec(raw.trim());
    if (member === null) continue;
    const name = (member[1] ?? '').toLowerCase();
    const weight = member[2] === undefined ? 1000 : Math.round(Number(member[2]) * 1000);
    named.set(name === 'x-gzip' ? 'gzip' : name, weight);
  }
  const star = named.get('*');
  return {
    br: named.get('br') ?? star ?? 0,
    gzip: named.get('gzip') ?? star ?? 0,
    identity: named.get('identity') ?? (star === 0 ? 0 : 1000),
  };
}

/** Header values repeat (each client library sends its own); each is parsed once. */
const parsed = new Map<string, CodingWeights>();
const MAX_REMEMBERED = 256;

function weightsOf(header: string | undefined): CodingWeights {
  if (header === undefined) return NO_HEADER;
  let weights = parsed.get(header);
  if (weights === undefined) {
    weights = parseAcceptEncoding(header);
    if (parsed.size >= MAX_REMEMBERED) parsed.clear();
    parsed.set(header, weights);
  }
  return weights;
}

/**
 * The coding to answer with, or `undefined` when the client accepts none that can be sent (406).
 * `compresses`: the page has a brotli body (compression pays); otherwise only identity and gzip are
 * on offer, identity first.
 */
const SMALLEST_FIRST: readonly Coding[] = ['br', 'gzip', 'identity'];
const UNCOMPRESSIBLE: readonly Coding[] = ['identity', 'gzip'];

export function chooseCoding(header: string | undefined, compresses: boolean): Coding | undefined {
  const weights = weightsOf(header);
  const offered = compresses ? SMALLEST_FIRST : UNCOMPRESSIBLE;
  let chosen: Coding | undefined;
  let best = 0;
  for (const coding of offered) {
    if (weights[coding] > best) {
      best = weights[coding];
      chosen = coding;
    }
  }
  return chosen;
}
