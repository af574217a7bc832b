package sqlcore

import (
	"context"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// PasskeySQL are the statements of store.Passkeys. A passkey is read as
// its id, principal, token_id, name, public_key, sign_count, transports (joined by
// commas), aaguid, backup_eligible, backup_state, created_at and
// last_used_at.
type PasskeySQL struct {
	// Insert stores passkey @id (@principal, @token_id, @name, @public_key,
	// @sign_count, @transports, @aaguid, @backup_eligible,
	// @backup_state) created at @now, unless one of that ID is stored or
	// the principal has @max; it returns the passkey, or no row.
	Insert string
	// Exists selects 1 when passkey @id is stored.
	Exists string
	// Select selects passkey @id.
	Select string
	// List selects the passkeys of @principal, oldest first.
	List string
	// Use sets the sign_count of passkey @id to @sign_count and its
	// last_used_at to @now if @sign_count is above the stored count or
	// both are 0, and returns the passkey; no row otherwise.
	Use string
	// Delete deletes passkey @id of @principal, returning @now's instant
	// (for the event); no row when there is none.
	Delete string

	// SweepCeremonies deletes up to 100 ceremonies that are over at @now.
	SweepCeremonies string
	// PutCeremony stores ceremony @challenge (@kind, @principal, @state)
	// lasting @ttl from @now, unless @max are live at @now: then it
	// changes no row.
	PutCeremony string
	// TakeCeremony deletes ceremony @challenge if live at @now, returning
	// its challenge_hash, kind, principal, state and expires_at.
	TakeCeremony string

	// InsertDecision stores the signed decision of request @id by
	// @principal (@actor, @state, @valid_for, @note, @credential_id,
	// @authenticator_data, @client_data_json, @signature, @public_key,
	// @args_digest, @rp_id) at @now.
	InsertDecision string
	// Decisions selects the signed decisions of request @id, by time:
	// request_id, principal, actor, state, valid_for, note,
	// credential_id, authenticator_data, client_data_json, signature,
	// public_key, args_digest, rp_id, at.
	Decisions string
	// DecisionsOf is Decisions for the requests @ids, by request ID and
	// time.
	DecisionsOf string
}

func (c *Core) scanPasskey(row Row) (airlock.Passkey, error) {
	var (
		p          airlock.Passkey
		count      int64
		transports string
		used       NullTime
	)
	err := row.Scan(&p.ID, &p.Principal, &p.TokenID, &p.Name, &p.PublicKey, &count, &transports, &p.AAGUID,
		&p.BackupEligible, &p.BackupState, c.d.Time(&p.CreatedAt), c.d.NullTime(&used))
	if err != nil {
		return airlock.Passkey{}, err
	}
	p.SignCount, p.LastUsedAt = uint32(count), used.Ptr()
	if transports != "" {
		p.Transports = strings.Split(transports, ",")
	}
	if len(p.AAGUID) == 0 {
		p.AAGUID = nil
	}
	return p, nil
}

// AddPasskey stores a passkey and appends passkey.registered.
func (c *Core) AddPasskey(ctx context.Context, p airlock.Passkey) (airlock.Passkey, error) {
	if err := p.Validate(); err != nil {
		return airlock.Passkey{}, err
	}
	q := &c.q.Passkeys
	var out airlock.Passkey
	err := c.d.Write(ctx, func(tx Tx) error {
		aaguid := p.AAGUID
		if aaguid == nil {
			aaguid = []byte{}
		}
		var err error
		out, err = c.scanPasskey(tx.QueryRow(q.Insert, Args{{"id", p.ID}, {"principal", p.Principal}, {"token_id", p.TokenID}, {"name", p.Name},
			{"public_key", p.PublicKey}, {"sign_count", int64(p.SignCount)}, {"transports", strings.Join(p.Transports, ",")},
			{"aaguid", aaguid}, {"backup_eligible", p.BackupEligible}, {"backup_state", p.BackupState},
			{"max", airlock.MaxPasskeysPerPrincipal}}))
		if noRows(err) {
			var one int
			if err := tx.QueryRow(q.Exists, Args{{"id", p.ID}}).Scan(&one); err == nil {
				return airlock.Invalid("credential_id", "this passkey is registered already")
			} else if !noRows(err) {
				return err
			}
			return airlock.Invalid("passkeys", "a principal registers at most %d passkeys; delete one first", airlock.MaxPasskeysPerPrincipal)
		}
		if err != nil {
			return err
		}
		return tx.Event(airlock.Event{Type: airlock.EventPasskeyRegistered, At: out.CreatedAt, Actor: p.Principal,
			Subject: airlock.PasskeyIDString(p.ID)})
	})
	return out, c.d.Translate(err, "passkey", airlock.PasskeyIDString(p.ID))
}

// Passkey reads a passkey by credential ID.
func (c *Core) Passkey(ctx context.Context, id []byte) (airlock.Passkey, error) {
	p, err := c.scanPasskey(c.d.QueryRow(ctx, c.q.Passkeys.Select, Args{{"id", id}}))
	return p, c.d.Translate(err, "passkey", airlock.PasskeyIDString(id))
}

// ListPasskeys lists a principal's passkeys, oldest first.
func (c *Core) ListPasskeys(ctx context.Context, principal string) ([]airlock.Passkey, error) {
	out, err := all(ctx, c.d, c.scanPasskey, c.q.Passkeys.List, Args{{"principal", principal}})
	return out, c.d.Translate(err, "passkeys", "of "+principal)
}

// UsePasskey advances a passkey's counter: the UPDATE's condition is the
// compare-and-set, so of two uses with one counter value one wins.
func (c *Core) UsePasskey(ctx context.Context, id []byte, signCount uint32) (airlock.Passkey, error) {
	q := &c.q.Passkeys
	var out airlock.Passkey
	err := c.d.Write(ctx, func(tx Tx) error {
		var err error
		out, err = c.scanPasskey(tx.QueryRow(q.Use, Args{{"id", id}, {"sign_count", int64(signCount)}}))
		if !noRows(err) {
			return err
		}
		var one int
		if err := tx.QueryRow(q.Exists, Args{{"id", id}}).Scan(&one); err != nil {
			return err
		}
		return airlock.Errorf(airlock.CodeUnauthorized,
			"the passkey's signature counter did not advance (%d): a replayed assertion or a cloned authenticator", signCount)
	})
	return out, c.d.Translate(err, "passkey", airlock.PasskeyIDString(id))
}

// DeletePasskey deletes a principal's passkey and appends passkey.deleted.
func (c *Core) DeletePasskey(ctx context.Context, principal string, id []byte, actor string) error {
	err := c.d.Write(ctx, func(tx Tx) error {
		var at time.Time
		if err := tx.QueryRow(c.q.Passkeys.Delete, Args{{"id", id}, {"principal", principal}}).Scan(c.d.Time(&at)); err != nil {
			return err
		}
		return tx.Event(airlock.Event{Type: airlock.EventPasskeyDeleted, At: at, Actor: actor, Subject: airlock.PasskeyIDString(id)})
	})
	return c.d.Translate(err, "passkey", airlock.PasskeyIDString(id))
}

// PutPasskeyCeremony stores a ceremony in progress, sweeping a few that
// are over first, unless maxLive are in progress.
func (c *Core) PutPasskeyCeremony(ctx context.Context, pc airlock.PasskeyCeremony, ttl time.Duration, maxLive int) error {
	if err := pc.Validate(ttl); err != nil {
		return err
	}
	q := &c.q.Passkeys
	err := c.d.Write(ctx, func(tx Tx) error {
		if _, err := tx.Exec(q.SweepCeremonies, nil); err != nil {
			return err
		}
		n, err := tx.Exec(q.PutCeremony, Args{{"challenge", pc.ChallengeHash}, {"kind", pc.Kind}, {"principal", pc.Principal},
			{"state", pc.State}, {"ttl", ttl}, {"max", maxLive}})
		if err == nil && n == 0 {
			return airlock.Unavailable(nil, "too many passkey ceremonies are in progress (%d); try again in a few minutes", maxLive)
		}
		return err
	})
	return c.d.Translate(err, "passkey ceremony", "new")
}

// TakePasskeyCeremony deletes and returns the live ceremony of a
// challenge hash: of two answers with one challenge, the DELETE lets one
// have the row.
func (c *Core) TakePasskeyCeremony(ctx context.Context, challengeHash []byte) (airlock.PasskeyCeremony, error) {
	var out airlock.PasskeyCeremony
	err := c.d.Write(ctx, func(tx Tx) error {
		return tx.QueryRow(c.q.Passkeys.TakeCeremony, Args{{"challenge", challengeHash}}).Scan(
			&out.ChallengeHash, &out.Kind, &out.Principal, &out.State, c.d.Time(&out.ExpiresAt))
	})
	if err != nil {
		return airlock.PasskeyCeremony{}, c.d.Translate(err, "passkey ceremony", "of this challenge")
	}
	return out, nil
}

// insertPasskeyDecision keeps p's assertion in the decision's transaction,
// with the key, the arguments digest and the relying party it was checked
// with, so anyone can check it later without the passkey.
func (c *Core) insertPasskeyDecision(tx Tx, p store.DecideParams, at time.Time) error {
	a := p.Passkey
	key := p.PasskeyPublicKey
	if key == nil {
		key = []byte{}
	}
	_, err := tx.Exec(c.q.Passkeys.InsertDecision, Args{{"id", p.ID}, {"principal", p.VotePrincipal()}, {"actor", p.Actor},
		{"state", string(p.Status)}, {"valid_for", p.ValidFor}, {"note", p.Note}, {"credential_id", a.CredentialID},
		{"authenticator_data", a.AuthenticatorData}, {"client_data_json", a.ClientDataJSON}, {"signature", a.Signature},
		{"public_key", key}, {"args_digest", p.PasskeyArgsDigest}, {"rp_id", p.PasskeyRPID}, {Now, at}})
	return err
}

func (c *Core) scanPasskeyDecision(row Row) (airlock.PasskeyDecision, error) {
	var (
		d     airlock.PasskeyDecision
		state string
	)
	err := row.Scan(&d.RequestID, &d.Principal, &d.Actor, &state, &d.ValidFor, &d.Note, &d.Assertion.CredentialID,
		&d.Assertion.AuthenticatorData, &d.Assertion.ClientDataJSON, &d.Assertion.Signature, &d.PublicKey, &d.ArgsDigest,
		&d.RPID, c.d.Time(&d.At))
	d.Status = airlock.State(state)
	if len(d.PublicKey) == 0 {
		d.PublicKey = nil
	}
	return d, err
}

// PasskeyDecisions lists the passkey-signed decisions of a request.
func (c *Core) PasskeyDecisions(ctx context.Context, requestID string) ([]airlock.PasskeyDecision, error) {
	out, err := all(ctx, c.d, c.scanPasskeyDecision, c.q.Passkeys.Decisions, Args{{"id", requestID}})
	return out, c.d.Translate(err, "passkey decisions", "of "+requestID)
}

// PasskeyDecisionsOf lists the passkey-signed decisions of several
// requests: one query for a page of the audit log.
func (c *Core) PasskeyDecisionsOf(ctx context.Context, requestIDs []string) ([]airlock.PasskeyDecision, error) {
	if len(requestIDs) == 0 {
		return nil, nil
	}
	if len(requestIDs) > store.MaxPasskeyDecisionsOf {
		return nil, airlock.Invalid("request_ids", "at most %d requests at once, not %d", store.MaxPasskeyDecisionsOf, len(requestIDs))
	}
	out, err := all(ctx, c.d, c.scanPasskeyDecision, c.q.Passkeys.DecisionsOf, Args{{"ids", requestIDs}})
	return out, c.d.Translate(err, "passkey decisions", "of a page of requests")
}

var _ store.Passkeys = (*Core)(nil)
