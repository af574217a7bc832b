package provider

import (
	"context"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// tokenCache keeps the live tokens callers presented, by secret hash, for
// stores with a token stamp (store.Extras.TokenStamp): every call reads the stamp (a
// stat of a file on SQLite, about a microsecond) instead of looking its
// token up (a query), and the whole cache is dropped whenever the stamp
// moves, that is after any token was revoked or replaced, in this process
// or another. So a revoked token still fails at its next call.
//
// Entries also age out after tokenCacheTTL: should a process die between
// committing a revocation and moving the stamp, the others stop accepting
// the token within that time even if nobody retries the revocation.
type tokenCache struct {
	stamp store.TokenStamper
	now   func() time.Time

	mu      sync.Mutex
	mark    uint64 // the stamp the entries were read under
	entries map[[32]byte]cachedToken
}

type cachedToken struct {
	token airlock.Token
	until time.Time
}

const (
	tokenCacheTTL = 2 * time.Second
	// tokenCacheMax bounds the cache; at it, the cache starts over.
	tokenCacheMax = 10_000
)

func newTokenCache(stamp store.TokenStamper) *tokenCache {
	if stamp == nil {
		return nil
	}
	return &tokenCache{stamp: stamp, now: time.Now, entries: map[[32]byte]cachedToken{}}
}

// lookup returns the live token for hash, from the cache while the stamp
// holds still, else from load, which it caches when it is live and the
// stamp did not move meanwhile. A nil cache (a store without a stamp)
// always loads.
func (c *tokenCache) lookup(hash []byte, load func() (airlock.Token, error)) (airlock.Token, error) {
	if c == nil || len(hash) != 32 {
		return load()
	}
	key := [32]byte(hash)
	mark, err := c.stamp.TokenStamp()
	if err != nil {
		return load() // no stamp, no cache: ask the store
	}
	now := c.now()
	c.mu.Lock()
	if mark != c.mark {
		clear(c.entries)
		c.mark = mark
	}
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && now.Before(e.until) {
		return e.token, nil
	}
	t, err := load()
	if err != nil || t.RevokedAt != nil {
		return t, err
	}
	// Keep it only if no token changed since mark was read: a revocation
	// that committed after load read the token has moved the stamp.
	after, err := c.stamp.TokenStamp()
	if err != nil || after != mark {
		return t, nil
	}
	c.mu.Lock()
	if c.mark == mark {
		if len(c.entries) >= tokenCacheMax {
			clear(c.entries)
		}
		c.entries[key] = cachedToken{token: t, until: now.Add(tokenCacheTTL)}
	}
	c.mu.Unlock()
	return t, nil
}

// tokenStampPoll is how often watchTokenStamp reads the token stamp: well
// within the second a revoked token's long-poll may take to answer.
const tokenStampPoll = 250 * time.Millisecond

// watchTokenStamp wakes every waiter and event stream whenever the token
// stamp moves, until ctx ends; each then re-checks its token. So a token
// revoked by another process on the same SQLite file ends this process's
// long-polls and streams within tokenStampPoll: no notification crosses
// processes there, and the stamp is what moves (a revocation in this
// process wakes its own waiters at once, in RevokeToken). It costs one
// stat every tokenStampPoll.
func (s *Service) watchTokenStamp(ctx context.Context) {
	last, err := s.tokens.stamp.TokenStamp()
	tick := time.NewTicker(tokenStampPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		mark, serr := s.tokens.stamp.TokenStamp()
		if serr != nil {
			err = serr // unreadable: wake everyone once it reads again
			continue
		}
		if mark != last || err != nil {
			last, err = mark, nil
			s.hub.publishAll()
		}
	}
}
