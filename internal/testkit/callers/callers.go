// Package callers gives a test the callers of a service as real clients
// get them: the bootstrap admin, and tokens the admin creates, each
// authenticated with its secret.
//
// Unlike testkit, it imports the root package, for its types; it imports
// no other package of Airlock's, so that the provider's own tests may use
// it too.
package callers

import (
	"context"
	"testing"

	"github.com/airlockhq/airlock"
)

// Service is the part of provider.Service that makes callers.
type Service interface {
	BootstrapAdmin(ctx context.Context, secret string) error
	Authenticate(ctx context.Context, secret string) (airlock.Caller, error)
	CreateToken(ctx context.Context, c airlock.Caller, in airlock.NewTokenInput) (airlock.Token, string, error)
}

// Admin bootstraps the admin token with secret and returns its caller.
func Admin(t testing.TB, svc Service, secret string) airlock.Caller {
	t.Helper()
	if err := svc.BootstrapAdmin(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	admin, err := svc.Authenticate(t.Context(), secret)
	if err != nil {
		t.Fatal(err)
	}
	return admin
}

// Mint creates the token in as admin and authenticates with its secret;
// it returns the caller and the secret.
func Mint(t testing.TB, svc Service, admin airlock.Caller, in airlock.NewTokenInput) (airlock.Caller, string) {
	t.Helper()
	_, secret, err := svc.CreateToken(t.Context(), admin, in)
	if err != nil {
		t.Fatal(err)
	}
	c, err := svc.Authenticate(t.Context(), secret)
	if err != nil {
		t.Fatal(err)
	}
	return c, secret
}
