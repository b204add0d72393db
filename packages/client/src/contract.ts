/**
 * The DuoWorkflow messages as protojson (docs/spec.md §4, the gateway's proto/contract.proto),
 * written once: the client sends and reads them, and the gateway compiles against them (as
 * types only) for the messages it relays. The start of a turn (the execute body, a session's
 * startRequest), a session's answers, heartbeats and stop (ClientEvent), and what the
 * workflow service asks for (Action). Field names are the proto names, as the .proto spells
 * them and as Workhorse clients write them; the gateway's decoder also accepts each field's
 * JSON name (lowerCamelCase), and drops fields it does not know. In protojson an int64 is a
 * JSON string, an int32 a number, an enum its value's name (or number), a
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

export interface HeartbeatRequest {
  /** int64: milliseconds since the epoch. */
  timestamp?: string;
}

export interface StopWorkflowRequest {
  reason?: string;
}

/** ClientEvent: what a client sends on the stream, one member of the oneof `response`. */
export type ClientEvent = { startRequest: StartWorkflowRequest } | { actionResponse: ActionResponse } | { heartbeat: HeartbeatRequest } | { stopWorkflow: StopWorkflowRequest };

// What the workflow service asks the client to do: Action and the payload of each member of
// its oneof `action`. An int64 (a timeout, a line offset) is a JSON string.

export interface RunCommandAction {
  program?: string;
  arguments?: string[];
  flags?: string[];
  timeout?: string;
}

export interface RunHTTPRequest {
  method?: string;
  path?: string;
  body?: string;
}

export interface ReadFile {
  filepath?: string;
  limit?: string;
  offset?: string;
}

export interface WriteFile {
  filepath?: string;
  contents?: string;
}

export interface RunGitCommand {
  command?: string;
  arguments?: string;
  repository_url?: string;
}

export interface EditFile {
  filepath?: string;
  oldString?: string;
  newString?: string;
}

/** Tokens one agent has used of its context window (int32 counts). */
export interface TokenBreakdown {
  total_tokens?: number;
  max_tokens?: number;
}

export interface NewCheckpoint {
  status?: string;
  checkpoint?: string;
  goal?: string;
  errors?: string[];
  /** Token usage per agent, by agent name (shown to users). */
  agent_context_usage?: Record<string, TokenBreakdown>;
}

export interface ListDirectory {
  directory?: string;
}

export interface Grep {
  search_directory?: string;
  pattern?: string;
  case_insensitive?: boolean;
}

export interface FindFiles {
  name_pattern?: string;
}

export interface RunMCPTool {
  name?: string;
  /** JSON text: the tool's arguments. */
  args?: string;
}

export interface Mkdir {
  directory_path?: string;
}

export interface ReadFiles {
  filepaths?: string[];
}

export interface RunShellCommand {
  command?: string;
  timeout?: string;
}

export interface TrackLlmCallForSelfHosted {
  workflowID?: string;
  featureQualifiedName?: string;
  featureAiCatalogItem?: boolean;
}

export interface ScheduleNotification {
  task_id?: string;
  condition?: string;
  message?: string;
}

/** Action: what the workflow service asks for, numbered `requestID`; one member of the oneof `action` is set. */
export interface Action {
  requestID?: string;
  runCommand?: RunCommandAction;
  runHTTPRequest?: RunHTTPRequest;
  runReadFile?: ReadFile;
  runWriteFile?: WriteFile;
  runGitCommand?: RunGitCommand;
  runEditFile?: EditFile;
  newCheckpoint?: NewCheckpoint;
  listDirectory?: ListDirectory;
  grep?: Grep;
  findFiles?: FindFiles;
  runMCPTool?: RunMCPTool;
  mkdir?: Mkdir;
  runReadFiles?: ReadFiles;
  runShellCommand?: RunShellCommand;
  trackLlmCallForSelfHosted?: TrackLlmCallForSelfHosted;
  scheduleNotification?: ScheduleNotification;
}

/** The members of Action's oneof `action`. */
export type ActionKind = Exclude<keyof Action, 'requestID'>;
