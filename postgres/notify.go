package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Notification payloads: the IDs of the changed requests, comma-separated.
// PostgreSQL refuses payloads of 8000 bytes or more, so a large change is
// split into several notifications; a change too large to be worth
// splitting (a sweep or an instance delete of thousands) is announced with
// one empty payload, which listeners read as "re-read everything".
const (
	maxPayload       = 7900
	maxNotifications = 8
)

// payloads splits ids into notification payloads, each ID once.
func payloads(ids []string) []string {
	if len(ids) == 0 {
		return nil
	}
	var (
		out  []string
		b    strings.Builder
		seen = make(map[string]bool, len(ids))
	)
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if b.Len() > 0 && b.Len()+1+len(id) > maxPayload {
			out = append(out, b.String())
			b.Reset()
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(id)
	}
	out = append(out, b.String())
	if len(out) > maxNotifications {
		return []string{""}
	}
	return out
}

// parsePayload reads a payload back: nil for the empty "re-read
// everything" payload.
func parsePayload(p string) []string {
	if p == "" {
		return nil
	}
	return strings.Split(p, ",")
}

// listenPing is how long Listen waits for a notification before checking
// that its connection still answers: a connection cut without a word (a
// failover, a partition) would otherwise look like a quiet database.
const listenPing = 15 * time.Second

// Listen implements airlock.ChangeFeed. It holds one connection of its own
// (not from the pool) listening on the schema's channel, calls changed(nil)
// once listening — anything changed before then, or while an earlier
// connection was down, was missed — and then changed(ids) for every
// notification, from this replica and every other. It returns nil when ctx
// ends or the store is closed, and an error when the connection fails; the
// caller listens again (provider.Service.Run retries every second).
func (s *Store) Listen(ctx context.Context, changed func(ids []string)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()

	cc := s.pool.Config().ConnConfig
	cc.RuntimeParams["application_name"] = cc.RuntimeParams["application_name"] + " listen"
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("postgres: listen: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("postgres: listen on %s: %w", s.channel, err)
	}
	changed(nil)
	for {
		wait, cancelWait := context.WithTimeout(ctx, listenPing)
		n, err := conn.WaitForNotification(wait)
		cancelWait()
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, context.DeadlineExceeded):
			// Quiet for a while: make sure the connection still answers.
			check, cancelCheck := context.WithTimeout(ctx, listenPing)
			err = conn.Ping(check)
			cancelCheck()
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("postgres: listen on %s: connection check: %w", s.channel, err)
			}
		case err != nil:
			return fmt.Errorf("postgres: listen on %s: %w", s.channel, err)
		default:
			changed(parsePayload(n.Payload))
		}
	}
}
