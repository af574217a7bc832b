package provider

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// Web Push (docs/phone.md). A reviewer's browser subscribes with the
// server's VAPID public key and hands the service its push endpoint and
// keys; the subscription is an endpoint of kind push, owned by the caller
// who made it, and only that caller lists or deletes it. The notify
// engine delivers to it (notify.PushSender), asking MayPush before each
// push whether the subscriber may decide the request.

// pushState is the service's view of Web Push.
type pushState struct {
	checkURL  func(string) error
	allowHTTP bool

	mu  sync.Mutex
	key *store.VAPIDKey
}

// mayManagePush refuses a caller who is neither a reviewer nor an admin:
// agents, auditors and verifiers get no pushes.
func mayManagePush(c airlock.Caller) error {
	if c.Role != airlock.RoleReviewer && c.Role != airlock.RoleAdmin {
		return forbidden("only reviewers and admins subscribe to pushes")
	}
	return nil
}

// LoadVAPIDKey makes sure the store holds a VAPID key pair, the first
// made now if no replica made one before, and returns it: the server
// signs every push with it.
func (s *Service) LoadVAPIDKey(ctx context.Context) (store.VAPIDKey, error) {
	s.push.mu.Lock()
	defer s.push.mu.Unlock()
	if s.push.key != nil {
		return *s.push.key, nil
	}
	priv, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return store.VAPIDKey{}, err
	}
	k, err := s.system.EnsureVAPIDKey(ctx, store.VAPIDKey{Private: priv.Bytes(), Public: priv.PublicKey().Bytes()}, "system:start")
	if err != nil {
		return store.VAPIDKey{}, fmt.Errorf("vapid key: %w", err)
	}
	s.push.key = &k
	return k, nil
}

// VAPIDPublicKey returns the server's VAPID public key as browsers take
// it (base64url): the applicationServerKey of PushManager.subscribe.
// Reviewers and admins only.
func (s *Service) VAPIDPublicKey(ctx context.Context, c airlock.Caller) (string, error) {
	if err := mayManagePush(c); err != nil {
		return "", err
	}
	k, err := s.LoadVAPIDKey(ctx)
	if err != nil {
		return "", err
	}
	return airlock.EncodePushKey(k.Public), nil
}

// CreatePushSubscription stores the caller's browser subscription
// (reviewers and admins). A browser subscribing again with the same
// endpoint replaces its earlier subscription (its keys may have changed);
// a caller holds at most airlock.MaxPushSubscriptionsPerCaller.
func (s *Service) CreatePushSubscription(ctx context.Context, c airlock.Caller, in airlock.PushSubscriptionInput) (airlock.PushSubscription, error) {
	if err := mayManagePush(c); err != nil {
		return airlock.PushSubscription{}, err
	}
	if err := in.Validate(s.push.allowHTTP); err != nil {
		return airlock.PushSubscription{}, err
	}
	if s.push.checkURL != nil {
		if err := s.push.checkURL(in.Endpoint); err != nil {
			return airlock.PushSubscription{}, airlock.Invalid("endpoint", "endpoint: %v", err)
		}
	}
	st := s.storeFor(c)
	own, err := s.ownPushEndpoints(ctx, st, c)
	if err != nil {
		return airlock.PushSubscription{}, err
	}
	for _, e := range own {
		if e.URL == in.Endpoint {
			if err := st.DeleteEndpoint(ctx, e.ID, c.ID); err != nil && airlock.ErrorCode(err) != airlock.CodeNotFound {
				return airlock.PushSubscription{}, err
			}
			own = slices.DeleteFunc(own, func(x airlock.Endpoint) bool { return x.ID == e.ID })
			break
		}
	}
	if len(own) >= airlock.MaxPushSubscriptionsPerCaller {
		return airlock.PushSubscription{}, airlock.Invalid("endpoint",
			"you have %d push subscriptions, the most one caller may hold; delete one (DELETE /v1/push/subscriptions/{id})", len(own))
	}
	keys, err := json.Marshal(in.Keys)
	if err != nil {
		return airlock.PushSubscription{}, err
	}
	e, err := st.CreateEndpoint(ctx, airlock.Endpoint{
		ID: airlock.NewID(airlock.PrefixPushSubscription), Kind: airlock.EndpointPush, URL: in.Endpoint,
		Events: airlock.PushTypes, Description: "Web Push subscription", Secret: string(keys), CreatedBy: c.ID,
	})
	if err != nil {
		return airlock.PushSubscription{}, err
	}
	if s.deliveryQueued != nil {
		s.deliveryQueued() // the engine starts its worker now
	}
	return airlock.PushSubscriptionOf(e), nil
}

// DeletePushSubscription deletes one of the caller's own push
// subscriptions; another caller's, or none, is not_found.
func (s *Service) DeletePushSubscription(ctx context.Context, c airlock.Caller, id string) error {
	if err := mayManagePush(c); err != nil {
		return err
	}
	st := s.storeFor(c)
	e, err := st.GetEndpoint(ctx, id)
	if err == nil && (e.Kind != airlock.EndpointPush || e.CreatedBy != c.ID) {
		err = airlock.NotFound("push subscription", id)
	}
	if err != nil {
		return err
	}
	return st.DeleteEndpoint(ctx, id, c.ID)
}

func (s *Service) ownPushEndpoints(ctx context.Context, st store.Store, c airlock.Caller) ([]airlock.Endpoint, error) {
	eps, err := st.ListEndpoints(ctx, airlock.EndpointPush)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(eps, func(e airlock.Endpoint) bool { return e.CreatedBy != c.ID }), nil
}

// MayPush reports whether the subscriber of push subscription e may
// decide r now, judged as a decision would be: a live reviewer token (or
// an OIDC reviewer whose sessions an admin has not ended), in one of r's
// groups when it is routed, and not of the principal that created r. An
// admin's subscription gets nothing: admins do not decide.
func (s *Service) MayPush(ctx context.Context, e airlock.Endpoint, r airlock.Request) (bool, error) {
	var caller airlock.Caller
	tok, err := s.system.GetToken(ctx, e.CreatedBy)
	switch {
	case err == nil:
		if tok.RevokedAt != nil || tok.Role != airlock.RoleReviewer {
			return false, nil
		}
		caller = airlock.Caller{Token: tok}
	case airlock.ErrorCode(err) == airlock.CodeNotFound:
		// An OIDC reviewer: its caller ID is its principal.
		profiles, err := s.system.ListReviewerProfiles(ctx)
		if err != nil {
			return false, err
		}
		i := slices.IndexFunc(profiles, func(p airlock.ReviewerProfile) bool { return p.Principal == e.CreatedBy })
		if i < 0 || !profiles[i].Active() {
			return false, nil
		}
		p := profiles[i]
		caller = airlock.Caller{Token: airlock.Token{ID: p.Principal, Role: airlock.RoleReviewer, Principal: p.Principal}, Groups: p.Groups}
	default:
		return false, err
	}
	creator, err := s.system.GetToken(ctx, r.OwnerID)
	if err != nil && airlock.ErrorCode(err) != airlock.CodeNotFound {
		return false, err
	}
	if err == nil && principalOf(creator) == principalOf(caller.Token) {
		return false, nil
	}
	return s.MayDecide(caller, r), nil
}
