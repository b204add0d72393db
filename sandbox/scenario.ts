/**
 * The simulated workflow service's scenario vocabulary. A scenario is read from
 * StartWorkflowRequest.workflowMetadata: `{"scenario": [step, ...]}`. Steps run in order;
 * after the last one the call ends OK. Without a scenario the default is one checkpoint
 * then end.
 *
 *   {"op":"checkpoint","text":"...","status":"RUNNING","errors":["..."],"usage":{"agent":{"total_tokens":1,"max_tokens":2}}}
 *                                                         emit newCheckpoint (no answer awaited); usage is its
 *                                                         agent_context_usage, by default {"<definition>":{...}} with
 *                                                         1 000 tokens per checkpoint so far of 200 000; {} sends none
 *                                                         "bytes":N pads the text to N bytes (large checkpoints)
 *                                                         "stamp":true appends "@<epoch ms>" (fractional: the time
 *                                                         origin of the simulator's process plus its monotonic clock)
 *                                                         as it is sent, to measure latency to a reader elsewhere
 *   {"op":"http","method":"GET","path":"/api/v4/...","body":"..."}
 *                                                         request runHTTPRequest, await and record the httpResponse
 *   {"op":"mcp","name":"tool","args":"{}"}                 request runMCPTool, await and record the answer
 *   {"op":"unsupported","kind":"runReadFile"}             request an action longrun must refuse, await and record the error
 *   {"op":"action","action":{...}}                        send this Action, given as protojson (requestID is the simulator's);
 *                                                         unless it is a newCheckpoint, await and record the answer
 *   {"op":"every_action"}                                 send every Action kind in field-number order, each with every
 *                                                         field set (every-action.ts); await and record each answer
 *   {"op":"client","action":{...},"expect":{"plainTextResponse":{"response":"..."}},"exact":false}
 *                                                         send this Action (protojson, any kind but newCheckpoint), await
 *                                                         and record the answer, and check it against expect (a protojson
 *                                                         ActionResponse without requestID): every field expect sets must
 *                                                         be in the answer with that value (arrays whole), or with
 *                                                         "exact":true the answer must be exactly expect; both sides are
 *                                                         compared as the wire carries them (proto3 zero values absent).
 *                                                         A mismatch fails the call INVALID_ARGUMENT
 *                                                         "unexpected answer to <kind> #<requestID>"
 *   {"op":"track_llm_call","workflowID":"...","featureQualifiedName":"duo_chat","featureAiCatalogItem":false,"expect":{...}}
 *                                                         send trackLlmCallForSelfHosted (workflowID defaults to the
 *                                                         call's) and await its answer, a plainTextResponse as Workhorse
 *                                                         gives it (empty, once the billing stream acknowledged the
 *                                                         event); records whether this simulator's
 *                                                         TrackSelfHostedExecuteWorkflow saw the event first
 *                                                         (CallRecord.llmCalls); optional expect as in `client`
 *   {"op":"wait","ms":100}                                 do nothing for ms (stops are still served)
 *   {"op":"fail","code":"UNAVAILABLE","message":"..."}     end the call with that gRPC status
 *   {"op":"hang"}                                          never send anything again (until stopped or cancelled)
 *   {"op":"end"}                                           end the call OK now
 *   {"op":"repeat","times":N,"steps":[...]}                run the nested steps N times
 *   {"op":"paginate","path":"/api/v4/projects/1/issues","perPage":2,"maxPages":50}
 *                                                         GET path?page=1&per_page=2, then the page named by the
 *                                                         answer's headers["X-Next-Page"] — looked up case-sensitively,
 *                                                         as the real service does — until it is empty or absent;
 *                                                         records the pages fetched and the items read (CallRecord.paginations)
 *   {"op":"turn","checkpoints":N,"intervalMs":100,"id":"t1","write":{"method":"POST","path":"/api/v4/echo"}}
 *                                                         a resumable turn of N steps whose progress the simulator
 *                                                         keeps per workflow (and id), as the real service keeps its
 *                                                         checkpoints: each call continues after the last checkpoint
 *                                                         sent by the calls before it. A step waits intervalMs, relays
 *                                                         the optional write (body {"step":i}) and awaits its answer,
 *                                                         then emits checkpoint "step i/N" (status FINISHED for the
 *                                                         last). A call that starts with every step done goes straight
 *                                                         to the next step of the scenario (CallRecord.turn: from, to).
 *                                                         "finishAtMs":T holds the last step until the call is T ms
 *                                                         old when the call did a step before it (a turn that
 *                                                         finishes on a run limit; a call that starts at the last
 *                                                         step does it at once, so the turn always ends)
 *                                                         "client":{"action":{...},"expect":{...},"exact":false}: after
 *                                                         the write, each step sends this Action for the client to
 *                                                         execute and checks its answer as a `client` step does, with
 *                                                         every "{step}" in the strings of action and expect replaced
 *                                                         by the step's number (one distinct action per step), and
 *                                                         every "{call}" by the call's number among the workflow's
 *                                                         calls (1, 2, …: a step a later call does again is another action)
 *
 * Every step that awaits answers (http, mcp, unsupported, action, every_action, client,
 * track_llm_call, paginate, turn) takes "answerWithinMs":N: an action still unanswered N ms
 * after it was sent fails the call DEADLINE_EXCEEDED. Without it the service waits for ever.
 * The simulator is strict about answers as the service is (workflow-sim.ts): an answer of
 * the wrong type for its action, or one whose requestID names no pending action, fails the
 * call INVALID_ARGUMENT (and is also recorded in CallRecord.protocolErrors).
 */
import { z } from 'zod';

export const grpcCodeNames = [
  'CANCELLED',
  'UNKNOWN',
  'INVALID_ARGUMENT',
  'DEADLINE_EXCEEDED',
  'NOT_FOUND',
  'ALREADY_EXISTS',
  'PERMISSION_DENIED',
  'RESOURCE_EXHAUSTED',
  'FAILED_PRECONDITION',
  'ABORTED',
  'OUT_OF_RANGE',
  'UNIMPLEMENTED',
  'INTERNAL',
  'UNAVAILABLE',
  'DATA_LOSS',
  'UNAUTHENTICATED',
] as const;

export type GrpcCodeName = (typeof grpcCodeNames)[number];

/** How long the service waits for each answer a step awaits (ms); absent: for ever. */
interface Answered {
  answerWithinMs?: number;
}

export type Step =
  | {
      op: 'checkpoint';
      text?: string;
      status?: string;
      errors?: string[];
      usage?: Record<string, { total_tokens?: number; max_tokens?: number }>;
      bytes?: number;
      stamp?: boolean;
    }
  | ({ op: 'http'; method?: string; path: string; body?: string } & Answered)
  | ({ op: 'mcp'; name: string; args?: string } & Answered)
  | ({ op: 'unsupported'; kind?: string } & Answered)
  | ({ op: 'action'; action: Record<string, unknown> } & Answered)
  | ({ op: 'every_action' } & Answered)
  | ({ op: 'client'; action: Record<string, unknown>; expect?: Record<string, unknown>; exact?: boolean } & Answered)
  | ({
      op: 'track_llm_call';
      workflowID?: string;
      featureQualifiedName?: string;
      featureAiCatalogItem?: boolean;
      expect?: Record<string, unknown>;
      exact?: boolean;
    } & Answered)
  | { op: 'wait'; ms: number }
  | { op: 'fail'; code: GrpcCodeName; message?: string }
  | { op: 'hang' }
  | { op: 'end' }
  | { op: 'repeat'; times: number; steps: Step[] }
  | ({ op: 'paginate'; path: string; perPage?: number; maxPages?: number } & Answered)
  | ({
      op: 'turn';
      checkpoints: number;
      intervalMs?: number;
      id?: string;
      write?: { method?: string; path: string };
      finishAtMs?: number;
      client?: TurnClientAction;
    } & Answered);

/** A turn's action for the client, sent once per step: `{step}` in its strings (and expect's) is the step's number. */
export interface TurnClientAction {
  action: Record<string, unknown>;
  expect?: Record<string, unknown>;
  exact?: boolean;
}

const answerWithinMs = z.number().int().min(1).max(3_600_000).optional();

const stepSchema: z.ZodType<Step> = z.lazy(() =>
  z.discriminatedUnion('op', [
    z.object({
      op: z.literal('checkpoint'),
      text: z.string().optional(),
      status: z.string().optional(),
      errors: z.array(z.string()).optional(),
      usage: z.record(z.string(), z.object({ total_tokens: z.number().int().optional(), max_tokens: z.number().int().optional() })).optional(),
      bytes: z.number().int().min(0).max(4_000_000).optional(),
      stamp: z.boolean().optional(),
    }),
    z.object({ op: z.literal('http'), method: z.string().optional(), path: z.string(), body: z.string().optional(), answerWithinMs }),
    z.object({ op: z.literal('mcp'), name: z.string(), args: z.string().optional(), answerWithinMs }),
    z.object({ op: z.literal('unsupported'), kind: z.string().optional(), answerWithinMs }),
    z.object({ op: z.literal('action'), action: z.record(z.string(), z.unknown()), answerWithinMs }),
    z.object({ op: z.literal('every_action'), answerWithinMs }),
    z.object({
      op: z.literal('client'),
      action: z.record(z.string(), z.unknown()),
      expect: z.record(z.string(), z.unknown()).optional(),
      exact: z.boolean().optional(),
      answerWithinMs,
    }),
    z.object({
      op: z.literal('track_llm_call'),
      workflowID: z.string().optional(),
      featureQualifiedName: z.string().optional(),
      featureAiCatalogItem: z.boolean().optional(),
      expect: z.record(z.string(), z.unknown()).optional(),
      exact: z.boolean().optional(),
      answerWithinMs,
    }),
    z.object({ op: z.literal('wait'), ms: z.number().int().min(0).max(3_600_000) }),
    z.object({ op: z.literal('fail'), code: z.enum(grpcCodeNames), message: z.string().optional() }),
    z.object({ op: z.literal('hang') }),
    z.object({ op: z.literal('end') }),
    z.object({ op: z.literal('repeat'), times: z.number().int().min(0).max(1_000_000), steps: z.array(stepSchema) }),
    z.object({
      op: z.literal('paginate'),
      path: z.string(),
      perPage: z.number().int().min(1).max(100).optional(),
      maxPages: z.number().int().min(1).max(10_000).optional(),
      answerWithinMs,
    }),
    z.object({
      op: z.literal('turn'),
      checkpoints: z.number().int().min(1).max(1_000_000),
      intervalMs: z.number().int().min(0).max(3_600_000).optional(),
      id: z.string().max(200).optional(),
      write: z.object({ method: z.string().optional(), path: z.string() }).optional(),
      finishAtMs: z.number().int().min(0).max(3_600_000).optional(),
      client: z.object({ action: z.record(z.string(), z.unknown()), expect: z.record(z.string(), z.unknown()).optional(), exact: z.boolean().optional() }).optional(),
      answerWithinMs,
    }),
  ]),
);

const metadataSchema = z.object({ scenario: z.array(stepSchema).optional() }).passthrough();

export const defaultScenario: Step[] = [{ op: 'checkpoint', text: 'done' }, { op: 'end' }];

/** A scenario the simulator cannot play, found while playing it (the call ends INVALID_ARGUMENT 'bad scenario: …'). */
export class BadScenario extends Error {}

/** Parses workflowMetadata; throws with a readable message when the scenario is malformed. */
export function parseScenario(workflowMetadata: string | undefined): Step[] {
  if (!workflowMetadata) return defaultScenario;
  let json: unknown;
  try {
    json = JSON.parse(workflowMetadata);
  } catch {
    throw new Error('workflowMetadata is not JSON');
  }
  const parsed = metadataSchema.safeParse(json);
  if (!parsed.success) throw new Error(`bad scenario: ${parsed.error.issues[0]?.message ?? 'invalid'}`);
  return parsed.data.scenario ?? defaultScenario;
}

/** workflowMetadata text for a scenario (what tests put in a StartWorkflowRequest). */
export function scenarioMetadata(steps: Step[]): string {
  return JSON.stringify({ scenario: steps });
}
