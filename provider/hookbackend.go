package provider

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/hook"
)

// HookBackend returns the agent hooks' Backend over the service, acting as
// c: the HTTP hook (rest) and the permission-prompt tool (mcpserver) ask
// through it what `airlock hook` asks over REST.
func (s *Service) HookBackend(c airlock.Caller) hook.Backend { return hookBackend{svc: s, c: c} }

// hookBackend is hook.Backend over the service.
type hookBackend struct {
	svc *Service
	c   airlock.Caller
}

func (b hookBackend) Instances(ctx context.Context) ([]airlock.Instance, error) {
	return b.svc.Instances(ctx, b.c)
}

func (b hookBackend) RegisterInstance(ctx context.Context, in airlock.InstanceInput) (airlock.Instance, error) {
	if err := in.Validate(); err != nil {
		return airlock.Instance{}, err
	}
	return b.svc.RegisterInstance(ctx, b.c, in)
}

func (b hookBackend) DeleteInstance(ctx context.Context, id string) (int, error) {
	return b.svc.DeleteInstance(ctx, b.c, id)
}

func (b hookBackend) CreateRequest(ctx context.Context, instanceID, key string, in airlock.CreateRequestInput) (airlock.Request, error) {
	r, _, err := b.svc.CreateRequest(ctx, b.c, instanceID, key, in)
	return r, err
}

func (b hookBackend) Await(ctx context.Context, id string, wait time.Duration) (airlock.Request, error) {
	r, err := b.svc.Await(ctx, &b.c, id, min(wait, b.svc.MaxWait()), ctx.Done())
	if err != nil {
		return airlock.Request{}, err
	}
	if ctx.Err() != nil {
		return *r, ctx.Err()
	}
	return *r, nil
}

func (b hookBackend) Cancel(ctx context.Context, id string) (airlock.Request, error) {
	return b.svc.Cancel(ctx, b.c, id)
}

func (b hookBackend) Claim(ctx context.Context, id string) (airlock.Request, error) {
	return b.svc.Claim(ctx, b.c, id)
}

func (b hookBackend) Report(ctx context.Context, id string, in airlock.ReportInput) (airlock.Request, error) {
	if err := in.Validate(); err != nil {
		return airlock.Request{}, err
	}
	return b.svc.Report(ctx, b.c, id, in)
}

func (b hookBackend) Requests(ctx context.Context, instanceID, tool string, state airlock.State) ([]airlock.Request, error) {
	page, err := b.svc.ListRequests(ctx, b.c, ListQuery{InstanceID: instanceID, Tool: tool, State: state, Limit: 200})
	return page.Requests, err
}
