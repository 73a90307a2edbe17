/** Every part a running replica holds, by owner: what the planes, the metrics and the lifecycle read. */
import type { OperatorControl } from '../control/operator-control.js';
import type { ConfigInForce } from './config-in-force.js';
import type { CredentialParts } from './credentials.js';
import type { Foundation } from './foundation.js';
import type { ReplicaLifecycle } from './lifecycle.js';
import type { OperatorAccess } from './operator-access.js';
import type { ReadParts } from './reads.js';
import type { SharedParts } from './shared.js';
import type { UpstreamParts } from './upstream.js';

export interface ReplicaParts {
  readonly foundation: Foundation;
  /** Who may call the operator API: the admin token, the change feed's tokens. */
  readonly access: OperatorAccess;
  readonly lifecycle: ReplicaLifecycle;
  readonly configInForce: ConfigInForce;
  readonly shared: SharedParts;
  readonly control: OperatorControl;
  readonly credentials: CredentialParts;
  readonly upstream: UpstreamParts;
  readonly reads: ReadParts;
}
