package provider

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// idleRecheck is how long the scheduler sleeps when nothing is pending. It
// is a safety net only: creations wake the scheduler directly.
const idleRecheck = time.Minute

// Sizing of expiry sweeps. Each sweep is one store write, which on SQLite
// holds the one writer (every other write waits) and on PostgreSQL holds
// its rows' locks. A sweep is sized so that it takes about sweepTarget,
// from how long the last full one took; the store's writer is free
// between sweeps, so other writes interleave with a long backlog's expiry.
// The target leaves room under SQLite's bound of 25 ms for a busy
// machine (docs/performance.md, "Expiry of a large backlog"); WAL
// checkpoints run beside the writer (sqlite/checkpoint.go), so a sweep
// pays for one only when the log outgrows the writer's backstop.
// A store may size its own (store.Extras.SweepTarget): PostgreSQL's
// sweeps hold only their own rows' locks, and pay a fixed cost each that
// a 10 ms target left at minSweep rows under load (docs/performance.md,
// "Scale").
const (
	sweepTarget = 10 * time.Millisecond
	// minSweep and maxSweep bound a sweep's rows (the first sweep takes
	// Config.ExpiryBatch, which may lie outside them).
	minSweep = 16
	maxSweep = 20_000
)

// Run runs the expiry scheduler until ctx ends. It catches up on overdue
// requests at once, then sleeps until the next deadline (not a scan every
// second), and is woken early when a request with an earlier deadline is
// created. Running it in several replicas is safe: expiry is a conditional
// write, so a request expires once whoever gets there first.
//
// Beside it, Run relays other replicas' changes when the store has a
// change feed (PostgreSQL), watches the token stamp when it has one
// (SQLite, watchTokenStamp), runs the audit log's sequencer
// (auditlog.go) and, with Config.RetainPayloads, the purge of old
// payloads (retention.go), until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	if s.feed != nil {
		done := make(chan struct{})
		defer func() { <-done }()
		go func() {
			defer close(done)
			s.listen(ctx, s.feed)
		}()
	}
	if s.tokens != nil {
		done := make(chan struct{})
		defer func() { <-done }()
		go func() {
			defer close(done)
			s.watchTokenStamp(ctx)
		}()
	}
	{
		done := make(chan struct{})
		defer func() { <-done }()
		go func() {
			defer close(done)
			s.escalateLoop(ctx)
		}()
	}
	if s.audit.run {
		done := make(chan struct{})
		defer func() { <-done }()
		go func() {
			defer close(done)
			s.sequenceLoop(ctx)
		}()
	}
	{
		done := make(chan struct{})
		defer func() { <-done }()
		go func() {
			defer close(done)
			s.retentionLoop(ctx)
		}()
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-s.kick:
		}
		expired, err := s.ExpireDue(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Error("expire due requests", "err", err)
		}
		sleep := s.nextPass(ctx, expired, err)
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(sleep)
	}
}

// nextPass says how long the scheduler sleeps after a pass that expired
// n requests (err its error).
//
// A pass that expired some is likely part of a burst: another replica's
// sweep may hold due rows (PostgreSQL's sweeps skip locked rows), or
// more fall due. The next pass comes after a pause of one sweep's target,
// without reading the next deadline: with a burst due within one second,
// that read walks the whole second's index entries (on PostgreSQL about
// 40 ms with 100,000 due), and read once per sweep it cost the database
// more than the sweeps. A pass that expired none reads it, and pauses
// likewise when it is already due: those rows are held by another
// writer, and sweeping again at once would only spin.
func (s *Service) nextPass(ctx context.Context, n int, err error) time.Duration {
	if n > 0 && err == nil {
		s.nextWake.Store(s.clock.Now().UnixMicro())
		return s.sweep.target
	}
	next, ok, err := s.system.NextDeadline(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.Error("next deadline", "err", err)
		return time.Second
	case !ok:
		s.nextWake.Store(0)
		return idleRecheck
	}
	s.nextWake.Store(next.UnixMicro())
	if wait := next.Sub(s.clock.Now()); wait > 0 {
		return min(wait, idleRecheck)
	}
	return s.sweep.target
}

// escalateLoop widens the requests whose escalation is due every
// escalateEvery, until ctx ends (EscalateDue).
func (s *Service) escalateLoop(ctx context.Context) {
	t := time.NewTicker(s.escalateEvery)
	defer t.Stop()
	for {
		if _, err := s.EscalateDue(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("escalate due requests", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// EscalateDue widens every pending request whose escalation is due to its
// escalation groups, once across replicas, and wakes whoever watches them;
// it returns how many it escalated.
func (s *Service) EscalateDue(ctx context.Context) (int, error) {
	n := 0
	for {
		ids, err := s.system.EscalateDue(ctx, store.DefaultExpireBatch)
		n += len(ids)
		s.hub.publish(ids...)
		if err != nil || len(ids) < store.DefaultExpireBatch {
			return n, err
		}
	}
}

// listen relays other replicas' changes to this one's waiters, and keeps
// listening across errors until ctx ends.
func (s *Service) listen(ctx context.Context, feed store.ChangeFeed) {
	for ctx.Err() == nil {
		err := feed.Listen(ctx, func(ids []string) {
			if ids == nil {
				s.hub.publishAll()
				return
			}
			requests, tokens := splitTokenIDs(ids)
			if len(tokens) > 0 {
				s.hub.tokensChanged(tokens...)
			}
			s.hub.publish(requests...)
		})
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("change feed stopped; retrying", "err", err)
		s.hub.publishAll()
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// splitTokenIDs splits what a change feed announced into the IDs of
// requests and those of tokens (revoked or replaced).
func splitTokenIDs(ids []string) (requests, tokens []string) {
	isToken := func(id string) bool { return strings.HasPrefix(id, airlock.PrefixToken) }
	if !slices.ContainsFunc(ids, isToken) {
		return ids, nil
	}
	for _, id := range ids {
		if isToken(id) {
			tokens = append(tokens, id)
		} else {
			requests = append(requests, id)
		}
	}
	return requests, tokens
}

// wakeSchedulerFor kicks the scheduler when deadline is earlier than what it
// sleeps until.
func (s *Service) wakeSchedulerFor(deadline time.Time) {
	next := s.nextWake.Load()
	if next != 0 && deadline.UnixMicro() >= next {
		return
	}
	s.nextWake.Store(deadline.UnixMicro())
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// sweeper runs a Service's expiry passes (ExpireDue) one at a time: the
// scheduler is their one caller in a server (readers expire their own
// requests, expireOverdue), and a pass sizes its sweeps from the last one.
type sweeper struct {
	// turn holds a token while a pass runs; a caller that comes meanwhile
	// waits for its own turn, or for its context to end.
	turn chan struct{}
	// size is the rows of the next sweep (0: Config.ExpiryBatch); only the
	// pass holding the turn uses it.
	size int
	// target is how long a sweep should take: the store's
	// (store.Extras.SweepTarget), or sweepTarget.
	target time.Duration
}

// ExpireDue expires every pending request whose deadline has come, in
// sweeps of one store write each, wakes their waiters and returns how many
// it expired. Calls run one at a time.
func (s *Service) ExpireDue(ctx context.Context) (int, error) {
	select {
	case s.sweep.turn <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	defer func() { <-s.sweep.turn }()
	total := 0
	for {
		size := s.sweep.size
		if size <= 0 {
			size = s.batch
		}
		start := time.Now()
		rs, err := s.system.ExpireDue(ctx, size)
		took := time.Since(start)
		if err != nil {
			return total, err
		}
		s.announceExpired(rs)
		total += len(rs)
		if len(rs) < size {
			// Fewer due than it could take: everything due when that
			// sweep ran has expired.
			return total, nil
		}
		s.sweep.size = nextSweep(size, took, s.sweep.target)
	}
}

// announceExpired counts the requests an expiry write committed and wakes
// their waiters.
func (s *Service) announceExpired(rs []airlock.Request) {
	ids := make([]string, len(rs))
	committed := s.clock.Now()
	for i, r := range rs {
		ids[i] = r.ID
		s.metrics.expired(r, committed)
	}
	s.hub.publish(ids...)
}

// nextSweep sizes the sweep after a full one of n rows that took took: in
// proportion to target / took (a sweep's fixed cost, its commit, is
// then counted in), at most doubling or halving at a time so that one
// slow sweep on a busy machine does not swing it, within minSweep and
// maxSweep.
func nextSweep(n int, took, target time.Duration) int {
	next := 2 * n
	if took > 0 {
		next = int(float64(n) * float64(target) / float64(took))
	}
	next = min(max(next, n/2), 2*n)
	return min(max(next, minSweep), maxSweep)
}

// overdueExpiries coalesces the expiries of readers' overdue requests
// (expireIfDue): a reader expires its own request, not the backlog, and
// readers that come at once — a mass deadline with a long-poll on every
// request — share one store write per round of up to maxOverdueRound
// (ExpireRequests) instead of one each. A goroutine started when the first
// round is queued writes the rounds one at a time, oldest first, and ends
// when none is left; each reader returns once its own round is written.
// Its zero value is ready.
type overdueExpiries struct {
	mu      sync.Mutex
	queue   []*overdueRound // rounds waiting, oldest first; the last gathers readers until full
	writing bool            // the goroutine is running
}

// overdueRound is one ExpireRequests call for the IDs of its readers; err
// is set before done is closed.
type overdueRound struct {
	ids  []string
	done chan struct{}
	err  error
}

// maxOverdueRound bounds the IDs of one round, so that its write holds the
// SQLite writer about as long as a sweep does, and its readers hear as soon
// as it is written rather than after everyone's.
const maxOverdueRound = 200

// overdueWriteTimeout bounds one round's write, which no reader's context
// bounds: a round is its readers' together.
const overdueWriteTimeout = time.Minute

// expireOverdue expires request id if it is pending and due, in a round
// shared with the other readers that ask at once, and returns when that
// round has been written (or ctx ends).
func (s *Service) expireOverdue(ctx context.Context, id string) error {
	e := &s.overdue
	e.mu.Lock()
	if n := len(e.queue); n == 0 || len(e.queue[n-1].ids) >= maxOverdueRound {
		e.queue = append(e.queue, &overdueRound{done: make(chan struct{})})
	}
	mine := e.queue[len(e.queue)-1]
	mine.ids = append(mine.ids, id)
	if !e.writing {
		e.writing = true
		go s.writeOverdueRounds()
	}
	e.mu.Unlock()
	select {
	case <-mine.done:
		return mine.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writeOverdueRounds writes the queued rounds until none is left.
func (s *Service) writeOverdueRounds() {
	e := &s.overdue
	for {
		e.mu.Lock()
		if len(e.queue) == 0 {
			e.writing = false
			e.mu.Unlock()
			return
		}
		r := e.queue[0]
		e.queue[0] = nil
		e.queue = e.queue[1:]
		e.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), overdueWriteTimeout)
		r.err = s.writeOverdue(ctx, r.ids)
		cancel()
		close(r.done)
	}
}

// writeOverdue expires the due requests among ids and wakes their waiters.
func (s *Service) writeOverdue(ctx context.Context, ids []string) error {
	rs, err := s.system.ExpireRequests(ctx, ids)
	if err != nil {
		return err
	}
	s.announceExpired(rs)
	return nil
}
