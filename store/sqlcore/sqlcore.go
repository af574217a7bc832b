package sqlcore

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// Text binds raw JSON as text holding its exact bytes (a []byte would bind
// as bytes, a BLOB that SQLite's STRICT TEXT columns refuse), and absent
// JSON as NULL.
func Text(raw []byte) any {
	if len(raw) == 0 {
		return nil
	}
	return string(raw)
}

// NullString binds "" as NULL.
func NullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Value binds what p points to, and a nil p as NULL: an optional field,
// or a patch's field left as it is.
func Value[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// RequestColumns are the column values of a new request's question and
// proposal, each NULL when the request has none.
type RequestColumns struct {
	Question                      any // the question as JSON text
	Mode, Method, Input, Observed any // proposal_mode, command_method, command_input, command_observed
}

// NewRequest is how CreateRequest starts: p with its defaults, refused
// when invalid, and its request's question and proposal as column values.
func NewRequest(p store.NewRequestParams) (store.NewRequestParams, RequestColumns, error) {
	p = p.WithDefaults()
	if err := p.Validate(); err != nil {
		return p, RequestColumns{}, err
	}
	var c RequestColumns
	in := p.Request
	if in.Question != nil {
		b, err := json.Marshal(in.Question)
		if err != nil {
			return p, RequestColumns{}, fmt.Errorf("request %s: question: %w", in.ID, err)
		}
		c.Question = string(b)
	}
	if pr := in.Proposal; pr != nil {
		c.Mode = pr.Mode
		if pr.Command != nil {
			c.Method, c.Input, c.Observed = pr.Command.Method, Text(pr.Command.Input), Text(pr.Command.Observed)
		}
	}
	return p, c, nil
}

// Question reads request id's stored question (the question column's
// JSON text); nil when the column is NULL (ok false).
func Question(id, stored string, ok bool) (*airlock.Question, error) {
	if !ok {
		return nil, nil
	}
	q := new(airlock.Question)
	if err := json.Unmarshal([]byte(stored), q); err != nil {
		return nil, fmt.Errorf("request %s: stored question: %w", id, err)
	}
	return q, nil
}

// Decision is the decision of a request read in state: note, answer,
// when, by whom (and by whose name, when the decider's token or profile
// is known) and, for an approval, until when it may run. A request with
// no decided_at has none: the caller checks that first.
func Decision(state airlock.State, note, answer string, at time.Time, by, byName string, expires *time.Time) *airlock.Decision {
	return &airlock.Decision{
		Status:        state,
		Note:          note,
		Answer:        answer,
		DecidedAt:     at,
		DecidedBy:     by,
		DecidedByName: airlock.DeciderName(by, byName),
		ExpiresAt:     expires,
	}
}

// Proposal is a request's proposal read from its proposal_mode and
// command_* columns: nil when the mode is NULL (hasMode false), without a
// command when the method is.
func Proposal(mode string, hasMode bool, method string, hasMethod bool, input, observed []byte) *airlock.Proposal {
	if !hasMode {
		return nil
	}
	p := &airlock.Proposal{Mode: mode}
	if hasMethod {
		p.Command = &airlock.Command{Method: method, Input: input, Observed: observed}
	}
	return p
}

// Execution is a claimed request's execution attempt, read from its
// claimed_*, exec_* and finished_at columns. A request with no claimed_at
// has none: the caller checks that first.
func Execution(at time.Time, by, status string, finished *time.Time, detail string) *airlock.Execution {
	return &airlock.Execution{ClaimedAt: at, ClaimedBy: by, Status: airlock.ExecutionStatus(status), FinishedAt: finished, Detail: detail}
}

// Collect reads each of rows (*sql.Rows, pgx.Rows, Rows) with scan, in
// the rows' order, and stops at the first error. The caller closes rows.
func Collect[T any](rows interface {
	Next() bool
	Err() error
}, scan func() (T, error)) ([]T, error) {
	var out []T
	for rows.Next() {
		v, err := scan()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// RequestFilterConds calls cond with each condition f sets, in one order
// for both drivers: the requests column it compares, how ("=", or "<" for
// the seq of a page's cursor), the argument's name (for named
// parameters) and the argument. The caller has validated f.
func RequestFilterConds(f store.RequestFilter, cond func(column, op, name string, arg any)) {
	if f.OwnerID != "" {
		cond("owner_id", "=", "owner", f.OwnerID)
	}
	if f.State != "" {
		cond("state", "=", "state", string(f.State))
	}
	if f.InstanceID != "" {
		cond("instance_id", "=", "instance", f.InstanceID)
	}
	if f.Tool != "" {
		cond("tool", "=", "tool", f.Tool)
	}
	if f.Kind != "" {
		cond("kind", "=", "kind", string(f.Kind))
	}
	if f.BeforeSeq > 0 {
		cond("seq", "<", "before", f.BeforeSeq)
	}
}
