/**
 * The baselines' bare grpc-js client of ExecuteWorkflow: no gateway, no HTTP, no lock —
 * open a stream, send the startRequest the gateway would send, wait for the first
 * action. Streams are spread over connections the way the gateway's channel pool spreads
 * them (streamsPerConnection per HTTP/2 connection, same channel options), so a
 * comparison measures the gateway's own cost, not a different connection layout.
 */
import * as grpc from '@grpc/grpc-js';
import { channelOptions } from '../../src/workflow/channel-pool';
import { duoWorkflowService, type Action, type ClientEvent, type StartWorkflowRequest } from '../../src/workflow/contract';

const method = duoWorkflowService['ExecuteWorkflow'] as grpc.MethodDefinition<ClientEvent, Action>;

// The gateway's own per-connection settings (its defaults), from its channel pool.
const options: grpc.ChannelOptions = channelOptions({});

/** The StartWorkflowRequest as the gateway sends it after the owner's preauth (docs/spec.md §3). */
export function startRequestFor(workflowId: string, workflowMetadata: string): StartWorkflowRequest {
  return {
    workflowID: workflowId,
    goal: 'bench',
    workflowMetadata,
    clientCapabilities: ['owner_capability'],
    mcpTools: [],
    preapproved_tools: [],
  };
}

export interface RawCall {
  stream: grpc.ClientDuplexStream<ClientEvent, Action>;
  /** Resolves on the first action; rejects if the call ends before one. */
  firstAction: Promise<void>;
}

/** Connections to one workflow service, filled streamsPerConnection at a time. */
export class RawClientPool {
  private readonly clients: Array<{ client: grpc.Client; streams: number }> = [];

  constructor(
    private readonly address: string,
    private readonly streamsPerConnection: number,
  ) {}

  /** Opens a call and sends the startRequest. */
  open(workflowId: string, workflowMetadata: string, token: string): RawCall {
    let slot = this.clients.find((c) => c.streams < this.streamsPerConnection);
    if (!slot) {
      slot = { client: new grpc.Client(this.address, grpc.credentials.createInsecure(), options), streams: 0 };
      this.clients.push(slot);
    }
    const owner = slot;
    owner.streams += 1;
    const metadata = new grpc.Metadata();
    metadata.set('x-gitlab-oauth-token', token);
    metadata.set('x-request-id', workflowId);
    const stream = owner.client.makeBidiStreamRequest(method.path, method.requestSerialize, method.responseDeserialize, metadata);
    const firstAction = new Promise<void>((resolve, reject) => {
      stream.once('data', () => resolve());
      stream.on('error', () => undefined);
      stream.once('status', (status: grpc.StatusObject) => {
        owner.streams -= 1;
        reject(new Error(`call ended before its first action: ${grpc.status[status.code]} ${status.details}`));
      });
    });
    firstAction.catch(() => undefined);
    stream.write({ startRequest: startRequestFor(workflowId, workflowMetadata) });
    return { stream, firstAction };
  }

  get connections(): number {
    return this.clients.length;
  }

  close(): void {
    for (const { client } of this.clients) client.close();
    this.clients.length = 0;
  }
}
