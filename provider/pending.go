package provider

import (
	"context"
	"errors"
)

// pendingCounter is implemented by stores that can count pending requests
// cheaply (both drivers), for the pending gauge.
type pendingCounter interface {
	CountPending(ctx context.Context) (int, error)
}

// PendingCount returns how many requests are pending now, across every
// replica sharing the store.
func (s *Service) PendingCount(ctx context.Context) (int, error) {
	pc, ok := s.store.(pendingCounter)
	if !ok {
		return 0, errors.New("the store cannot count pending requests")
	}
	return pc.CountPending(ctx)
}
