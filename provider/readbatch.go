package provider

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// readBatch combines the reads of long-polls woken at once. Deleting an
// instance cancels its 10,000 requests and wakes their 10,000 waiters
// together; each reading its request on its own made 10,000 reads, each a
// round trip, on every replica at once (docs/performance.md, "Woken
// waiters read together"). It works as a group commit does, with no timer: a waiter
// queues its read; the first to find no batch running starts one; the
// batch reads everything queued, at most store.MaxGetRequests IDs a
// statement, answers those waiters, and takes what queued meanwhile,
// until the queue is empty. A lone waiter's read is sent at once.
//
// The batch runs on a goroutine of its own, so the driver's deep frames
// never grow a waiter's stack (Await says why a parked waiter's stack
// must stay small).
type readBatch struct {
	mu      sync.Mutex
	queue   []*batchedRead
	running bool
}

// batchedRead is one waiter's read in a batch.
type batchedRead struct {
	id string
	// check is the waiter's token check, which the batch's read makes;
	// nil when the waiter's token was checked already (recheck).
	check *airlock.TokenCheck
	// answering is set when the waiter answers with what it reads,
	// terminal or not (look's done).
	answering bool
	// done is closed once r or err is set; only then may the waiter
	// read them.
	done chan struct{}
	r    airlock.Request
	err  error
}

// add queues b, and says whether the caller must start the batch.
func (q *readBatch) add(b *batchedRead) (start bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.queue = append(q.queue, b)
	start, q.running = !q.running, true
	return start
}

// take returns the reads queued, or nil, the batch having stopped, when
// there are none.
func (q *readBatch) take() []*batchedRead {
	q.mu.Lock()
	defer q.mu.Unlock()
	taken := q.queue
	q.queue = nil
	q.running = len(taken) > 0
	return taken
}

// readWoken is read for a waiter (look with recheck), its store read
// combined with those of the waiters woken with it (readBatch). c is the
// caller recheck returned; the checks read makes of the request, whether
// c may see it and whether it is overdue, are made here, for c.
func (s *Service) readWoken(ctx context.Context, c airlock.Caller, id string, answering bool) (airlock.Request, error) {
	b := &batchedRead{id: id, answering: answering, done: make(chan struct{})}
	if c.Check != nil && s.remembered != nil { // as storeFor
		b.check = c.Check
	}
	if s.reads.add(b) {
		go s.readQueued()
	}
	select {
	case <-b.done:
	case <-ctx.Done():
		return airlock.Request{}, ctx.Err()
	}
	if b.err != nil {
		return airlock.Request{}, b.err
	}
	if !airlock.CanReadRequest(c, b.r) {
		return airlock.Request{}, airlock.NotFound("approval request", id)
	}
	if !s.due(b.r) {
		return b.r, nil
	}
	// An overdue request is expired here, after the batch's token check:
	// its re-read makes a check of its own, after the expiry, as readPart
	// checks again after a read a waiter answers with.
	fresh := airlock.Caller{Token: c.Token, Check: airlock.NewTokenCheck(c.Token)}
	return s.expireIfDue(ctx, s.storeFor(fresh), b.r)
}

// readQueued runs the batch: it reads what is queued until nothing is.
func (s *Service) readQueued() {
	for {
		q := s.reads.take()
		if q == nil {
			return
		}
		// No waiter's context bounds a read that answers many; MaxWait
		// bounds a store that hangs, as the waiters' own reads were.
		ctx, cancel := context.WithTimeout(context.Background(), s.maxWait)
		for _, g := range tokenGroups(q) {
			for part := range slices.Chunk(g, store.MaxGetRequests) {
				s.readPart(ctx, part)
			}
		}
		cancel()
	}
}

// tokenGroups splits q by the token check its reads need: one group for
// the reads with none, and one for each token as its callers know it
// (what the check compares), so one check answers for a whole group.
func tokenGroups(q []*batchedRead) [][]*batchedRead {
	at := map[string]int{}
	var groups [][]*batchedRead
	for _, b := range q {
		key := ""
		if b.check != nil {
			t := b.check.Token()
			key = strings.Join(append([]string{"t", string(t.Hash), t.ID, string(t.Role), t.Principal}, t.Scopes...), "\x00")
		}
		i, ok := at[key]
		if !ok {
			i = len(groups)
			at[key] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], b)
	}
	return groups
}

// readPart reads the requests of part, whose reads all need the same
// token check (or none), in one statement, and answers each waiter. The
// check is a new one, made with the statement, as each waiter's own read
// would have made its own; its outcome is recorded in each waiter's check.
//
// The check is sent ahead of the read, so a revocation and then a
// decision may both land between them. When a waiter will answer with
// what was read (a terminal request, or its wait is over), the token is
// checked once more after the read, one round trip for the whole part,
// and that check's outcome is the one recorded: no waiter answers a
// revoked token with what it read after the revocation.
func (s *Service) readPart(ctx context.Context, part []*batchedRead) {
	st := s.system
	var check *airlock.TokenCheck
	if part[0].check != nil {
		check = airlock.NewTokenCheck(part[0].check.Token())
		st = s.remembered.checker.Checking(check)
	}
	ids := make([]string, len(part))
	for i, b := range part {
		ids[i] = b.id
	}
	rs, err := st.GetRequests(ctx, ids)
	if err == nil && check != nil && check.Pending() {
		err = s.remembered.checker.CheckToken(ctx, check)
	}
	if err == nil && check != nil && answers(part, rs) {
		check = airlock.NewTokenCheck(part[0].check.Token())
		err = s.remembered.checker.CheckToken(ctx, check)
	}
	found := make(map[string]int, len(rs))
	for i := range rs {
		found[rs[i].ID] = i
	}
	for _, b := range part {
		if check != nil {
			if made, passed := check.Outcome(); made && passed {
				b.check.Pass()
			} else if made {
				err = b.check.Fail()
			}
		}
		i, ok := found[b.id]
		switch {
		case err != nil:
			b.err = err
		case !ok:
			b.err = airlock.NotFound("request", b.id)
		default:
			// Waiters on one request share its slices; none writes them.
			b.r = rs[i]
		}
		close(b.done)
	}
}

// answers reports whether a waiter of part answers with what the read
// returned: its wait is over, or its request is terminal.
func answers(part []*batchedRead, rs []airlock.Request) bool {
	return slices.ContainsFunc(part, func(b *batchedRead) bool { return b.answering }) ||
		slices.ContainsFunc(rs, func(r airlock.Request) bool { return r.State.Terminal() })
}
