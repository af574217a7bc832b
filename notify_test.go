package airlock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

func TestParseRemindBefore(t *testing.T) {
	for in, want := range map[string]airlock.RemindBefore{
		"": {}, "0": {}, "25%": {Fraction: 0.25}, " 10m ": {Before: 10 * time.Minute}, "1%": {Fraction: 0.01}, "99%": {Fraction: 0.99},
	} {
		got, err := airlock.ParseRemindBefore(in)
		if err != nil || got != want {
			t.Errorf("ParseRemindBefore(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"100%", "0%", "-5m", "x", "%", "10", "25 %x"} {
		if _, err := airlock.ParseRemindBefore(in); err == nil {
			t.Errorf("ParseRemindBefore(%q) accepted", in)
		}
	}
	created := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	deadline := created.Add(time.Hour)
	if got := (airlock.RemindBefore{Fraction: 0.25}).Due(created, deadline); !got.Equal(deadline.Add(-15 * time.Minute)) {
		t.Errorf("25%% of an hour is due at %v", got)
	}
	if got := (airlock.RemindBefore{Before: 10 * time.Minute}).Due(created, deadline); !got.Equal(deadline.Add(-10 * time.Minute)) {
		t.Errorf("10m before is due at %v", got)
	}
}

func TestWebhookInputValidate(t *testing.T) {
	long := "https://example.test/" + strings.Repeat("a", airlock.MaxEndpointURL)
	for _, c := range []struct {
		in    airlock.WebhookInput
		field string // "" when valid
	}{
		{airlock.WebhookInput{URL: "https://hooks.example.com/x?y=1"}, ""},
		{airlock.WebhookInput{URL: "http://10.0.0.1:8080/"}, ""}, // addresses are the sender's to judge
		{airlock.WebhookInput{URL: "https://x.test/", Events: airlock.NotifyTypes}, ""},
		{airlock.WebhookInput{URL: ""}, "url"},
		{airlock.WebhookInput{URL: "mailto:a@b.c"}, "url"},
		{airlock.WebhookInput{URL: "https:///path"}, "url"},
		{airlock.WebhookInput{URL: "https://a:b@x.test/"}, "url"},
		{airlock.WebhookInput{URL: "https://x.test/#f"}, "url"},
		{airlock.WebhookInput{URL: "https://x.test:0/"}, "url"},
		{airlock.WebhookInput{URL: "https://x.test:70000/"}, "url"},
		{airlock.WebhookInput{URL: "https://x.test/\x00"}, "url"},
		{airlock.WebhookInput{URL: long}, "url"},
		{airlock.WebhookInput{URL: "https://x.test/", Events: []airlock.NotifyType{"webhook.test"}}, "events"},
		{airlock.WebhookInput{URL: "https://x.test/", Description: strings.Repeat("d", 501)}, "description"},
	} {
		err := c.in.Validate()
		if c.field == "" {
			if err != nil {
				t.Errorf("%+v: %v", c.in, err)
			}
			continue
		}
		if e, ok := err.(*airlock.Error); !ok || e.Code != airlock.CodeInvalidRequest || e.Field != c.field {
			t.Errorf("%q: %v, want invalid_request on %s", c.in.URL, err, c.field)
		}
	}
}

func TestNotifyTypeOf(t *testing.T) {
	seen := map[airlock.NotifyType]bool{}
	for _, e := range []airlock.EventType{airlock.EventRequestCreated, airlock.EventRequestApproved, airlock.EventRequestDenied,
		airlock.EventRequestExpired, airlock.EventRequestCancelled, airlock.EventRequestReminder, airlock.EventExecutionClaimed,
		airlock.EventExecutionReported, airlock.EventRequestEscalated} {
		typ, ok := airlock.NotifyTypeOf(e)
		if !ok || seen[typ] {
			t.Fatalf("NotifyTypeOf(%s) = %s, %v", e, typ, ok)
		}
		seen[typ] = true
	}
	// Every subscribable type but audit.checkpoint, which comes with a
	// checkpoint and from no event, comes from one event type.
	seen[airlock.NotifyCheckpoint] = true
	if len(seen) != len(airlock.NotifyTypes) {
		t.Fatalf("%d types from events and the checkpoint, %d subscribable", len(seen), len(airlock.NotifyTypes))
	}
	for _, e := range []airlock.EventType{airlock.EventTokenCreated, airlock.EventEndpointCreated, airlock.EventInstanceDeleted, airlock.EventRequestVoted} {
		if _, ok := airlock.NotifyTypeOf(e); ok {
			t.Errorf("%s gives a notification", e)
		}
	}
	// audit.checkpoint is for webhooks that list it, not for those that
	// take every type, nor for Slack or email.
	for _, c := range []struct {
		e    airlock.Endpoint
		want bool
	}{
		{airlock.Endpoint{Kind: airlock.EndpointWebhook, Events: []airlock.NotifyType{airlock.NotifyCheckpoint}}, true},
		{airlock.Endpoint{Kind: airlock.EndpointWebhook}, false},
		{airlock.Endpoint{Kind: airlock.EndpointWebhook, Events: []airlock.NotifyType{airlock.NotifyCreated}}, false},
		{airlock.Endpoint{Kind: airlock.EndpointSlack, Events: []airlock.NotifyType{airlock.NotifyCheckpoint}}, false},
		{airlock.Endpoint{Kind: airlock.EndpointEmail}, false},
	} {
		if got := c.e.Wants(airlock.NotifyCheckpoint); got != c.want {
			t.Errorf("%s endpoint with events %v wants audit.checkpoint: %v, want %v", c.e.Kind, c.e.Events, got, c.want)
		}
	}
	if !(airlock.Endpoint{Kind: airlock.EndpointWebhook}).Wants(airlock.NotifyCreated) {
		t.Error("a webhook without a list does not want approval_request.created")
	}
	if s := airlock.NewWebhookSecret(); !strings.HasPrefix(s, "whsec_") || len(s) != len("whsec_")+44 {
		t.Errorf("secret %q", s)
	}
}
