package notify

import (
	"context"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// startDelivery starts the span of one attempt of d to ep, "deliver
// webhook" (or slack, email, push): a trace of its own, since it runs
// after the call that caused it has answered, linked to the span of the
// event it delivers when d knows it (Delivery.TraceID).
func startDelivery(ctx context.Context, ep airlock.Endpoint, d airlock.Delivery) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindClient)}
	if sc, ok := telemetry.SpanContextOf(d.TraceID, d.SpanID); ok {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attribute.Int64("airlock.event_id", d.EventID)}}))
	}
	ctx, span := telemetry.Tracer().Start(ctx, "deliver "+string(ep.Kind), opts...)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("airlock.endpoint_id", ep.ID), attribute.String("airlock.delivery_id", d.ID),
			attribute.String("airlock.notify_type", string(d.Type)), attribute.String("airlock.request_id", d.RequestID),
			attribute.Int64("airlock.event_id", d.EventID), attribute.Int("airlock.attempt", len(d.Attempts)+1))
	}
	return ctx, span
}

// endDelivery ends an attempt's span with what came of it. The error is
// the sender's, which names no secret (the receivers' answers are not
// read into it).
func endDelivery(span trace.Span, status int, err error) {
	if span.IsRecording() {
		if status != 0 {
			span.SetAttributes(attribute.Int("http.response.status_code", status))
		}
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}
