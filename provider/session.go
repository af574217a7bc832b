package provider

import (
	"context"
	"encoding/json"
	"time"

	"github.com/airlockhq/airlock"
)

// StaleAfter returns how long a session may go without a heartbeat before
// it shows as stale (Config.StaleAfter).
func (s *Service) StaleAfter() time.Duration { return s.stale }

// OpenSession opens an MCP session for the calling agent: an instance of
// kind session, which owns the requests linked to it.
func (s *Service) OpenSession(ctx context.Context, c airlock.Caller, name string, metadata json.RawMessage) (airlock.Instance, error) {
	if c.Role != airlock.RoleAgent {
		return airlock.Instance{}, forbidden("only agent tokens open sessions")
	}
	in := airlock.InstanceInput{Name: name, Metadata: metadata}
	if err := in.Validate(); err != nil {
		return airlock.Instance{}, err
	}
	return s.storeFor(c).CreateInstance(ctx, airlock.Instance{
		ID: airlock.NewID(airlock.PrefixSession), OwnerID: c.ID, Name: in.Name, Metadata: in.Metadata,
		Kind: airlock.InstanceSession,
	}, c.ID)
}

// ownSession returns the caller's session, open or closed; any other
// caller's session, or an ID that is no session, is not_found.
func (s *Service) ownSession(ctx context.Context, c airlock.Caller, id string) (airlock.Instance, error) {
	if c.Role != airlock.RoleAgent {
		return airlock.Instance{}, forbidden("only the agent that opened a session can use it")
	}
	in, err := s.storeFor(c).GetSession(ctx, id)
	if err != nil {
		return airlock.Instance{}, err
	}
	// An empty ID owns nothing.
	if c.ID == "" || in.OwnerID != c.ID {
		return airlock.Instance{}, airlock.NotFound("session", id)
	}
	return in, nil
}

// Heartbeat records that the caller's open session is alive and returns
// the instructions (decisions and answers on its linked requests) not yet
// delivered; each is returned by exactly one heartbeat. A closed session
// is not_found.
func (s *Service) Heartbeat(ctx context.Context, c airlock.Caller, sessionID string) (airlock.Instance, []airlock.Instruction, error) {
	if _, err := s.ownSession(ctx, c, sessionID); err != nil {
		return airlock.Instance{}, nil, err
	}
	in, ists, err := s.storeFor(c).Heartbeat(ctx, sessionID)
	if airlock.ErrorCode(err) == airlock.CodeNotFound {
		return airlock.Instance{}, nil, airlock.Errorf(airlock.CodeNotFound,
			"session %q not found: it is closed; open a new one with session_open", sessionID)
	}
	return in, ists, err
}

// CloseSession closes the caller's session and cancels its pending
// requests in the same transaction; the session stays readable as closed.
// It returns how many requests it cancelled; closing a closed session
// cancels nothing and succeeds, so a retried close is harmless.
func (s *Service) CloseSession(ctx context.Context, c airlock.Caller, sessionID string) (int, error) {
	if _, err := s.ownSession(ctx, c, sessionID); err != nil {
		return 0, err
	}
	ids, err := s.storeFor(c).CloseSession(ctx, sessionID, c.ID)
	if err != nil {
		return 0, err
	}
	s.hub.publish(ids...)
	if s.metrics != nil {
		for range ids {
			s.metrics.transitions.WithLabelValues(string(airlock.StateCancelled)).Inc()
		}
	}
	return len(ids), nil
}

// Sessions lists sessions, open and closed, newest first: every session
// for reviewers and admins, their own for agents.
func (s *Service) Sessions(ctx context.Context, c airlock.Caller) ([]airlock.Instance, error) {
	st := s.storeFor(c)
	switch c.Role {
	case airlock.RoleReviewer, airlock.RoleAdmin:
		return st.ListSessions(ctx, "")
	case airlock.RoleAgent:
		if c.ID == "" {
			return nil, nil
		}
		return st.ListSessions(ctx, c.ID)
	}
	return nil, forbidden("this token's role may not list sessions")
}

// SessionStatus says how in shows now, by the service's clock and
// StaleAfter.
func (s *Service) SessionStatus(in airlock.Instance) airlock.SessionStatus {
	return in.SessionStatus(s.clock.Now(), s.stale)
}

// TokenNames returns the names of the tokens among ids, for reviewers and
// admins to read people by rather than by token IDs (the sessions page's
// agents). IDs that name no token, such as system actors, are left out,
// so a caller shows them as they are. Each distinct ID is one read.
func (s *Service) TokenNames(ctx context.Context, c airlock.Caller, ids []string) (map[string]string, error) {
	if c.Role != airlock.RoleReviewer && c.Role != airlock.RoleAdmin {
		return nil, forbidden("only reviewers and admins read token names")
	}
	out := map[string]string{}
	st := s.storeFor(c)
	for _, id := range ids {
		if _, done := out[id]; done || id == "" {
			continue
		}
		t, err := st.GetToken(ctx, id)
		switch {
		case err == nil:
			out[id] = t.Name
		case airlock.ErrorCode(err) == airlock.CodeNotFound:
			out[id] = ""
		default:
			return nil, err
		}
	}
	for id, name := range out {
		if name == "" {
			delete(out, id)
		}
	}
	return out, nil
}
