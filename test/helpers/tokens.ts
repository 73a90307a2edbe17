/** Real JWTs for tests: development tokens, and hand-built ones for the attack list. */
import { type DevTokenOptions, mintDevToken } from '../../src/cli/dev-credentials.js';

export function token(options: Partial<DevTokenOptions> = {}): Promise<string> {
  return mintDevToken({ company: 1, ...options });
}

export function b64url(value: string | Buffer): string {
  return Buffer.from(value).toString('base64url');
}
