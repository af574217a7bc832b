package notify_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/notify"
	"github.com/airlockhq/airlock/rest"
)

// BenchmarkDrainBacklog measures how fast a backlog of 5,000 queued
// webhooks drains to one endpoint that answers at once, on SQLite: the
// engine's lease, send and record loop, end to end over loopback HTTP.
func BenchmarkDrainBacklog(b *testing.B) {
	const n = 5000
	for b.Loop() {
		b.StopTimer()
		bd := setup(b)
		var got atomic.Int64
		rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			got.Add(1)
			w.WriteHeader(http.StatusNoContent)
		}))
		ep, err := bd.store.CreateEndpoint(bd.ctx, airlock.Endpoint{ID: airlock.NewID(airlock.PrefixEndpoint), Kind: airlock.EndpointWebhook,
			URL: rc.URL, Events: []airlock.NotifyType{airlock.NotifyCreated}, Secret: airlock.NewWebhookSecret(), CreatedBy: "tok_admin"})
		if err != nil {
			b.Fatal(err)
		}
		for i := range n {
			if _, err := bd.store.AddDelivery(bd.ctx, airlock.Delivery{ID: airlock.NewID(airlock.PrefixDelivery), EndpointID: ep.ID,
				MessageID: airlock.MessageIDFor(airlock.Event{ID: int64(i + 1)}), Type: airlock.NotifyCreated, Payload: []byte(`{"type":"approval_request.created"}`)}); err != nil {
				b.Fatal(err)
			}
		}
		sender := notify.NewWebhookSender(notify.WebhookConfig{AllowPrivate: true})
		e := notify.New(notify.Config{Store: bd.store, Render: rest.RequestJSON, PollEvery: 10 * time.Millisecond,
			Senders: map[airlock.EndpointKind]notify.Sender{airlock.EndpointWebhook: sender}})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		b.StartTimer()
		start := time.Now()
		go func() { defer close(done); e.Run(ctx) }()
		for got.Load() < n {
			time.Sleep(time.Millisecond) // polling a counter in a benchmark
		}
		b.ReportMetric(n/time.Since(start).Seconds(), "deliveries/s")
		b.StopTimer()
		cancel()
		<-done
		sender.Close()
		rc.Close()
		b.StartTimer()
	}
}
