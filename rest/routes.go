package rest

import (
	"net/http"

	"github.com/airlockhq/airlock"
)

// route is one endpoint of the REST API.
type route struct {
	pattern string // Go 1.22 ServeMux pattern: "METHOD /path/{param}"
	// auth is false for the endpoints the handler does not authenticate:
	// the operational ones, and those that authenticate by themselves.
	auth bool
	// call is the endpoint; c is the authenticated caller when auth is set.
	// nil is /metrics, which promhttp serves.
	call func(h *handler, w http.ResponseWriter, r *http.Request, c airlock.Caller)
}

// routes is every endpoint the REST API serves, in the order New registers
// them; there is no other registration. The comment on each says who may
// call it: the provider enforces that, and TestAuthorizationMatrix (T14)
// checks every caller against every route of this table.
// TestOpenAPIListsExactlyTheRoutes holds the table and rest/openapi.yaml
// to the same set.
var routes = []route{
	// Instances and their approval requests (docs/protocol.md). An agent
	// sees only its own; another agent's are 404.
	{"POST /v1/instances", true, (*handler).createInstance},                       // agents
	{"GET /v1/instances/{id}", true, (*handler).getInstance},                      // its agent, reviewers, admins
	{"DELETE /v1/instances/{id}", true, (*handler).deleteInstance},                // its agent, admins
	{"POST /v1/instances/{id}/approval-requests", true, (*handler).createRequest}, // its agent
	{"GET /v1/approval-requests", true, (*handler).listRequests},                  // everyone (agents: their own)
	{"GET /v1/approval-requests/{id}", true, (*handler).getRequest},               // its agent, reviewers, admins
	{"POST /v1/approval-requests/{id}/cancel", true, (*handler).cancelRequest},    // its agent
	{"POST /v1/approval-requests/{id}/decision", true, (*handler).decide},         // reviewers, not of their own principal
	{"POST /v1/approval-requests/decisions", true, (*handler).decideBatch},        // reviewers; each id as its own decision
	{"POST /v1/approval-requests/{id}/execution", true, (*handler).claim},         // its agent
	{"PUT /v1/approval-requests/{id}/execution", true, (*handler).report},         // its agent
	{"GET /v1/events", true, (*handler).events},                                   // reviewers, admins
	{"POST /v1/tokens", true, (*handler).createToken},                             // admins
	{"GET /v1/tokens", true, (*handler).listTokens},                               // admins
	{"DELETE /v1/tokens/{id}", true, (*handler).revokeToken},                      // admins
	{"GET /healthz", false, (*handler).healthz},                                   // anyone
	{"GET /readyz", false, (*handler).readyz},                                     // anyone
	{"GET /metrics", false, nil},                                                  // anyone; served by promhttp
	{"GET /openapi.yaml", false, (*handler).openapi},                              // anyone

	// The work board and sessions (docs/mcp.md): reviewers and admins
	// manage the board that agents' work_move commands act on; the inbox
	// lists sessions.
	{"GET /v1/board", true, (*handler).getBoard},                   // everyone
	{"POST /v1/board/columns", true, (*handler).createColumn},      // reviewers, admins
	{"POST /v1/work-items", true, (*handler).createWorkItem},       // reviewers, admins
	{"GET /v1/work-items/{id}", true, (*handler).getWorkItem},      // everyone
	{"PATCH /v1/work-items/{id}", true, (*handler).updateWorkItem}, // reviewers, admins
	{"GET /v1/sessions", true, (*handler).listSessions},            // everyone

	// Grants (docs/policy.md, "Grants").
	{"POST /v1/grants", true, (*handler).createGrant},        // reviewers, admins
	{"GET /v1/grants", true, (*handler).listGrants},          // reviewers, admins
	{"GET /v1/grants/{id}", true, (*handler).getGrant},       // reviewers, admins
	{"DELETE /v1/grants/{id}", true, (*handler).revokeGrant}, // reviewers, admins

	// Claude Code's HTTP hook (docs/integrations/claude-code.md). It
	// authenticates by itself, because it must answer 200 with a verdict
	// where the others answer 401 or 429 (claudeCodeHook).
	{"POST /v1/hooks/claude-code", false, (*handler).claudeCodeHook}, // agents' hooks; a bad token gets the fallback verdict

	// The instances a caller may see, with their pending counts.
	{"GET /v1/instances", true, (*handler).listInstances}, // everyone (agents: their own)

	// Reviewers (docs/notifications.md, "Slack"): admins list the reviewer
	// principals and link each to a Slack user and an email address.
	// Slack's interactions carry Slack's signature, not a token, and are
	// 404 unless Config.Slack is set.
	{"GET /v1/reviewers", true, (*handler).listReviewers},                     // admins
	{"PUT /v1/reviewers/{principal}/link", true, (*handler).linkReviewer},     // admins
	{"POST /v1/reviewers/end-sessions", true, (*handler).endReviewerSessions}, // admins
	{"GET /v1/reviewers/{principal}/stats", true, (*handler).reviewerStats},   // admins; a reviewer their own
	{"GET /v1/suggestions", true, (*handler).suggestions},                     // admins
	{"POST /slack/interactions", false, (*handler).slackInteractions},         // Slack, by its signature

	// Webhook endpoints (docs/notifications.md): admins create, list, read
	// and delete them, read their deliveries with each attempt, send a
	// test, and enable one disabled for failing.
	{"POST /v1/webhooks", true, (*handler).createWebhook},                 // admins
	{"GET /v1/webhooks", true, (*handler).listWebhooks},                   // admins
	{"GET /v1/webhooks/{id}", true, (*handler).getWebhook},                // admins
	{"DELETE /v1/webhooks/{id}", true, (*handler).deleteWebhook},          // admins
	{"GET /v1/webhooks/{id}/deliveries", true, (*handler).listDeliveries}, // admins
	{"POST /v1/webhooks/{id}/test", true, (*handler).testWebhook},         // admins
	{"POST /v1/webhooks/{id}/enable", true, (*handler).enableWebhook},     // admins

	// Web Push (docs/phone.md): a reviewer's or admin's own browser
	// subscriptions; only their maker deletes one.
	{"GET /v1/push/vapid-public-key", true, (*handler).vapidPublicKey},              // reviewers, admins
	{"POST /v1/push/subscriptions", true, (*handler).createPushSubscription},        // reviewers, admins
	{"DELETE /v1/push/subscriptions/{id}", true, (*handler).deletePushSubscription}, // its maker

	// Approval tokens' keys (docs/tokens.md): the public key set for
	// verifiers, and the admins' list and rotation.
	{"GET /.well-known/jwks.json", false, (*handler).jwks},              // anyone
	{"GET /v1/signing-keys", true, (*handler).listSigningKeys},          // admins
	{"POST /v1/signing-keys/rotate", true, (*handler).rotateSigningKey}, // admins

	// The single use of approval tokens (docs/tokens.md, "Single use"):
	// the one endpoint a verifier token may call.
	{consumePattern, true, (*handler).consumeApprovalToken}, // verifiers, admins

	// The verifiable audit log (docs/audit.md): what an auditor token may
	// call, and nothing else.
	{"GET /v1/audit/checkpoint", true, (*handler).auditCheckpoint},          // auditors, admins
	{"GET /v1/audit/key", true, (*handler).auditKey},                        // auditors, admins
	{"GET /v1/audit/entries", true, (*handler).auditEntries},                // auditors, admins
	{"GET /v1/audit/proofs/inclusion", true, (*handler).auditInclusion},     // auditors, admins
	{"GET /v1/audit/proofs/consistency", true, (*handler).auditConsistency}, // auditors, admins
	{"GET /v1/audit/export", true, (*handler).auditExport},                  // auditors, admins
	{"GET /v1/approval-requests/{id}/proof", true, (*handler).requestProof}, // auditors, admins
}

// consumePattern is the route of POST /v1/approval-tokens/consume, the one
// a verifier token may call (authenticated refuses it every other).
const consumePattern = "POST /v1/approval-tokens/consume"

// forLimited names, for each route a token of a limited role
// (airlock.Role.Limited) may call, that role; authenticated refuses such
// a token every route not listed for its role.
var forLimited = map[string]airlock.Role{
	consumePattern:                         airlock.RoleVerifier,
	"GET /v1/audit/checkpoint":             airlock.RoleAuditor,
	"GET /v1/audit/key":                    airlock.RoleAuditor,
	"GET /v1/audit/entries":                airlock.RoleAuditor,
	"GET /v1/audit/proofs/inclusion":       airlock.RoleAuditor,
	"GET /v1/audit/proofs/consistency":     airlock.RoleAuditor,
	"GET /v1/audit/export":                 airlock.RoleAuditor,
	"GET /v1/approval-requests/{id}/proof": airlock.RoleAuditor,
}
