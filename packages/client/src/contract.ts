/**
 * The DuoWorkflow messages the client sends and reads, as protojson (docs/spec.md §4, the
 * gateway's proto/contract.proto): the start of a turn (the execute body, a session's
 * startRequest) and a session's answers. Field names are the proto names, as the .proto
 * spells them and as Workhorse clients write them; the gateway's decoder also accepts each
 * field's JSON name (lowerCamelCase), and drops fields it does not know. In protojson an
 * int64 is a JSON string, an int32 a number, an enum its value's name (or number), a
 * google.protobuf.Struct any JSON object, and at most one member of a oneof is set.
 */

/** google.protobuf.Struct: a JSON object, written as it is. */
export type JsonObject = { [key: string]: unknown };

export interface Icon {
  url?: string;
  mime_type?: string;
  sizes?: string[];
  theme?: string;
}

export interface ToolAnnotations {
  title?: string;
  read_only_hint?: boolean;
  destructive_hint?: boolean;
  idempotent_hint?: boolean;
  open_world_hint?: boolean;
}

/** An MCP tool the client offers the workflow (its input schema as JSON text). */
export interface McpTool {
  name?: string;
  description?: string;
  inputSchema?: string;
  icons?: { items?: Icon[] };
  annotations?: ToolAnnotations;
  trusted?: boolean;
}

export interface AdditionalContext {
  category?: string;
  id?: string;
  content?: string;
  metadata?: string;
}

/** Approval.ApprovalSource, by name; a number for a value this contract does not know (proto3 enums are open). */
export type ApprovalSource =
  'APPROVAL_SOURCE_UNSPECIFIED' | 'APPROVAL_SOURCE_USER_EXPLICIT' | 'APPROVAL_SOURCE_PRETOOLUSE_HOOK' | 'APPROVAL_SOURCE_AUTO_MODE' | 'APPROVAL_SOURCE_PREAPPROVED_CONFIG' | number;

export interface PolicyRef {
  origin?: string;
  file?: string;
  hash?: string;
  version?: string;
}

export interface Approved {
  remember_approval?: boolean;
  tool_name?: string;
  tool_args_json?: string;
  approval_source?: ApprovalSource;
  policy_ref?: PolicyRef;
}

/** The user's decision on a tool call: the oneof `user_decision`, approval or rejection. */
export type Approval = { approval?: Approved; rejection?: never } | { rejection?: { message?: string }; approval?: never };

/** StartWorkflowRequest: what starts (or resumes) a turn. */
export interface StartWorkflowRequest {
  clientVersion?: string;
  workflowID?: string;
  workflowDefinition?: string;
  goal?: string;
  /** JSON text (the owner's metadata for the workflow service). */
  workflowMetadata?: string;
  clientCapabilities?: string[];
  mcpTools?: McpTool[];
  additional_context?: AdditionalContext[];
  approval?: Approval;
  flowConfig?: JsonObject;
  flowConfigSchemaVersion?: string;
  preapproved_tools?: string[];
  flowConfigId?: string;
  flowVersion?: string;
  streaming?: boolean;
  resume_checkpoint_ts?: string;
}

export interface PlainTextResponse {
  response?: string;
  error?: string;
}

export interface HttpResponse {
  headers?: Record<string, string>;
  statusCode?: number;
  body?: string;
  error?: string;
}

export interface ScheduleNotificationResponse {
  accepted?: boolean;
  reason?: string;
  fires_at?: string;
}

/** The members of ActionResponse's oneof `response_type`: an answer sets one. */
export type ActionResponseMember =
  | { plainTextResponse: PlainTextResponse; httpResponse?: never; scheduleNotificationResponse?: never }
  | { httpResponse: HttpResponse; plainTextResponse?: never; scheduleNotificationResponse?: never }
  | { scheduleNotificationResponse: ScheduleNotificationResponse; plainTextResponse?: never; httpResponse?: never };

/** ActionResponse: the client's answer to the action numbered `requestID`. */
export type ActionResponse = { requestID: string } & ActionResponseMember;
