package provider

import (
	"sync"
	"time"

	"github.com/airlockhq/airlock"
)

// Defaults of the bounds on heavy reads (Config).
const (
	// DefaultMaxHeavyReads is how many heavy reads one process serves at
	// once: each holds up to a page of requests (ListPageBytes) while its
	// answer is written.
	DefaultMaxHeavyReads = 8
	// DefaultMaxHeavyReadsPerToken is how many of them one token may have
	// in progress, so that one caller cannot take every slot.
	DefaultMaxHeavyReadsPerToken = 2
	// DefaultListPageBytes ends a page of full requests once the requests
	// on it hold this many bytes of arguments and other large fields
	// (airlock.Request.StoredBytes).
	DefaultListPageBytes = 4 << 20
	// HeavyReadRetryAfter is when a refused heavy read may try again: a
	// slot frees as soon as a page is written, which takes well under it.
	HeavyReadRetryAfter = time.Second
)

// heavyReads counts the heavy reads in progress, in the whole process and
// per token. A slot is taken before the read and given back once its
// answer is written, so what a burst of them holds in memory is bounded by
// the number of slots, whatever the number of callers.
type heavyReads struct {
	max, perToken int
	metrics       *Metrics
	over          func() // Config.HeavyReadsOver, or nil

	mu      sync.Mutex
	total   int
	byToken map[string]int
}

func newHeavyReads(max, perToken int, m *Metrics, over func()) *heavyReads {
	return &heavyReads{max: max, perToken: perToken, metrics: m, over: over, byToken: map[string]int{}}
}

// acquire takes a slot for token, or refuses with rate_limited when the
// token, or the process, has every slot of its own in use.
func (h *heavyReads) acquire(token string) (release func(), err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.byToken[token] >= h.perToken:
		h.metrics.heavyReadRefused("token")
		return nil, airlock.Errorf(airlock.CodeRateLimited,
			"this token already has %d lists or searches in progress, its most at once; retry after %d s, or wait for one to finish",
			h.perToken, int(HeavyReadRetryAfter.Seconds()))
	case h.total >= h.max:
		h.metrics.heavyReadRefused("server")
		return nil, airlock.Errorf(airlock.CodeRateLimited,
			"the server is serving %d lists and searches at once, its most; retry after %d s",
			h.max, int(HeavyReadRetryAfter.Seconds()))
	}
	h.total++
	h.byToken[token]++
	var once sync.Once
	return func() { once.Do(func() { h.release(token) }) }, nil
}

func (h *heavyReads) release(token string) {
	h.mu.Lock()
	h.total--
	over := h.total == 0
	if h.byToken[token]--; h.byToken[token] == 0 {
		delete(h.byToken, token) // the map stays as small as the reads in progress
	}
	h.mu.Unlock()
	if over && h.over != nil {
		h.over()
	}
}

// inProgress is how many heavy reads hold a slot now.
func (h *heavyReads) inProgress() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total
}

// HeavyRead takes a slot for a read whose answer can be large (a list of
// requests, the inbox's pending list, its history and history search) by
// c's token, and returns the function that gives the slot back: call it
// once the answer is written, or the read abandoned. At most
// Config.MaxHeavyReads run at once in this process and
// Config.MaxHeavyReadsPerToken for one token; beyond, HeavyRead returns
// rate_limited, to be retried after HeavyReadRetryAfter.
func (s *Service) HeavyRead(c airlock.Caller) (release func(), err error) {
	return s.heavy.acquire(c.ID)
}

// HeavyReads returns how many heavy reads hold a slot now.
func (s *Service) HeavyReads() int { return s.heavy.inProgress() }
