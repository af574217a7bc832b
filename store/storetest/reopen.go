package storetest

import (
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// Reopen checks that a store keeps what it holds when it is closed and
// opened again, and that closing it twice is no error. open opens a store
// on one database, the same each time it is called, and closes it when t
// ends.
func Reopen(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	st := open(t)
	in, err := st.CreateInstance(t.Context(), airlock.Instance{OwnerID: ownerA, Name: "x"}, ownerA)
	wantOK(t, err)
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	st = open(t) // migrations already applied: nothing to do
	if _, err := st.GetInstance(t.Context(), in.ID); err != nil {
		t.Fatalf("after reopening: %v", err)
	}
}
