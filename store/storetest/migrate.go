package storetest

import (
	"slices"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// Migration lets a driver's test check a data migration on its own store:
// Before writes what a store held before it, the driver re-runs the
// migration (deleting its row of schema_migrations and opening the store
// again), and After checks what it made of it.
type Migration struct {
	Before func(t *testing.T, st store.Store)
	After  func(t *testing.T, st store.Store)
}

// oldSlackTypes are the types a Slack endpoint took before reminders
// reached Slack.
var oldSlackTypes = []airlock.NotifyType{airlock.NotifyCreated, airlock.NotifyApproved, airlock.NotifyDenied,
	airlock.NotifyExpired, airlock.NotifyCancelled}

// SlackReminders is the migration that gives a Slack endpoint created
// before reminders reached Slack approval_request.reminder, and leaves a
// webhook listing the same types as it is.
var SlackReminders = Migration{
	Before: func(t *testing.T, st store.Store) {
		for _, e := range []airlock.Endpoint{
			{ID: airlock.SlackEndpointID, Kind: airlock.EndpointSlack, URL: "slack:C0X"},
			{ID: airlock.NewID(airlock.PrefixEndpoint), Kind: airlock.EndpointWebhook, URL: "https://example.com/h"},
		} {
			e.Events, e.Secret, e.CreatedBy = oldSlackTypes, airlock.NewWebhookSecret(), "tok_admin"
			if _, err := st.CreateEndpoint(t.Context(), e); err != nil {
				t.Fatal(err)
			}
		}
	},
	After: func(t *testing.T, st store.Store) {
		eps, err := st.ListEndpoints(t.Context(), "")
		if err != nil || len(eps) != 2 {
			t.Fatalf("ListEndpoints = %v, %v", eps, err)
		}
		for _, e := range eps {
			reminded := slices.Contains(e.Events, airlock.NotifyReminder)
			if reminded != (e.Kind == airlock.EndpointSlack) || len(e.Events) != len(oldSlackTypes)+map[bool]int{true: 1}[reminded] {
				t.Errorf("%s (%s) takes %v after the migration", e.ID, e.Kind, e.Events)
			}
		}
	},
}
