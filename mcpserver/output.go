package mcpserver

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/airlockhq/airlock"
)

// The results' wire format: the same resources as REST in
// the MCP field style — camelCase keys (approvalId, deadlineAt, …), times
// RFC 3339 in UTC, optional fields omitted rather than null. Each result
// has a "next" member that tells the agent, in a sentence, where it stands
// and what to do now; acceptance is never worded as completion.

// approvalOut is one approval request (approval_request, approval_status,
// approval_cancel).
type approvalOut struct {
	ApprovalID  string `json:"approvalId"`
	Status      string `json:"status"`
	Kind        string `json:"kind"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	TargetType  string `json:"targetType,omitempty"`
	TargetID    string `json:"targetId,omitempty"`
	SessionID   string `json:"sessionId,omitempty"`
	// Proposal and Question are as submitted: the domain's types, whose
	// JSON is the agent's input (a command's observed target, which the
	// provider sets, is not part of it: CommandOutcome shows it).
	Proposal   *airlock.Proposal `json:"proposal,omitempty"`
	Question   *airlock.Question `json:"question,omitempty"`
	CreatedAt  string            `json:"createdAt"`
	DeadlineAt string            `json:"deadlineAt"`
	// Reviewers are the groups whose members alone may decide the request.
	Reviewers []string `json:"reviewers,omitempty"`
	// ApprovalsRequired and Votes are set when the request needs several
	// approvals: how many, and the votes cast so far.
	ApprovalsRequired int       `json:"approvalsRequired,omitempty"`
	Votes             []voteOut `json:"votes,omitempty"`
	// Decision is set once the request is terminal.
	Decision *decisionOut `json:"decision,omitempty"`
	// Answer is the reviewer's answer to the question, when there is one.
	Answer string `json:"answer,omitempty"`
	// CommandOutcome says, for a command proposal, whether Airlock ran it.
	CommandOutcome *commandOutcomeOut `json:"commandOutcome,omitempty"`
	// Replayed is true when approval_request returned the request an
	// earlier call with the same idempotencyKey created.
	Replayed bool   `json:"replayed,omitempty"`
	Next     string `json:"next"`
}

type decisionOut struct {
	Status    string `json:"status"`
	Note      string `json:"note,omitempty"`
	Answer    string `json:"answer,omitempty"`
	DecidedAt string `json:"decidedAt"`
	// DecidedBy is set only when no person decided (a policy rule), so
	// the agent knows; a reviewer's token ID is not the agent's to see.
	DecidedBy string `json:"decidedBy,omitempty"`
	// DecidedByName is who decided, as people read it: the reviewer
	// token's name, or a system actor as it is.
	DecidedByName string `json:"decidedByName,omitempty"`
	// ExpiresAt ends an approval's permission to start acting on it.
	ExpiresAt string `json:"expiresAt,omitempty"`
	// Votes are the votes that decided a request needing several approvals.
	Votes []voteOut `json:"votes,omitempty"`
}

// voteOut is one reviewer's vote on a request needing several approvals.
type voteOut struct {
	Principal string `json:"principal"`
	Name      string `json:"name"`
	Status    string `json:"status"`
	Note      string `json:"note,omitempty"`
	At        string `json:"at"`
}

func newVotesOut(vs []airlock.Vote) []voteOut {
	if len(vs) == 0 {
		return nil
	}
	out := make([]voteOut, len(vs))
	for i, v := range vs {
		out[i] = voteOut{Principal: v.Principal, Name: v.Name, Status: string(v.Status), Note: v.Note, At: formatTime(v.At)}
	}
	return out
}

// Command outcome statuses.
const (
	// outcomeAwaiting: the request is pending; the command runs only if it
	// is approved.
	outcomeAwaiting = "awaiting_decision"
	// outcomeNotExecuted: denied, expired or cancelled; it never will run.
	outcomeNotExecuted = "not_executed"
)

type commandOutcomeOut struct {
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
	// AppliedAt is when the command ran (the approval's time).
	AppliedAt string `json:"appliedAt,omitempty"`
	// Observed is what Airlock saw of the target when the command was
	// requested; the command applies only while the target is still so.
	Observed json.RawMessage `json:"observed,omitempty"`
}

func newApprovalOut(r airlock.Request) approvalOut {
	out := approvalOut{
		ApprovalID: r.ID, Status: string(r.State), Kind: string(r.Kind),
		Title: r.Title, Description: r.Description, TargetType: r.TargetType, TargetID: r.TargetID,
		SessionID: r.SessionID, Proposal: r.Proposal, Question: r.Question,
		CreatedAt: formatTime(r.CreatedAt), DeadlineAt: formatTime(r.DeadlineAt),
	}
	if p := r.Proposal; p != nil {
		if c := p.Command; c != nil {
			oc := &commandOutcomeOut{Observed: c.Observed}
			switch {
			case r.State == airlock.StatePending:
				oc.Status = outcomeAwaiting
			case r.CommandResult != nil:
				// airlock.CommandApplied: approved, and applied in the
				// same transaction.
				oc.Status = r.CommandResult.Status
				oc.Detail = r.CommandResult.Detail
				oc.AppliedAt = formatTime(r.CommandResult.AppliedAt)
			case r.State == airlock.StateApproved:
				// Approval and effect commit together, so this is not
				// expected; say so rather than guess.
				oc.Status = "unknown"
			default:
				oc.Status = outcomeNotExecuted
			}
			if len(oc.Observed) == 0 || string(oc.Observed) == "null" {
				oc.Observed = nil
			}
			out.CommandOutcome = oc
		}
	}
	out.Reviewers = r.Reviewers
	if r.NeedsQuorum() {
		out.ApprovalsRequired, out.Votes = r.Approvals, newVotesOut(r.Votes)
	}
	if d := r.Decision; d != nil {
		out.Decision = &decisionOut{Status: string(d.Status), Note: d.Note, Answer: d.Answer, DecidedAt: formatTime(d.DecidedAt), DecidedByName: d.DecidedByName}
		out.Decision.Votes = newVotesOut(r.Votes)
		if d.ExpiresAt != nil {
			out.Decision.ExpiresAt = formatTime(*d.ExpiresAt)
		}
		if decidedByRule(d.DecidedBy) {
			out.Decision.DecidedBy = d.DecidedBy
		}
		out.Answer = d.Answer
	}
	out.Next = approvalNext(r)
	return out
}

// decidedByRule reports whether actor is no person: a policy rule or a
// reviewer's grant, which the agent is told of.
func decidedByRule(actor string) bool {
	_, grant := airlock.GrantOf(actor)
	return grant || airlock.DecidedByPolicy(actor)
}

// approvalNext tells the agent where a request stands and what to do.
func approvalNext(r airlock.Request) string {
	command := r.Proposal != nil && r.Proposal.Command != nil
	question := r.Question != nil
	switch r.State {
	case airlock.StatePending:
		s := "pending: a person will decide; "
		if r.SessionID != "" {
			s += "check approval_status or your next session_heartbeat."
		} else {
			s += "check approval_status (waitSeconds waits for the decision)."
		}
		s += " Nothing has happened yet"
		if command {
			s += ": the command runs only if approved"
		}
		return s + "; do not proceed as if approved."
	case airlock.StateApproved:
		var s string
		switch {
		case command && r.CommandResult != nil:
			s = "approved and applied: Airlock ran the command in the same step that recorded the approval"
			if r.CommandResult.Detail != "" {
				s += " (" + r.CommandResult.Detail + ")"
			}
			s += "; do not run it again yourself."
		case question && r.Decision != nil && r.Decision.Answer != "":
			s = fmt.Sprintf("answered: the reviewer's answer is %q (in answer).", r.Decision.Answer)
		default:
			s = "approved: you may act on exactly this proposal"
			if r.Decision != nil && r.Decision.ExpiresAt != nil {
				s += ", starting before decision.expiresAt"
			}
			s += ". Airlock executed nothing: an advisory approval only records the decision."
		}
		if r.Decision != nil && airlock.DecidedByPolicy(r.Decision.DecidedBy) {
			s += " The server's policy approved it (decision.decidedBy names the rule); no person has seen it."
		}
		if _, ok := r.Decision.GrantID(); ok {
			s += " A reviewer's standing grant approved it (decision.decidedBy names the grant); no person has seen this request."
		}
		if r.Decision != nil && r.Decision.Note != "" {
			s += " Read decision.note: it informs you but changes nothing that was approved."
		}
		return s
	case airlock.StateDenied:
		s := "denied: the reviewer declined"
		if r.Decision != nil && airlock.DecidedByPolicy(r.Decision.DecidedBy) {
			s = "denied: the server's policy refused it (decision.decidedBy names the rule)"
		}
		if question {
			s += " to answer"
		}
		if r.Decision != nil && r.Decision.Note != "" {
			s += "; decision.note says why"
		}
		s += ". Do not proceed; a changed proposal needs a new approval_request with a new idempotencyKey."
		if command {
			s += " The command was not executed."
		}
		return s
	case airlock.StateExpired:
		return "expired: no decision before deadlineAt, so nothing was approved or executed. If it is still needed, ask again with a new idempotencyKey."
	case airlock.StateCancelled:
		return "cancelled: the request was withdrawn (by approval_cancel or by closing its session); nothing was executed."
	}
	return string(r.State)
}

// sessionOut is one of the agent's sessions.
type sessionOut struct {
	SessionID    string `json:"sessionId"`
	Name         string `json:"name"`
	Status       string `json:"status"`
	PendingCount int    `json:"pendingCount"`
	CreatedAt    string `json:"createdAt"`
	LastSeenAt   string `json:"lastSeenAt,omitempty"`
	ClosedAt     string `json:"closedAt,omitempty"`
	// StaleAfterSeconds is how long the session may go without a heartbeat
	// before it shows as stale (display only: nothing is cancelled).
	StaleAfterSeconds int64 `json:"staleAfterSeconds"`
}

func (s *Server) newSessionOut(in airlock.Instance) sessionOut {
	stale := s.svc.StaleAfter()
	out := sessionOut{
		SessionID: in.ID, Name: in.Name, Status: string(s.svc.SessionStatus(in)),
		PendingCount: in.PendingCount, CreatedAt: formatTime(in.CreatedAt),
		StaleAfterSeconds: int64(stale / time.Second),
	}
	if in.LastSeenAt != nil {
		out.LastSeenAt = formatTime(*in.LastSeenAt)
	}
	if in.ClosedAt != nil {
		out.ClosedAt = formatTime(*in.ClosedAt)
	}
	return out
}

type sessionOpenOut struct {
	sessionOut
	Next string `json:"next"`
}

// instructionOut is a decision or answer delivered on a heartbeat.
type instructionOut struct {
	InstructionID string `json:"instructionId"`
	ApprovalID    string `json:"approvalId"`
	Status        string `json:"status"`
	Note          string `json:"note,omitempty"`
	Answer        string `json:"answer,omitempty"`
	CreatedAt     string `json:"createdAt"`
	// Message says in a sentence what the agent should make of it.
	Message string `json:"message"`
}

func newInstructionOut(in airlock.Instruction) instructionOut {
	out := instructionOut{
		InstructionID: in.ID, ApprovalID: in.RequestID, Status: string(in.Status),
		Note: in.Note, Answer: in.Answer, CreatedAt: formatTime(in.CreatedAt),
	}
	switch in.Status {
	case airlock.StateApproved:
		if in.Answer != "" {
			out.Message = fmt.Sprintf("%s was answered: %q.", in.RequestID, in.Answer)
		} else {
			out.Message = fmt.Sprintf("%s was approved; see approval_status for its expiresAt and, for a command, its outcome.", in.RequestID)
		}
	case airlock.StateDenied:
		out.Message = fmt.Sprintf("%s was denied: do not proceed with it.", in.RequestID)
	case airlock.StateExpired:
		out.Message = fmt.Sprintf("%s expired without a decision: nothing was approved.", in.RequestID)
	default:
		out.Message = fmt.Sprintf("%s is %s.", in.RequestID, in.Status)
	}
	if in.Note != "" {
		out.Message += " The reviewer's note: " + quoteNote(in.Note)
	}
	return out
}

func quoteNote(s string) string {
	return fmt.Sprintf("%q", s)
}

type heartbeatOut struct {
	Session sessionOut `json:"session"`
	// Instructions are delivered exactly once: this heartbeat took them.
	Instructions []instructionOut `json:"instructions"`
	Next         string           `json:"next"`
}

type sessionCloseOut struct {
	SessionID string `json:"sessionId"`
	Status    string `json:"status"`
	// CancelledCount is how many pending requests closing cancelled.
	CancelledCount int    `json:"cancelledCount"`
	Next           string `json:"next"`
}

// itemOut is one work item.
type itemOut struct {
	ItemID     string `json:"itemId"`
	Title      string `json:"title"`
	ColumnKey  string `json:"columnKey"`
	ColumnName string `json:"columnName,omitempty"`
	Version    int    `json:"version"`
	CreatedAt  string `json:"createdAt"`
	UpdatedAt  string `json:"updatedAt"`
}

func newItemOut(w airlock.WorkItem) itemOut {
	return itemOut{
		ItemID: w.ID, Title: w.Title, ColumnKey: w.ColumnKey, Version: w.Version,
		CreatedAt: formatTime(w.CreatedAt), UpdatedAt: formatTime(w.UpdatedAt),
	}
}

type columnOut struct {
	Key      string    `json:"key"`
	Name     string    `json:"name"`
	Position int       `json:"position"`
	Items    []itemOut `json:"items"`
}

type boardOut struct {
	Columns []columnOut `json:"columns"`
	Next    string      `json:"next"`
}

// formatTime writes a time as RFC 3339 UTC at microsecond precision, the
// precision both stores keep (as REST does).
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano)
}

// plural returns "1 one" or "n many".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
