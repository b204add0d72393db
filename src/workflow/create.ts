/** The workflow part, wired from its settings: the gRPC channel pool every run's call to the workflow service is opened on. */
import type { Closables } from '../core/closables';
import { ChannelPool } from './channel-pool';
import type { WorkflowSettings } from './settings';

export function createChannelPool(settings: WorkflowSettings, deps: { closables: Closables }): ChannelPool {
  return deps.closables.add('channel pool', new ChannelPool(settings), (c) => c.close());
}
