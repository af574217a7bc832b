package provider

import (
	"context"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/telemetry"
	"github.com/airlockhq/airlock/store"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// evaluate asks the policy (--policy) about a new request in a span of
// its own ("policy evaluate"), whose attributes say what it decided.
func (s *Service) evaluate(ctx context.Context, in airlock.PolicyInput) airlock.PolicyVerdict {
	if _, none := s.policy.(airlock.NoPolicy); none || !trace.SpanFromContext(ctx).IsRecording() {
		// Without a policy there is no decision to trace; in a call not
		// traced, no span (nor its context).
		return s.policy.Evaluate(ctx, in)
	}
	ctx, span := telemetry.Tracer().Start(ctx, "policy evaluate")
	defer span.End()
	v := s.policy.Evaluate(ctx, in)
	if span.IsRecording() {
		outcome := "ask"
		if v.Initial != nil {
			outcome = string(v.Initial.Status)
		}
		span.SetAttributes(attribute.String("airlock.tool", in.Request.Tool), attribute.String("airlock.policy.outcome", outcome),
			attribute.StringSlice("airlock.policy.reviewers", v.Reviewers))
	}
	return v
}

// linkToCreation links the span of a call that changes request id (a
// decision, a cancellation, a claim, a report) to the span the request
// was created in, kept on its request.created event: the decision an hour
// later, on another replica, with no trace context of its own, is then
// one click from the creation (docs/operations.md, "Telemetry"). It reads
// the event only when the span records.
func linkToCreation(ctx context.Context, st store.Store, id string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String("airlock.request_id", id))
	e, err := st.CreatedEvent(ctx, id)
	if err != nil || e.TraceID == "" {
		return
	}
	if sc, ok := telemetry.SpanContextOf(e.TraceID, e.SpanID); ok && sc.TraceID() != span.SpanContext().TraceID() {
		span.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attribute.String("airlock.link", "request.created")}})
	}
}
