package provider

import (
	"slices"
	"sync"
)

// hub wakes waiters when requests change. It carries no data: a woken waiter
// re-reads the store, which stays the only source of truth, so a missed or
// duplicated wake-up can delay an answer but never make it wrong.
type hub struct {
	mu sync.Mutex
	// waiters holds, for each request id, the first of its waiters; the
	// others follow it in a list threaded through the waiters themselves,
	// so a subscription costs one small struct and its channel, and no
	// map of its own (10,000 idle long-polls hold 10,000 of them).
	waiters map[string]*waiter
	count   int // how many waiters are subscribed
	// changed is closed and replaced on every publish; event streams wait on it.
	changed chan struct{}
}

// waiter is one subscription to a request's changes.
type waiter struct {
	// woken receives after the next publish of id, or of a change to the
	// waiter's token (it holds at most one wake-up: a waiter re-reads the
	// store and re-checks its token, whatever it missed).
	woken chan struct{}
	id    string
	// token is the ID of the token the waiter's caller presented.
	token      string
	prev, next *waiter
}

func newHub() *hub {
	return &hub{waiters: map[string]*waiter{}, changed: make(chan struct{})}
}

// subscribe returns a waiter, for a caller with token ID token, whose
// woken channel receives after the next publish of id or tokensChanged of
// token; unsubscribe it when done. Subscribe before reading the store so
// no change between the read and the wait is lost.
func (h *hub) subscribe(id, token string) *waiter {
	w := &waiter{woken: make(chan struct{}, 1), id: id, token: token}
	h.mu.Lock()
	if first := h.waiters[id]; first != nil {
		w.next, first.prev = first, w
	}
	h.waiters[id] = w
	h.count++
	h.mu.Unlock()
	return w
}

// unsubscribe removes w, which subscribe returned; once only.
func (h *hub) unsubscribe(w *waiter) {
	h.mu.Lock()
	switch {
	case w.prev != nil:
		w.prev.next = w.next
	case w.next != nil:
		h.waiters[w.id] = w.next
	default:
		delete(h.waiters, w.id)
	}
	if w.next != nil {
		w.next.prev = w.prev
	}
	w.prev, w.next = nil, nil
	h.count--
	h.mu.Unlock()
}

// wake gives each waiter of the list that starts at w a wake-up.
func wake(w *waiter) {
	for ; w != nil; w = w.next {
		w.wake()
	}
}

// wake gives w a wake-up, unless one is already waiting for it.
func (w *waiter) wake() {
	select {
	case w.woken <- struct{}{}:
	default:
	}
}

// changes returns a channel closed at the next publish of anything.
func (h *hub) changes() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changed
}

// publish wakes the waiters of ids and every event stream.
func (h *hub) publish(ids ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		wake(h.waiters[id])
	}
	close(h.changed)
	h.changed = make(chan struct{})
}

// publishAll wakes every waiter and stream: notifications may have been
// missed, so all must re-read.
func (h *hub) publishAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.waiters {
		wake(w)
	}
	close(h.changed)
	h.changed = make(chan struct{})
}

// tokensChanged wakes the waiters whose caller presented one of the tokens
// ids (revoked, or replaced), and every event stream: each re-checks its
// token. It visits every waiter, which is cheap beside how rarely a token
// changes, so that waiting costs nothing per token.
func (h *hub) tokensChanged(ids ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, first := range h.waiters {
		for w := first; w != nil; w = w.next {
			if slices.Contains(ids, w.token) {
				w.wake()
			}
		}
	}
	close(h.changed)
	h.changed = make(chan struct{})
}

// waiterCount returns how many request waiters are subscribed.
func (h *hub) waiterCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count
}
