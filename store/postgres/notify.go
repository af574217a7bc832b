package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Notification payloads: the IDs of the changed requests, and of the
// tokens revoked or replaced (so that every replica's long-polls of such a
// token re-check it at once), comma-separated.
// PostgreSQL refuses payloads of 8000 bytes or more, so a large change is
// split into several notifications, about 270 IDs each. Only a change of
// more than maxNotifications of them is announced with one empty payload,
// which listeners read as "re-read everything". A batch that changed no
// request (only board or token events) is announced with
// eventsOnlyPayload, which wakes event streams and nothing else.
//
// "Re-read everything" wakes every long-poll on every replica, each of
// which then reads its request: with 100,000 idle waiters, deleting an
// instance of 10,000 requests cost 100,000 reads rather than 10,000, and
// each delete took 11.7 s under load (docs/performance.md, "Scale"). A
// notification costs the database one 8 KB page of its notification
// queue, so splitting is far cheaper up to hundreds of them: 512 carry
// about 139,000 IDs (4 MB), an instance of 100,000 requests with room to
// spare.
const (
	maxPayload        = 7900
	maxNotifications  = 512
	eventsOnlyPayload = "."
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
// everything" payload, and no IDs (not nil) for eventsOnlyPayload.
func parsePayload(p string) []string {
	switch p {
	case "":
		return nil
	case eventsOnlyPayload:
		return []string{}
	}
	return strings.Split(p, ",")
}

// How committed changes are announced.
//
// A NOTIFY inside a write transaction would be held, with PostgreSQL's
// notification queue lock, through that write's WAL flush, and serialize
// every notifying commit in the database. Airlock notifies in a
// transaction of its own instead, right after the write's COMMIT. Such a
// transaction writes nothing, so its commit waits for no flush, and it
// holds the queue's lock for microseconds.
//
// When this store has sent nothing for notifyGap, the write's commit
// pipeline carries the notification itself: [append events, COMMIT,
// pg_notify] in one round trip, where pg_notify runs in its own implicit
// transaction once COMMIT has succeeded (and not at all when it failed).
// The server runs it even if this process dies right after sending.
// Under load, writes hand their changed IDs to the store's notifier
// instead (announce), which sends whatever has accumulated as one
// statement at most every notifyGap: each send costs the database about as
// much as a small write. Either way, a notification that never comes is
// made up for by Listen's reading of the audit log (catchUp).

// notifyGap is the least time between two sends of one store: it caps
// the notification transactions of a replica at 500 a second, and delays
// a change committed right after a send by at most that long. Each send
// is a transaction, and a wake-up of every replica's listener: at 8
// clients on one replica, a gap of 250 µs sent one for nearly every write
// (6.4 transactions a lifecycle), 2 ms far fewer (4.2), and the replica
// did 5 % more lifecycles. A decision reaching an agent on another
// replica up to 2 ms later costs nobody anything.
const notifyGap = 2 * time.Millisecond

// notifySQL sends payloads on a channel.
const notifySQL = `SELECT pg_notify(@channel, p) FROM unnest(@payloads::text[]) AS p`

// notifyTimeout bounds one send of the notifier. A send that fails is not
// retried beyond once.
const notifyTimeout = 5 * time.Second

// notes are the changes committed through this store and not announced
// yet, and when the last notification was sent.
type notes struct {
	last atomic.Int64 // UnixNano when the last send began

	mu      sync.Mutex
	ids     []string
	pending bool          // something committed since the last send
	kick    chan struct{} // one slot: the notifier has work
	stopped chan struct{} // closed when the notifier has sent its last batch
}

// notifyArgs are notifySQL's arguments announcing ids (none: a change
// that only appended events).
func (s *Store) notifyArgs(ids []string) named {
	ps := payloads(ids)
	if len(ps) == 0 {
		ps = []string{eventsOnlyPayload}
	}
	return named{"channel": s.channel, "payloads": ps}
}

// sendNow reports whether a write about to commit should carry its own
// notification: nothing was sent for notifyGap. It then counts as sent.
func (s *Store) sendNow() bool {
	if s.hooks.batchNotify || (s.hooks.dropNotify != nil && s.hooks.dropNotify()) {
		return false
	}
	now := time.Now().UnixNano()
	last := s.notes.last.Load()
	return now-last >= int64(notifyGap) && s.notes.last.CompareAndSwap(last, now)
}

// announce queues the requests a committed write changed (none for a
// write that only appended events) for the notifier.
func (s *Store) announce(ids []string) {
	n := &s.notes
	n.mu.Lock()
	n.ids = append(n.ids, ids...)
	n.pending = true
	n.mu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default: // already kicked: the next send takes these too
	}
}

func (s *Store) startNotifier() {
	s.notes.kick = make(chan struct{}, 1)
	s.notes.stopped = make(chan struct{})
	go s.notifier()
}

// notifier sends the queued announcements, at most every notifyGap, until
// the store closes, and then those still queued.
func (s *Store) notifier() {
	defer close(s.notes.stopped)
	gap := time.NewTimer(0)
	defer gap.Stop()
	for {
		select {
		case <-s.notes.kick:
		case <-s.done:
			s.sendNotes()
			return
		}
		if wait := time.Duration(s.notes.last.Load() + int64(notifyGap) - time.Now().UnixNano()); wait > 0 {
			// Back to back with the last send: gather a little more first.
			gap.Reset(wait)
			select {
			case <-gap.C:
			case <-s.done:
				s.sendNotes()
				return
			}
		}
		s.sendNotes()
	}
}

// sendNotes sends everything queued as one statement, in autocommit.
func (s *Store) sendNotes() {
	n := &s.notes
	n.mu.Lock()
	ids, pending := n.ids, n.pending
	n.ids, n.pending = nil, false
	n.mu.Unlock()
	if !pending || (s.hooks.dropNotify != nil && s.hooks.dropNotify()) {
		return
	}
	n.last.Store(time.Now().UnixNano())
	args := s.notifyArgs(ids)
	for attempt := 1; attempt <= 2; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
		_, err := s.pool.Exec(ctx, notifySQL, args)
		cancel()
		if err == nil {
			return
		}
	}
}

// Listen polls the audit log every listenPoll, reading what was appended
// since it last looked, so that a change whose notification never came (a
// replica that died between its COMMIT and its NOTIFY, a send that failed)
// still wakes this replica's waiters, that much later. The same read
// checks that the listening connection still answers.
const (
	listenPoll = 500 * time.Millisecond
	pollPage   = 1000
)

// Listen implements store.ChangeFeed. It holds one connection of its own
// (not from the pool) listening on the schema's channel, calls changed(nil)
// once listening — anything changed before then, or while an earlier
// connection was down, was missed — and then changed(ids) for every
// notification, from this replica and every other, and for what it finds
// in the audit log every listenPoll (catchUp: an ID may be heard twice).
// It returns nil when ctx ends or the store is closed, and an error when
// the connection fails; the caller listens again (provider.Service.Run
// retries every second).
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
	// Listening now: every later commit is either notified or, failing
	// that, found after this point by catchUp; changed(nil) covers the rest.
	cursor, err := s.settledUpTo(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("postgres: listen on %s: %w", s.channel, err)
	}
	changed(nil)
	every := listenPoll
	if s.hooks.listenPoll > 0 {
		every = s.hooks.listenPoll
	}
	next := time.Now().Add(every)
	for {
		wait, cancelWait := context.WithDeadline(ctx, next)
		n, err := conn.WaitForNotification(wait)
		cancelWait()
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, context.DeadlineExceeded):
			if cursor, err = s.catchUp(ctx, conn, cursor, changed); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("postgres: listen on %s: read the audit log: %w", s.channel, err)
			}
			next = time.Now().Add(every)
		case err != nil:
			return fmt.Errorf("postgres: listen on %s: %w", s.channel, err)
		default:
			changed(parsePayload(n.Payload))
		}
	}
}

// catchUp announces, with changed, the requests of the events appended
// after cursor (and the tokens of token events), and returns the new
// cursor: the last event announced. It announces settled events only (see
// gate), so that an event that commits later with a smaller ID is not
// passed over. It reads on the listening
// connection, so an error means that connection failed; when the events
// cannot be settled now, it leaves them for the next poll.
func (s *Store) catchUp(ctx context.Context, conn *pgx.Conn, cursor int64, changed func(ids []string)) (int64, error) {
	for {
		evs, err := readChanges(ctx, conn, cursor, math.MaxInt64)
		if err != nil || len(evs) == 0 {
			return cursor, err
		}
		if evs[len(evs)-1].id > s.gate.settled.Load() {
			upto, err := s.settledUpTo(ctx)
			if err != nil {
				return cursor, nil
			}
			if evs, err = readChanges(ctx, conn, cursor, upto); err != nil || len(evs) == 0 {
				return cursor, err
			}
		}
		ids := []string{} // not nil: nil would mean "re-read everything"
		seen := map[string]bool{}
		for _, e := range evs {
			if e.subject != "" && !seen[e.subject] {
				seen[e.subject] = true
				ids = append(ids, e.subject)
			}
		}
		changed(ids)
		cursor = evs[len(evs)-1].id
		if len(evs) < pollPage {
			return cursor, nil
		}
	}
}

// change is an event as catchUp reads it.
type change struct {
	id      int64
	subject string // the request changed, or the token of a token event
}

// readChanges reads up to pollPage events with after < ID <= upto: for
// each, the request it changed, or for a token event the token (only
// token events name one).
func readChanges(ctx context.Context, conn *pgx.Conn, after, upto int64) ([]change, error) {
	rows, err := conn.Query(ctx, `SELECT id, coalesce(nullif(request_id, ''), token_id) FROM events WHERE id > @after AND id <= @upto ORDER BY id LIMIT @limit`,
		named{"after": after, "upto": upto, "limit": pollPage})
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (change, error) {
		var c change
		err := row.Scan(&c.id, &c.subject)
		return c, err
	})
}
