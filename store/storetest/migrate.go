package storetest

import (
	"bytes"
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

// PasskeyDecisionKeys is the migration (0031) that gives the passkey-signed
// decisions kept before it their passkey's public key, where the passkey
// still exists; the rest keep none, and no arguments digest or relying
// party. Its driver test drops the migration's columns after Before, so
// that the migration runs on rows without them.
func PasskeyDecisionKeys() Migration {
	var kept, gone string
	var key []byte
	return Migration{
		Before: func(t *testing.T, st store.Store) {
			b := &bundle{ctx: t.Context(), store: st}
			b.inst = b.instance(t, ownerA)
			for i, principal := range []string{"carol", "dan"} {
				pk, err := st.AddPasskey(b.ctx, passkey(principal, i))
				wantOK(t, err)
				r := b.create(t)
				_, err = st.Decide(b.ctx, store.DecideParams{ID: r.ID, Status: airlock.StateDenied, Actor: "tok_" + principal, Principal: principal,
					Passkey: &airlock.PasskeyAssertion{CredentialID: pk.ID, AuthenticatorData: bytes.Repeat([]byte{1}, 37),
						ClientDataJSON: []byte(`{}`), Signature: []byte("sig")}})
				wantOK(t, err)
				if i == 0 {
					kept, key = r.ID, pk.PublicKey
				} else {
					gone = r.ID
					wantOK(t, st.DeletePasskey(b.ctx, principal, pk.ID, principal))
				}
			}
		},
		After: func(t *testing.T, st store.Store) {
			for id, want := range map[string][]byte{kept: key, gone: nil} {
				ds, err := st.PasskeyDecisions(t.Context(), id)
				wantOK(t, err)
				if len(ds) != 1 || !bytes.Equal(ds[0].PublicKey, want) || ds[0].ArgsDigest != "" || ds[0].RPID != "" {
					t.Errorf("after the migration, %s's signed decision is %s; want the key %q", id, show(ds), want)
				}
			}
		},
	}
}
