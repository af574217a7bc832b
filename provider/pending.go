package provider

import "context"

// PendingCount returns how many requests are pending now, across every
// replica sharing the store.
func (s *Service) PendingCount(ctx context.Context) (int, error) {
	return s.system.CountPending(ctx)
}
