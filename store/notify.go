package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/airlockhq/airlock"
)

// QueueParams asks a store to queue the deliveries of the events after
// After up to Upto: one conditional write moves the shared fan-out cursor
// from After to Upto and inserts Deliveries, so replicas fanning out at
// once queue each event once.
type QueueParams struct {
	After, Upto int64
	Deliveries  []airlock.Delivery // ID, EndpointID, EventID, MessageID, Type, RequestID, Payload, LeaseHolder
	// Listed are the IDs of the enabled endpoints the fan-out read before
	// it read the events. An endpoint created or enabled since, whose
	// start is before Upto, would miss events: the store then queues
	// nothing, and the fan-out reads the endpoints again.
	Listed []string
	// LeaseFor is how long a delivery with a LeaseHolder is queued leased
	// to it, as LeaseDeliveries would have leased it: the process fanning
	// it out attempts it without another write, and should that process
	// die, the lease lapses and any process takes it over.
	LeaseFor time.Duration
}

// LeaseParams asks a store for due deliveries of one endpoint.
type LeaseParams struct {
	EndpointID string
	Holder     string
	For        time.Duration
	Limit      int
}

// AttemptParams records an attempt of a delivery leased by Holder.
type AttemptParams struct {
	DeliveryID string
	Holder     string
	Attempt    airlock.DeliveryAttempt
	Outcome    airlock.DeliveryOutcome
	// RetryIn is how long after the store's now the next attempt is due
	// (OutcomeRetry).
	RetryIn time.Duration
	// DisableAfter disables the endpoint when this attempt failed and its
	// failures began at least this long ago; zero never disables.
	DisableAfter time.Duration
}

// State is the state a delivery takes after an attempt with p's outcome
// (airlock.DeliveryOutcome.State).
func (p AttemptParams) State() (airlock.DeliveryState, error) { return p.Outcome.State() }

// AttemptsJSON checks each attempt's outcome and encodes its Attempt as
// the JSON the stores keep in a delivery's attempt log, one per attempt,
// before any is written.
func AttemptsJSON(ps []AttemptParams) ([]string, error) {
	out := make([]string, len(ps))
	for i, p := range ps {
		if _, err := p.State(); err != nil {
			return nil, err
		}
		js, err := json.Marshal(p.Attempt)
		if err != nil {
			return nil, err
		}
		out[i] = string(js)
	}
	return out, nil
}

// Notify keeps notification endpoints, the delivery queue and
// reminders. Every change is a conditional write.
type Notify interface {
	// CreateEndpoint stores e (ID, Kind, URL, Events, Description, Secret,
	// CreatedBy), setting CreatedAt and AfterEvent to the store's now and
	// its last event ID, and appends endpoint.created.
	CreateEndpoint(ctx context.Context, e airlock.Endpoint) (airlock.Endpoint, error)
	// GetEndpoint reads an endpoint; not_found.
	GetEndpoint(ctx context.Context, id string) (airlock.Endpoint, error)
	// ListEndpoints lists the endpoints of kind (all kinds when empty),
	// oldest first.
	ListEndpoints(ctx context.Context, kind airlock.EndpointKind) ([]airlock.Endpoint, error)
	// DeleteEndpoint deletes an endpoint and its deliveries, and appends
	// endpoint.deleted; not_found.
	DeleteEndpoint(ctx context.Context, id, actor string) error

	// EnableEndpoint enables an endpoint disabled for failing, clears its
	// failing mark, queues again (due now, past attempts kept) its
	// deliveries that failed during the run of failures that disabled it,
	// and appends endpoint.enabled; not_found. Events committed while it
	// was disabled were never queued for it and stay undelivered. An
	// endpoint that is not disabled is returned as it is.
	EnableEndpoint(ctx context.Context, id, actor string) (airlock.Endpoint, error)

	// FanOutCursor returns the last event ID whose deliveries are queued.
	FanOutCursor(ctx context.Context) (int64, error)
	// DeliveryBacklog counts what is committed and not yet delivered:
	// pending deliveries, and the events after the fan-out cursor.
	DeliveryBacklog(ctx context.Context) (Backlog, error)
	// QueueDeliveries moves the fan-out cursor from p.After to p.Upto and
	// inserts p.Deliveries of endpoints that exist and are enabled, in one
	// transaction. It returns false, inserting nothing, when the cursor
	// was not at p.After (another process queued those events) or when an
	// enabled endpoint not in p.Listed starts before p.Upto (the caller's
	// list is stale: it lists the endpoints again and retries).
	QueueDeliveries(ctx context.Context, p QueueParams) (bool, error)
	// AddDelivery queues one delivery outside the fan-out (a test);
	// not_found when its endpoint does not exist.
	AddDelivery(ctx context.Context, d airlock.Delivery) (airlock.Delivery, error)
	// LeaseDeliveries takes up to p.Limit pending deliveries of
	// p.EndpointID that are due and not leased (or whose lease lapsed),
	// oldest first, leasing them to p.Holder for p.For.
	LeaseDeliveries(ctx context.Context, p LeaseParams) ([]airlock.Delivery, error)
	// RecordAttempts records attempts of deliveries their p.Holder still
	// leases, in order, in one write (a worker's batch shares one commit),
	// releasing the leases. The delivery at index i is what ps[i]
	// recorded (without its payload), or the zero Delivery when ps[i]'s
	// delivery is gone or
	// another holder took it over (what it sent stands; the new holder
	// sends again, with the same message ID). A failure marks the
	// endpoint failing and, past p.DisableAfter, disables it (appending
	// endpoint.disabled) and fails its pending deliveries; a success
	// clears its failing mark.
	RecordAttempts(ctx context.Context, ps []AttemptParams) ([]airlock.Delivery, error)
	// ListDeliveries lists an endpoint's deliveries, newest first, with
	// Seq < beforeSeq when beforeSeq > 0; more reports whether older ones
	// exist. Payloads are left out.
	ListDeliveries(ctx context.Context, endpointID string, beforeSeq int64, limit int) (ds []airlock.Delivery, more bool, err error)

	// RemindDue appends request.reminder for up to limit pending requests
	// whose reminder (by r) is due and was never recorded, recording it in
	// the same write so that it happens once across replicas. It returns
	// the IDs of the requests reminded.
	RemindDue(ctx context.Context, r airlock.RemindBefore, limit int) ([]string, error)
}

// Backlog is what the delivery engine has still to do, across every
// process sharing the store.
type Backlog struct {
	// Pending counts deliveries queued and neither delivered nor failed
	// (those waiting for a retry included).
	Pending int64
	// Unqueued counts the events after the fan-out cursor: committed, not
	// yet fanned out (events no endpoint wants included).
	Unqueued int64
}
