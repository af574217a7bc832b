// The REST API's resources, as rest/openapi.yaml defines them. Optional
// fields are absent when they have no value: the server never sends null.

/** A JSON object, as arguments, context and metadata are. */
export type JsonObject = { [key: string]: unknown };

export type State = 'pending' | 'approved' | 'denied' | 'expired' | 'cancelled';
export type Kind = 'tool_call' | 'work_change' | 'memory_change' | 'life_change' | 'agent_request';
export type Role = 'admin' | 'agent' | 'reviewer' | 'verifier' | 'auditor';
export type ExecutionStatus = 'claimed' | 'succeeded' | 'failed' | 'unknown';
/** An outcome an adapter reports for a claimed execution. */
export type ReportStatus = 'succeeded' | 'failed' | 'unknown';

/** The stable error codes of the API (docs/protocol.md). */
export type Code =
  | 'invalid_request'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'idempotency_conflict'
  | 'not_pending'
  | 'deadline_passed'
  | 'not_approved'
  | 'approval_expired'
  | 'already_executed'
  | 'command_failed'
  | 'invalid_token'
  | 'already_used'
  | 'payload_too_large'
  | 'rate_limited'
  | 'unavailable'
  | 'internal';

export const TERMINAL_STATES: readonly State[] = ['approved', 'denied', 'expired', 'cancelled'];

export function isTerminal(state: State): boolean {
  return state !== 'pending';
}

export interface Instance {
  id: string;
  name: string;
  metadata?: JsonObject;
  /** The `aud` of its approval tokens; absent when none was registered. */
  token_audience?: string;
  created_at: string;
  pending_count: number;
}

export interface Decision {
  status: Exclude<State, 'pending'>;
  note?: string;
  answer?: string;
  decided_at: string;
  /** The deciding token's ID, or a system actor such as `system:expiry`. */
  decided_by?: string;
  /** Who decided, for people to read: the token's name, or decided_by as it is when that names no token. */
  decided_by_name?: string;
  /** Approvals only: permission to start the call ends then. */
  expires_at?: string;
  /** On a denial that is an edit ("approved with changes"): the request approved in this one's place. */
  replaced_by?: string;
  /** The deciding reviewer's client's claim of what it showed them (docs/protocol.md). */
  review?: ReviewClaim;
  /** For a request that needed several approvals, the votes that decided it. */
  votes?: Vote[];
}

/** What a reviewer's client says it showed them before a decision: recorded as its claim, never checked. */
export interface ReviewClaim {
  /** The fraction of the arguments that was on screen, 0 to 1. */
  seen_fraction: number;
  /** How long the request was open before the decision, in seconds. */
  seconds_open: number;
}

/** One reviewer's vote on a request that needs several approvals (docs/teams.md). */
export interface Vote {
  /** Who voted; each principal votes once. */
  principal: string;
  /** The voter's name, for people to read. */
  name: string;
  status: 'approved' | 'denied';
  note?: string;
  at: string;
  /** The voter's client's claim (ReviewClaim). */
  review?: ReviewClaim;
}

export interface Execution {
  claimed_at: string;
  status: ExecutionStatus;
  finished_at?: string;
  detail?: string;
  /** The signed proof of the approval for the tool server (docs/tokens.md); only a claim's answer carries it. */
  approval_token?: string;
}

export interface Proposal {
  mode: 'advisory' | 'command';
  command?: { method: string; input?: JsonObject; observed?: JsonObject };
}

export interface ApprovalRequest {
  id: string;
  instance_id: string;
  /** The instance's (or MCP session's) name, for people to read; absent if the instance is gone. */
  instance_name?: string;
  /** The name of the agent token that made the request, for people to read; absent if that token is gone. */
  created_by_name?: string;
  state: State;
  kind: Kind;
  tool?: string;
  arguments?: JsonObject;
  timeout?: string;
  /** The agent's claim about why; never a fact. */
  agent_reasoning?: string;
  /** What the adapter observed. */
  context?: JsonObject;
  /**
   * When the server's payload retention purged arguments, agent_reasoning
   * and context (then absent: purged, not empty). The request keeps its
   * state, tool and decision.
   */
  purged_at?: string;
  created_at: string;
  deadline_at: string;
  /** On a request made by an edit: the original, denied with decision.replaced_by naming this one. */
  derived_from?: string;
  /** The adapter's claims: a preview of the call's effect and its reversibility. */
  preview?: Preview;
  reversibility?: Reversibility;
  decision?: Decision;
  execution?: Execution;
  /** Only in the answer to an edit: the request approved in this one's place. */
  replacement?: ApprovalRequest;
  /** MCP requests only, as are target_type, target_id and session_id. */
  title?: string;
  description?: string;
  target_type?: string;
  target_id?: string;
  session_id?: string;
  proposal?: Proposal;
  question?: { choices?: string[] };
  command_result?: { status: 'applied'; detail?: string; applied_at?: string };
  /** Only in the answer to a decision that made a grant. */
  grant?: Grant;
  /** The reviewer groups whose members alone may decide it (a policy rule's `reviewers`). */
  reviewers?: string[];
  /** Present when it needs several approvals, from different principals: how many. */
  approvals?: number;
  /** With approvals: the votes cast so far, in order (absent before the first). */
  votes?: Vote[];
  /** The groups it is widened to when it waits too long (a policy rule's `escalate_to`). */
  escalate_to?: string[];
  /** When it was widened to escalate_to. */
  escalated_at?: string;
}

export interface CreateRequestInput {
  /** The tool's name, exactly as intercepted. */
  tool: string;
  /**
   * The call's arguments: an object, or its JSON text (sent byte for byte,
   * so the reviewer sees exactly what the agent produced).
   */
  arguments?: JsonObject | string;
  /** The decision window: a Go duration (`30m`) or ISO 8601 (`PT30M`). */
  timeout?: string;
  agent_reasoning?: string;
  context?: JsonObject | string;
  /** The adapter's claim of what the call would do: a diff or text, shown as its claim. */
  preview?: Preview;
  /** How far the call's effect can be undone, as the adapter claims. */
  reversibility?: Reversibility;
}

/** An adapter's preview of a call's effect (docs/protocol.md). */
export interface Preview {
  type: 'diff' | 'text';
  content: string;
}

export type Reversibility = 'reversible' | 'partial' | 'irreversible';

export interface DecisionInput {
  status: 'approved' | 'denied';
  note?: string;
  answer?: string;
  /** Approvals only: how long the call may start (Go or ISO 8601 duration). */
  valid_for?: string;
  /** Approvals of tool calls only: also make a grant for the same call (docs/policy.md). */
  grant?: DecisionGrant;
  /**
   * Approvals of tool calls only: the arguments approved instead of the
   * request's (an edit, docs/protocol.md). The request ends denied and a
   * new one with these arguments is approved in its place.
   */
  arguments?: JsonObject;
  /** What your client showed the reviewer of the arguments: recorded with the decision as its claim. */
  review?: ReviewClaim;
}

/**
 * One decision of several requests (docs/protocol.md, "Batch decisions"):
 * 1 to 100 ids, none twice, each decided as `decide` decides it alone. A
 * batch never edits, answers a question or makes a grant.
 */
export interface BatchDecisionInput {
  ids: string[];
  status: 'approved' | 'denied';
  note?: string;
  /** Approvals only: how long each call may start. */
  valid_for?: string;
}

/** The answer to a batch decision: a result per id, in the order of `ids`. */
export interface BatchDecisionResults {
  results: BatchDecisionResult[];
}

/**
 * What a batch decision did to one id: `status` 200 with the `request` its
 * decision left, or the HTTP status and the `problem` it would have been
 * answered alone.
 */
export interface BatchDecisionResult {
  id: string;
  status: number;
  request?: ApprovalRequest;
  problem?: Problem;
}

/** An RFC 9457 problem, as the server answers it. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: Code;
  field?: string;
  state?: State;
  reason?: string;
  consumed_at?: string;
}

/** The grant an approval makes: for the request's tool, on its instance (or for its agent). */
export interface DecisionGrant {
  /** 'same_arguments' (the default) or a CEL expression. */
  match?: string;
  scope?: 'instance' | 'agent';
  /** How many calls it may approve; absent for no limit until it expires. */
  uses?: number;
  /** How long it lasts (Go or ISO 8601 duration, 1s to 720h). */
  expires_in: string;
}

/** POST /v1/grants: exactly one of instance_id and agent. */
export interface CreateGrantInput {
  tool: string;
  /** 'same_arguments' (the default), which needs arguments, or a CEL expression. */
  match?: string;
  arguments?: JsonObject;
  instance_id?: string;
  agent?: string;
  uses?: number;
  expires_in: string;
  valid_for?: string;
}

/** A standing approval: new tool calls it covers are approved at creation, decided_by "grant:<id>". */
export interface Grant {
  id: string;
  tool: string;
  /** 'same_arguments' or the CEL expression. */
  match: string;
  instance_id?: string;
  agent?: string;
  uses?: number;
  uses_left?: number;
  valid_for: string;
  state: 'live' | 'revoked' | 'creator_revoked' | 'instance_deleted' | 'used_up' | 'expired';
  created_at: string;
  expires_at: string;
  created_by: string;
  request_id?: string;
  revoked_at?: string;
  revoked_by?: string;
}

export interface ListRequestsOptions {
  state?: State;
  instance_id?: string;
  tool?: string;
  kind?: Kind;
  cursor?: string;
  limit?: number;
}

export interface RequestPage {
  items: ApprovalRequest[];
  next_cursor?: string;
}

export interface Event {
  id: number;
  type: string;
  at: string;
  actor?: string;
  request_id?: string;
  instance_id?: string;
  token_id?: string;
  state?: State;
  subject?: string;
  /** On the decision of a request a policy rule decided at creation: the policy file's SHA-256. */
  policy_sha256?: string;
}

export interface EventData {
  event: Event;
  request?: ApprovalRequest;
}

export interface CreateTokenInput {
  name: string;
  role: Role;
  scopes?: string[];
  principal?: string;
}

export interface Token {
  id: string;
  name: string;
  role: Role;
  scopes?: string[];
  principal?: string;
  created_at: string;
  created_by?: string;
  revoked_at?: string;
}

/** A key approval tokens are signed with, as admins see it: never its private half (docs/tokens.md). */
export interface SigningKey {
  id: string;
  /** Whether it signs new tokens now. */
  active: boolean;
  created_at?: string;
  /** When it starts (or started) signing: a rotated-in key signs a while after it is published. */
  activates_at?: string;
  retired_at?: string;
  published_until?: string;
}

/** A public key of the approval tokens' key set (RFC 7517): Ed25519, named by its kid. */
export interface PublicKey {
  kty: 'OKP';
  crv: 'Ed25519';
  x: string;
  kid: string;
  alg: 'EdDSA';
  use?: 'sig';
}

/** The key set served at /.well-known/jwks.json. */
export interface KeySet {
  keys: PublicKey[];
}

/**
 * What a tool server hands POST /v1/approval-tokens/consume (docs/tokens.md, "Single use"): the
 * token and, to hold it to the call about to run, the tool and the arguments (both, or neither).
 */
export interface ConsumeInput {
  token: string;
  tool?: string;
  /** The call's arguments, any JSON; compared with the approved ones under RFC 8785. */
  arguments?: unknown;
  /** Must equal the token's aud; both may be empty. */
  audience?: string;
}

/** The one use of an approval token's request, as the server recorded it. */
/** An entry of the audit log's tree (docs/audit.md). */
export interface AuditEntry {
  index: number;
  /** The leaf: the event's RFC 8785 JSON, as served, so that it hashes as the tree does. */
  leaf: string;
  /** For a decision or vote signed with a passkey, its record (docs/audit.md, "Passkey-signed decisions"); not part of the leaf. */
  passkey?: JsonObject;
}

/** A proof that the leaf at `index` is in the tree of `tree_size` leaves: standard base64 hashes in tlog.CheckRecord's order. */
export interface InclusionProof {
  index: number;
  tree_size: number;
  hashes: string[];
}

/** A proof that the tree of `from` leaves is a prefix of the tree of `tree_size`: tlog.CheckTree's order. */
export interface ConsistencyProof {
  from: number;
  tree_size: number;
  hashes: string[];
}

/** A request's events in the audit log, proved against one checkpoint. */
export interface RequestProof {
  request_id: string;
  tree_size: number;
  /** The signed note the proofs are against. */
  checkpoint: string;
  entries: { index: number; leaf: JsonObject; proof: string[]; passkey?: JsonObject }[];
  /** Indexes of the request's events after the checkpoint, which the next covers. */
  later: number[];
}

/** What exportAudit writes: JSON lines (the default), CSV or OCSF, and an optional window. */
export interface ExportAuditOptions {
  format?: 'jsonl' | 'csv' | 'ocsf';
  /** RFC 3339: the events at or after it. */
  since?: string;
  /** RFC 3339: the events before it. */
  until?: string;
}

export interface TokenUse {
  request_id: string;
  jti: string;
  consumed_at: string;
}

export interface CreatedToken extends Omit<Token, 'revoked_at'> {
  /** The secret; shown in this answer only. */
  secret: string;
}

export interface WorkItem {
  id: string;
  title: string;
  column_key: string;
  version: number;
  created_at: string;
  updated_at: string;
}

export interface Column {
  key: string;
  name: string;
  position: number;
  items: WorkItem[];
}

export interface Board {
  columns: Column[];
}

export interface WorkItemUpdate {
  title?: string;
  column_key?: string;
  if_version?: number;
}

export interface Session {
  id: string;
  owner_id: string;
  name: string;
  metadata?: JsonObject;
  status: 'active' | 'waiting' | 'stale' | 'closed';
  pending_count: number;
  created_at: string;
  last_seen_at?: string;
  closed_at?: string;
}

/** The approval-request notifications an endpoint can subscribe to. */
export type NotifyType =
  | 'approval_request.created'
  | 'approval_request.approved'
  | 'approval_request.denied'
  | 'approval_request.expired'
  | 'approval_request.cancelled'
  | 'approval_request.reminder'
  | 'approval_request.execution_claimed'
  | 'approval_request.execution_reported'
  | 'approval_request.escalated'
  | 'audit.checkpoint';

export interface CreateWebhookInput {
  /** An absolute http:// or https:// URL without credentials or fragment. */
  url: string;
  /** The event types to receive; empty or absent means every approval_request.* type (audit.checkpoint only when listed). */
  events?: NotifyType[];
  description?: string;
}

export interface Webhook {
  id: string;
  url: string;
  /** The event types it receives; empty means all. */
  events: NotifyType[];
  description?: string;
  created_at: string;
  created_by?: string;
  /** false once disabled for failing too long: it receives nothing more. */
  enabled: boolean;
  failing_since?: string;
  disabled_at?: string;
  disabled_reason?: string;
}

/** The server's VAPID public key (docs/phone.md): a browser's applicationServerKey. */
export interface VAPIDPublicKey {
  /** base64url, no padding: an uncompressed P-256 point. */
  public_key: string;
}

/** What a browser's `PushSubscription.toJSON()` gives. */
export interface CreatePushSubscriptionInput {
  /** The push service's URL for this browser: https. */
  endpoint: string;
  /** What browsers send; not kept. */
  expirationTime?: number | null;
  keys: { p256dh: string; auth: string };
}

/** A reviewer's or admin's own browser subscribed to pushes; never its keys. */
export interface PushSubscription {
  id: string;
  endpoint: string;
  created_at: string;
}

export interface CreatedWebhook extends Webhook {
  /** The Standard Webhooks signing secret (`whsec_…`); shown in this answer only. */
  secret: string;
}

export interface DeliveryAttempt {
  at: string;
  /** The HTTP status answered; absent when none came. */
  status?: number;
  latency_ms: number;
  error?: string;
}

export interface Delivery {
  id: string;
  webhook_id: string;
  /** The webhook-id header: the same on every attempt and for every endpoint receiving the event. */
  message_id: string;
  /** A NotifyType, or `webhook.test`. */
  type: string;
  event_id?: number;
  request_id?: string;
  state: 'pending' | 'delivered' | 'failed';
  created_at: string;
  next_attempt_at?: string;
  attempts: DeliveryAttempt[];
}

export interface ListDeliveriesOptions {
  /** The next_cursor of the previous page. */
  cursor?: string;
  /** 1..500 (server default 50). */
  limit?: number;
}

export interface DeliveryPage {
  items: Delivery[];
  next_cursor?: string;
}

export interface Health {
  status: 'ok' | 'unavailable';
}

/** A reviewer principal with its links (GET /v1/reviewers). */
export interface Reviewer {
  principal: string;
  /** The name of the principal's newest live reviewer token. */
  name?: string;
  /** Live reviewer tokens of the principal; a link decides nothing while it is 0. */
  tokens: number;
  slack_user_id?: string;
  email?: string;
  linked_at?: string;
  linked_by?: string;
  /** An OIDC reviewer's groups, from the identity provider's claim at their last sign-in. */
  groups?: string[];
  /** An OIDC reviewer's last sign-in. */
  signed_in_at?: string;
}

/** A decider's approvals, denials and times to decision (GET /v1/reviewers/{principal}/stats; docs/policy.md). */
export interface ReviewerStats {
  /** The decider as decision.decided_by records it: a token's ID, an OIDC principal, policy:<rule>, grant:<id>. */
  decided_by: string;
  kind: 'person' | 'policy' | 'grant' | 'system';
  window_seconds: number;
  decisions: number;
  approvals: number;
  denials: number;
  /** approvals / decisions; 0 with no decision. */
  approval_rate: number;
  /** Nearest-rank percentiles of the time from creation to decision. */
  p50_seconds: number;
  p90_seconds: number;
  /** Approvals sooner than max(2 s, 2 s per KiB of arguments) after creation. */
  fast_approvals: number;
}

/** A pattern people keep approving, with the rule that would have approved it (GET /v1/suggestions; docs/policy.md). */
export interface Suggestion {
  pattern: 'same_arguments' | 'constant_keys';
  tool: string;
  /** same_arguments: the arguments, canonical; constant_keys: the constant keys with their values. */
  arguments: Record<string, unknown>;
  /** constant_keys only: the keys whose value varied or that some approvals lacked. */
  varying_keys?: string[];
  approvals: number;
  /** Up to 100 of the approved requests the pattern covers, sorted. */
  request_ids: string[];
  approvers: string[];
  /** A CEL expression true for exactly the calls of the pattern. */
  match: string;
  /** A shadow policy rule with the match, as YAML to paste under rules:. */
  rule: string;
  /** A POST /v1/grants body that would have covered the calls, when they were all on one instance. */
  grant?: { tool: string; match: string; instance_id: string; expires_in: string };
}

/** What PUT /v1/reviewers/{principal}/link takes. */
export interface ReviewerLinkInput {
  /** The Slack member ID (U…). */
  slack_user_id?: string;
  email?: string;
}
