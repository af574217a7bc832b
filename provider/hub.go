package provider

import "sync"

// hub wakes waiters when requests change. It carries no data: a woken waiter
// re-reads the store, which stays the only source of truth, so a missed or
// duplicated wake-up can delay an answer but never make it wrong.
type hub struct {
	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
	// changed is closed and replaced on every publish; event streams wait on it.
	changed chan struct{}
}

func newHub() *hub {
	return &hub{waiters: map[string]map[chan struct{}]struct{}{}, changed: make(chan struct{})}
}

// subscribe returns a channel that receives after the next publish of id.
// Subscribe before reading the store so no change between the read and the
// wait is lost.
func (h *hub) subscribe(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	set := h.waiters[id]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		h.waiters[id] = set
	}
	set[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		if set := h.waiters[id]; set != nil {
			delete(set, ch)
			if len(set) == 0 {
				delete(h.waiters, id)
			}
		}
		h.mu.Unlock()
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
		for ch := range h.waiters[id] {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	close(h.changed)
	h.changed = make(chan struct{})
}

// publishAll wakes every waiter and stream: notifications may have been
// missed, so all must re-read.
func (h *hub) publishAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, set := range h.waiters {
		for ch := range set {
			select {
			case ch <- struct{}{}:
			default:
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
	n := 0
	for _, set := range h.waiters {
		n += len(set)
	}
	return n
}
