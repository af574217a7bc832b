package inbox

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/auditlog"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/provider"
)

// softPasskey is a software authenticator (testkit.SoftPasskey) whose
// assertions come as the inbox's form sends them.
type softPasskey struct{ *testkit.SoftPasskey }

func newSoftPasskey(t *testing.T, id string) softPasskey {
	return softPasskey{testkit.NewSoftPasskey(t, id)}
}

// assert signs challenge for relying party rpID as a platform
// authenticator does: the user present and verified, the counter
// advanced.
func (p softPasskey) assert(t *testing.T, challenge []byte, rpID, origin string) *airlock.PasskeyAssertion {
	t.Helper()
	a := p.Sign(t, "webauthn.get", challenge, rpID, origin, testkit.FlagUserPresent|testkit.FlagUserVerified)
	return &airlock.PasskeyAssertion{CredentialID: p.ID, AuthenticatorData: a.AuthenticatorData, ClientDataJSON: a.ClientDataJSON, Signature: a.Signature}
}

// passkeyQuorumPolicy sends refunds to Carol and Dan, both of whom must
// approve.
const passkeyQuorumPolicy = `groups:
  payments: [carol, dan]
rules:
  - {name: refunds, match: 'request.tool == "issue_refund"', action: ask, reviewers: payments, approvals: 2}
`

// TestPasskeyDecisionAudited: a decision signed with a passkey (a
// software authenticator's, checked by the provider as the inbox's form
// is) is marked in the request page's outcome, by the passkey's name and,
// once it is deleted, by its credential ID; the audit log's export and
// entries carry its record beside the decision's leaf, with the
// passkey's key, and verify against the signed checkpoint; a record whose
// signature, note, status or public key is changed fails, naming the
// leaf's index. CSV and OCSF say the decision was signed.
func TestPasskeyDecisionAudited(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) {
		o.requirePasskey = provider.AllRequests
		o.checkpointInterval = 50 * time.Millisecond
		o.policy = passkeyQuorumPolicy
	})
	ctx := context.Background()
	carol := b.callers["Carol (reviewer)"]
	soft := newSoftPasskey(t, "carol-phone-credential")
	if _, err := b.st.AddPasskey(ctx, airlock.Passkey{ID: soft.ID, Principal: "carol", TokenID: carol.Token.ID, Name: "work phone",
		PublicKey: soft.COSE}); err != nil {
		t.Fatal(err)
	}
	dan := b.callers["Dan (reviewer)"]
	softDan := newSoftPasskey(t, "dan-laptop-credential")
	if _, err := b.st.AddPasskey(ctx, airlock.Passkey{ID: softDan.ID, Principal: "dan", TokenID: dan.Token.ID, Name: "dan's laptop",
		PublicKey: softDan.COSE}); err != nil {
		t.Fatal(err)
	}
	inst := b.instance(t, "payments")
	id := b.toolCall(t, inst, "send_money", map[string]any{"to": "acme", "cents": 1200}, "pay the invoice")
	plain := b.toolCall(t, inst, "send_money", map[string]any{"to": "acme", "cents": 1}, "pay a cent")

	in := airlock.DecisionInput{Status: airlock.StateApproved, ValidFor: "10m", Note: "invoice 42 checked"}
	challenge, err := provider.DecisionChallenge(b.get(t, id), in)
	if err != nil {
		t.Fatal(err)
	}
	in.Passkey = soft.assert(t, challenge, b.svc.PasskeyRPID(), "http://localhost")
	if _, err := b.svc.Decide(ctx, carol, id, in); err != nil {
		t.Fatalf("a signed decision: %v", err)
	}
	// Another request decided by another path than a passkey's cannot
	// be: the same assertion is another request's challenge.
	if _, err := b.svc.Decide(ctx, carol, plain, airlock.DecisionInput{Status: airlock.StateApproved, ValidFor: "10m",
		Note: "invoice 42 checked", Passkey: in.Passkey}); airlock.ErrorCode(err) != airlock.CodeForbidden {
		t.Fatalf("the assertion replayed for another request = %v; want forbidden", err)
	}
	in2 := airlock.DecisionInput{Status: airlock.StateDenied}
	challenge, err = provider.DecisionChallenge(b.get(t, plain), in2)
	if err != nil {
		t.Fatal(err)
	}
	in2.Passkey = soft.assert(t, challenge, b.svc.PasskeyRPID(), "http://localhost")
	if _, err := b.svc.Decide(ctx, carol, plain, in2); err != nil {
		t.Fatalf("a signed denial: %v", err)
	}

	// A refund needs Carol's and Dan's approvals: two signed votes, the
	// second of which decides.
	refund := b.toolCall(t, inst, "issue_refund", map[string]any{"order": 7}, "refund order 7")
	for _, v := range []struct {
		who  airlock.Caller
		soft softPasskey
	}{{carol, soft}, {dan, softDan}} {
		in := airlock.DecisionInput{Status: airlock.StateApproved, ValidFor: "10m", Note: "refund checked"}
		challenge, err := provider.DecisionChallenge(b.get(t, refund), in)
		if err != nil {
			t.Fatal(err)
		}
		in.Passkey = v.soft.assert(t, challenge, b.svc.PasskeyRPID(), "http://localhost")
		if _, err := b.svc.Decide(ctx, v.who, refund, in); err != nil {
			t.Fatalf("a signed vote: %v", err)
		}
	}
	if got := b.get(t, refund); got.State != airlock.StateApproved || len(got.Votes) != 2 {
		t.Fatalf("the refund after two signed votes: %s, %d votes", got.State, len(got.Votes))
	}

	// The history: the outcome names the passkey, and so does each vote.
	page, _ := b.signedInClient(t, b.reviewer)
	if r := page.do(t, "GET", "/requests/"+id, nil, nil); r.status != 200 || !strings.Contains(r.body, `<span id="decision-passkey">signed with a passkey (work phone)</span>`) {
		t.Fatalf("the request page (%d) does not say the decision was signed with the passkey:\n%s", r.status, r.body)
	}
	if r := page.do(t, "GET", "/requests/"+refund, nil, nil); r.status != 200 ||
		!strings.Contains(r.body, `<span class="vote-passkey">signed with a passkey (work phone)</span>`) ||
		!strings.Contains(r.body, `<span class="vote-passkey">signed with a passkey (dan&#39;s laptop)</span>`) {
		t.Fatalf("the refund's page (%d) does not say each vote was signed with a passkey:\n%s", r.status, r.body)
	}

	// The audit log: a checkpoint of every event.
	rest := b.newClient(t)
	admin := map[string]string{"Authorization": "Bearer " + b.admin}
	get := func(path string) string {
		t.Helper()
		r := rest.do(t, "GET", path, nil, admin)
		if r.status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, r.status, r.body)
		}
		return r.body
	}
	key := get("/v1/audit/key")
	var cp auditlog.Checkpoint
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, err := b.svc.SequenceAudit(ctx); err != nil {
			t.Fatal(err)
		}
		size, err := b.st.TreeSize(ctx)
		if err != nil {
			t.Fatal(err)
		}
		events, err := b.st.ListEvents(ctx, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if r := rest.do(t, "GET", "/v1/audit/checkpoint", nil, admin); r.status == http.StatusOK {
			if cp, err = auditlog.OpenCheckpoint([]byte(r.body), key); err != nil {
				t.Fatal(err)
			}
			// Every event has its leaf, and the checkpoint covers them.
			if cp.Size == size && size == int64(len(events)) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint of the whole tree within 30 s (checkpoint %d)", cp.Size)
		}
		// The sequencer signs one a checkpoint interval (50 ms) after the
		// last.
		time.Sleep(10 * time.Millisecond)
	}

	export := get("/v1/audit/export?format=jsonl")
	lines := strings.SplitAfter(export, "\n")
	lines = lines[:len(lines)-1]
	if int64(len(lines)) != cp.Size {
		t.Fatalf("the export has %d lines; the checkpoint %d", len(lines), cp.Size)
	}
	verify := func(lines []string) error {
		return auditlog.VerifyEntries(auditlog.NewEntryReader(strings.NewReader(strings.Join(lines, ""))).All(), cp, nil)
	}
	if err := verify(lines); err != nil {
		t.Fatalf("the export does not verify: %v", err)
	}
	// Exactly the two decisions' leaves carry a record, with the key.
	var signed []int
	r := auditlog.NewEntryReader(strings.NewReader(export))
	for e, err := range r.All() {
		if err != nil {
			t.Fatal(err)
		}
		if e.Passkey == nil {
			continue
		}
		signed = append(signed, int(e.Index))
		l, err := auditlog.ParseLeaf(e.Leaf)
		if err != nil {
			t.Fatal(err)
		}
		who := soft
		if l.Actor == dan.Token.ID {
			who = softDan
		}
		if !bytes.Equal(e.Passkey.PublicKey, who.COSE) || !bytes.Equal(e.Passkey.Assertion.CredentialID, who.ID) || e.Passkey.RPID != "localhost" {
			t.Errorf("entry %d's passkey record: %+v", e.Index, e.Passkey)
		}
		if l.RequestID == refund && l.Type != map[bool]airlock.EventType{true: airlock.EventRequestApproved, false: airlock.EventRequestVoted}[who == softDan] {
			t.Errorf("a refund vote's record is beside a %s leaf by %s", l.Type, l.Actor)
		}
		if l.RequestID == id && (l.Type != airlock.EventRequestApproved || e.Passkey.Signed.Note != "invoice 42 checked" || e.Passkey.Signed.ValidFor != "10m") {
			t.Errorf("the approval's record is beside a %s leaf, signing %+v", l.Type, e.Passkey.Signed)
		}
	}
	if len(signed) != 4 {
		t.Fatalf("passkey records beside entries %v; want the approval's, the denial's and the refund's two votes'", signed)
	}
	// GET /v1/audit/entries, which `audit verify --url` reads through
	// the Go client, carries them too, and verifies so.
	if entries := get("/v1/audit/entries?limit=10000"); entries != export {
		t.Errorf("the entries are not the export's lines:\n%s\n%s", entries, export)
	}
	c, err := client.New(b.srv.URL, b.admin, client.WithHTTPClient(b.srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	served, err := c.AuditEntries(ctx, 0, int(cp.Size))
	if err != nil {
		t.Fatal(err)
	}
	records := 0
	for _, e := range served {
		if e.Passkey != nil {
			records++
		}
	}
	if err := auditlog.VerifyEntries(auditlog.Entries(served), cp, nil); err != nil || records != 4 {
		t.Errorf("the client's entries: %d records, %v; want 4, verified", records, err)
	}

	// The request's proof carries it beside the decision's leaf.
	if proof := get("/v1/approval-requests/" + id + "/proof"); strings.Count(proof, `"passkey":{"credential_id":"`+airlock.PasskeyIDString(soft.ID)+`"`) != 1 {
		t.Errorf("the request's proof does not carry the decision's passkey record:\n%s", proof)
	}

	// Tampering with a record fails at its index.
	at := signed[0]
	other := newSoftPasskey(t, "other")
	for name, change := range map[string]func(rec map[string]any){
		"signature": func(rec map[string]any) {
			sig, _ := base64.RawURLEncoding.DecodeString(rec["signature"].(string))
			sig[len(sig)-1] ^= 1
			rec["signature"] = base64.RawURLEncoding.EncodeToString(sig)
		},
		"note":       func(rec map[string]any) { rec["signed"].(map[string]any)["note"] = "invoice 43 checked" },
		"status":     func(rec map[string]any) { rec["signed"].(map[string]any)["status"] = "denied" },
		"public key": func(rec map[string]any) { rec["public_key"] = base64.RawURLEncoding.EncodeToString(other.COSE) },
		"request":    func(rec map[string]any) { rec["signed"].(map[string]any)["request_id"] = plain },
		"arguments": func(rec map[string]any) {
			rec["signed"].(map[string]any)["args_digest"] = "sha256:JRyRwBy0GHWbgssVY2qYVVxro57meVg_A7-1Xz7Vnw8"
		},
	} {
		var line map[string]any
		if err := json.Unmarshal([]byte(lines[at]), &line); err != nil {
			t.Fatal(err)
		}
		change(line["passkey"].(map[string]any))
		data, err := json.Marshal(line)
		if err != nil {
			t.Fatal(err)
		}
		tampered := append([]string(nil), lines...)
		tampered[at] = string(data) + "\n"
		err = verify(tampered)
		var ve *auditlog.VerifyError
		if !errors.As(err, &ve) || ve.Index != int64(at) || ve.Reason != auditlog.ReasonPasskey {
			t.Errorf("the record's %s changed: %v; want %s at index %d", name, err, auditlog.ReasonPasskey, at)
		}
	}

	// CSV and OCSF say which decisions were signed.
	csv := get("/v1/audit/export?format=csv")
	credID := airlock.PasskeyIDString(soft.ID)
	if !strings.HasSuffix(strings.SplitN(csv, "\n", 2)[0], ",passkey_credential_id") || strings.Count(csv, ","+credID+"\n") != 3 ||
		strings.Count(csv, ","+airlock.PasskeyIDString(softDan.ID)+"\n") != 1 {
		t.Errorf("the CSV export does not name the passkey of the four decisions and votes:\n%s", csv)
	}
	if ocsf := get("/v1/audit/export?format=ocsf"); strings.Count(ocsf, `"passkey":{"credential_id":"`+credID+`"`) != 3 {
		t.Errorf("the OCSF export does not carry Carol's three records:\n%s", ocsf)
	}

	// Deleted, the passkey is named by its credential ID, and the
	// export still verifies with the key kept with the decision.
	if err := b.st.DeletePasskey(ctx, "carol", soft.ID, "carol"); err != nil {
		t.Fatal(err)
	}
	if r := page.do(t, "GET", "/requests/"+id, nil, nil); !strings.Contains(r.body, "signed with a passkey ("+credID[:12]+"…)") {
		t.Errorf("after the passkey's deletion the request page does not name it by its ID:\n%s", r.body)
	}
	again := strings.SplitAfter(get("/v1/audit/export"), "\n")
	if err := verify(again[:cp.Size]); err != nil {
		t.Errorf("after the passkey's deletion the export's first %d entries do not verify: %v", cp.Size, err)
	}
	if again[at] != lines[at] {
		t.Errorf("after the passkey's deletion its record changed:\n%s\n%s", again[at], lines[at])
	}
}
