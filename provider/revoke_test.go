package provider

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/store"
)

// TestAwaitOfRevokedToken checks that a long-poll (Service.Request with a
// wait, as REST and MCP's waitSeconds make) parked before its token is
// revoked answers unauthorized within a second of the revocation: made by
// this service, or by another process on the same SQLite file, which the
// waiting one hears of through the token stamp.
func TestAwaitOfRevokedToken(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		otherProcess bool
	}{
		{"revoked in this process", false},
		{"revoked by another process on the file", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "airlock.db")
			b := setup(t, options{realClock: true, path: path})
			b.runScheduler(t) // watches the token stamp
			revoker := b.svc
			if tc.otherProcess {
				revoker, _ = serviceOn(t, path)
			}
			r := b.create(t, "1h")

			answered := make(chan error, 1)
			before := b.svc.Waiters()
			go func() {
				_, err := b.svc.Request(context.Background(), b.agent, r.ID, time.Minute)
				answered <- err
			}()
			// Nothing to inject: poll the waiter count.
			testkit.Eventually(t, 5*time.Second, "the long-poll to subscribe", func() bool { return b.svc.Waiters() != before })

			if _, err := revoker.RevokeToken(t.Context(), b.admin, b.agent.ID); err != nil {
				t.Fatal(err)
			}
			revokedAt := time.Now()
			select {
			case err := <-answered:
				wantCode(t, err, airlock.CodeUnauthorized, "")
				t.Logf("answered %s after the revocation", time.Since(revokedAt))
			case <-time.After(time.Second):
				t.Fatal("the long-poll of a token revoked a second ago has not answered")
			}
		})
	}
}

// revokingRead runs before, once, just before the first batched read (a
// parked waiter's): there the test revokes a token and decides a request,
// the interleaving where both land between a waiter's token check and its
// read. With checks set, it is a store that checks tokens itself, as
// PostgreSQL does (store.TokenChecker): a read through a view of Checking
// makes the token check first, then runs before, then reads.
type revokingRead struct {
	store.Store
	checks bool
	once   sync.Once
	before func()
}

func (s *revokingRead) Extras() store.Extras {
	x := s.Store.Extras()
	if s.checks {
		x.TokenCheck = s
	}
	return x
}

func (s *revokingRead) GetRequests(ctx context.Context, ids []string) ([]airlock.Request, error) {
	s.once.Do(s.before)
	return s.Store.GetRequests(ctx, ids)
}

func (s *revokingRead) Checking(c *airlock.TokenCheck) store.Store { return checkedView{s, c} }

func (s *revokingRead) CheckToken(ctx context.Context, c *airlock.TokenCheck) error {
	if !c.Pending() {
		return nil
	}
	t, err := s.Store.TokenByHash(ctx, c.Token().Hash)
	switch {
	case airlock.ErrorCode(err) == airlock.CodeNotFound || err == nil && t.RevokedAt != nil:
		return c.Fail()
	case err != nil:
		return err
	}
	c.Pass()
	return nil
}

// checkedView is revokingRead's view for a check: its reads make the
// check first. Its other calls leave the check to FinishTokenCheck.
type checkedView struct {
	*revokingRead
	check *airlock.TokenCheck
}

func (v checkedView) GetRequest(ctx context.Context, id string) (airlock.Request, error) {
	if err := v.CheckToken(ctx, v.check); err != nil {
		return airlock.Request{}, err
	}
	return v.revokingRead.GetRequest(ctx, id)
}

func (v checkedView) GetRequests(ctx context.Context, ids []string) ([]airlock.Request, error) {
	if err := v.CheckToken(ctx, v.check); err != nil {
		return nil, err
	}
	return v.revokingRead.GetRequests(ctx, ids)
}

// TestAwaitRevokedBeforeItsRead: a waiter whose token is revoked after its
// token was checked and before its read, and whose request is then
// decided, or found overdue and expired by the waiter itself, answers
// unauthorized, not with what it read: on SQLite, and on a store that
// checks tokens itself.
func TestAwaitRevokedBeforeItsRead(t *testing.T) {
	t.Parallel()
	for _, checks := range []bool{false, true} {
		for _, then := range []string{"decided", "overdue"} {
			t.Run(fmt.Sprintf("the store checks tokens: %v, %s", checks, then), func(t *testing.T) {
				t.Parallel()
				hook := &revokingRead{checks: checks}
				b := setup(t, options{wrap: func(s store.Store) store.Store { hook.Store = s; return hook }})
				r := b.create(t, "1h")
				var hookErr error
				hook.before = func() {
					ctx := context.Background()
					if _, err := b.svc.RevokeToken(ctx, b.admin, b.agent.ID); err != nil {
						hookErr = err
						return
					}
					if then == "overdue" {
						b.clock.Advance(2 * time.Hour)
						return
					}
					_, hookErr = b.svc.Decide(ctx, b.reviewer, r.ID, airlock.DecisionInput{Status: airlock.StateApproved})
				}
				got, err := b.svc.Request(t.Context(), b.agent, r.ID, time.Minute)
				if hookErr != nil {
					t.Fatalf("revoking before the read: %v", hookErr)
				}
				if airlock.ErrorCode(err) != airlock.CodeUnauthorized {
					t.Fatalf("the revoked token's long-poll answered %s, %v; want unauthorized", got.State, err)
				}
			})
		}
	}
}
