package provider

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/auditlog"
	"github.com/airlockhq/airlock/passkey"
	"github.com/airlockhq/airlock/store"
)

// The audit log's export (docs/audit.md, "Export"): the tree's entries
// from index 0 to its size when the export starts, read from the store a
// page at a time and written as they are read, so that what an export
// holds is a page, whatever the log's size.

// ExportFormat is how an export writes each event.
type ExportFormat string

// Export formats.
const (
	// ExportJSONL writes each entry as GET /v1/audit/entries does,
	// {"index":N,"leaf":{…}}: an export without since and until is the
	// whole tree, which a verifier checks against a checkpoint.
	ExportJSONL ExportFormat = "jsonl"
	// ExportCSV writes a header row and a row an event, the leaf's
	// members in columns, with every cell a spreadsheet would read as a
	// formula defused (DefuseCell).
	ExportCSV ExportFormat = "csv"
	// ExportOCSF writes an OCSF API Activity (class_uid 6003) object a
	// line.
	ExportOCSF ExportFormat = "ocsf"
)

// ContentType is the media type of an export in f.
func (f ExportFormat) ContentType() string {
	switch f {
	case ExportCSV:
		return "text/csv; charset=utf-8"
	default:
		return "application/x-ndjson"
	}
}

// exportPage is how many leaves an export reads from the store at once.
const exportPage = 1000

// AuditExportParams choose what an export writes.
type AuditExportParams struct {
	Format ExportFormat
	// Since and Until, when set, keep the events at or after Since and
	// before Until (by the leaf's time).
	Since, Until time.Time
}

// Validate checks p.
func (p AuditExportParams) Validate() error {
	switch p.Format {
	case ExportJSONL, ExportCSV, ExportOCSF:
	default:
		return airlock.Invalid("format", "format is jsonl, csv or ocsf, not %q", airlock.Clip(string(p.Format)))
	}
	if !p.Since.IsZero() && !p.Until.IsZero() && !p.Until.After(p.Since) {
		return airlock.Invalid("until", "until (%s) must be after since (%s)", p.Until.Format(time.RFC3339Nano), p.Since.Format(time.RFC3339Nano))
	}
	return nil
}

// ExportAudit writes the audit log's events in p.Format (auditors and
// admins). Once p is valid and a heavy read slot is taken (HeavyRead),
// it calls start for the writer, before writing anything: an error
// returned before start is the caller's to answer; one after it cuts the
// export short.
func (s *Service) ExportAudit(ctx context.Context, c airlock.Caller, p AuditExportParams, start func() io.Writer) error {
	if err := auditorOnly(c); err != nil {
		return err
	}
	if err := p.Validate(); err != nil {
		return err
	}
	release, err := s.HeavyRead(c)
	if err != nil {
		return err
	}
	defer release()
	a := s.storeFor(c)
	size, err := a.TreeSize(ctx)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(start(), 32<<10)
	w := newExportWriter(p, bw)
	if err := w.header(); err != nil {
		return err
	}
	for next := int64(0); next < size; {
		if err := ctx.Err(); err != nil {
			return err
		}
		page, err := a.AuditLeaves(ctx, next, int(min(exportPage, size-next)))
		if err != nil {
			return err
		}
		if len(page) == 0 {
			return fmt.Errorf("audit export: no leaf at index %d of a tree of %d", next, size)
		}
		entries, err := s.withPasskeys(ctx, a, page)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := w.entry(e); err != nil {
				return err
			}
		}
		next = page[len(page)-1].Index + 1
	}
	return w.flush()
}

// decisionTypes are how the leaves of decisions and votes spell their
// type: leaves are canonical, so such a leaf holds exactly these bytes,
// and a page's other leaves are never parsed for passkey records.
var decisionTypes = [][]byte{
	[]byte(`"type":"` + string(airlock.EventRequestApproved) + `"`),
	[]byte(`"type":"` + string(airlock.EventRequestDenied) + `"`),
	[]byte(`"type":"` + string(airlock.EventRequestVoted) + `"`),
}

// withPasskeys returns page's entries, each leaf of a decision or a vote
// that was signed with a passkey carrying its record (docs/audit.md,
// "Passkey-signed decisions"): one store read for the page's decided
// requests, so an export still holds a page at a time. A decision's
// record is the one of its request by its actor: a principal decides or
// votes once.
func (s *Service) withPasskeys(ctx context.Context, st store.Store, page []store.AuditLeaf) ([]auditlog.Entry, error) {
	out := make([]auditlog.Entry, len(page))
	var ids []string
	seen := map[string]bool{}
	decided := map[int]auditlog.Leaf{}
	for i, l := range page {
		out[i] = auditlog.Entry{Index: l.Index, Leaf: l.Leaf}
		if !slices.ContainsFunc(decisionTypes, func(t []byte) bool { return bytes.Contains(l.Leaf, t) }) {
			continue
		}
		leaf, err := auditlog.ParseLeaf(l.Leaf)
		if err != nil {
			// A leaf that is not one is served as it is stored, for a
			// verifier to name; it has no record to carry.
			continue
		}
		decided[i] = leaf
		if !seen[leaf.RequestID] {
			seen[leaf.RequestID] = true
			ids = append(ids, leaf.RequestID)
		}
	}
	if len(ids) == 0 {
		return out, nil
	}
	ds, err := st.PasskeyDecisionsOf(ctx, ids)
	if err != nil || len(ds) == 0 {
		return out, err
	}
	type key struct{ request, actor string }
	byActor := make(map[key]airlock.PasskeyDecision, len(ds))
	for _, d := range ds {
		byActor[key{d.RequestID, d.Actor}] = d
	}
	for i, leaf := range decided {
		d, ok := byActor[key{leaf.RequestID, leaf.Actor}]
		if !ok {
			continue
		}
		// A decision kept before relying parties were kept with
		// decisions was made for this server's.
		rp := cmp.Or(d.RPID, s.passkeyRPID)
		out[i].Passkey = &auditlog.PasskeyRecord{Assertion: d.Assertion, PublicKey: d.PublicKey, RPID: rp,
			Signed: passkey.Signed{RequestID: d.RequestID, ArgsDigest: d.ArgsDigest, Status: d.Status, ValidFor: d.ValidFor, Note: d.Note}}
	}
	return out, nil
}

// exportLeaf is a leaf's members as an export reads them (auditlog's
// leaf format, version 1).
type exportLeaf struct {
	Actor           string `json:"actor"`
	ArgumentsDigest string `json:"arguments_digest"`
	ContextDigest   string `json:"context_digest"`
	EventID         int64  `json:"event_id"`
	InstanceID      string `json:"instance_id"`
	PolicyHash      string `json:"policy_hash"`
	ReasoningDigest string `json:"reasoning_digest"`
	RequestID       string `json:"request_id"`
	State           string `json:"state"`
	Subject         string `json:"subject"`
	Time            string `json:"time"`
	TokenID         string `json:"token_id"`
	ToolDigest      string `json:"tool_digest"`
	Type            string `json:"type"`
	UID             string `json:"uid"`
}

// exportWriter writes the entries of one export.
type exportWriter struct {
	p   AuditExportParams
	w   *bufio.Writer
	csv *csv.Writer
	buf []byte
}

func newExportWriter(p AuditExportParams, w *bufio.Writer) *exportWriter {
	e := &exportWriter{p: p, w: w}
	if p.Format == ExportCSV {
		e.csv = csv.NewWriter(w)
	}
	return e
}

// csvColumns are the CSV export's columns: the index, then the leaf's
// members, then the credential ID (unpadded base64url) of the passkey that
// signed the decision or vote, empty for the rest.
var csvColumns = []string{"index", "time", "type", "actor", "request_id", "instance_id", "token_id", "state", "subject",
	"policy_hash", "uid", "event_id", "tool_digest", "arguments_digest", "reasoning_digest", "context_digest", "passkey_credential_id"}

func (e *exportWriter) header() error {
	if e.csv != nil {
		return e.csv.Write(csvColumns)
	}
	return nil
}

// entry writes en unless the export's times leave it out.
func (e *exportWriter) entry(en auditlog.Entry) error {
	var l exportLeaf
	var at time.Time
	if e.p.Format != ExportJSONL || !e.p.Since.IsZero() || !e.p.Until.IsZero() {
		if err := json.Unmarshal(en.Leaf, &l); err != nil {
			return fmt.Errorf("audit export: leaf %d: %w", en.Index, err)
		}
		var err error
		if at, err = time.Parse(auditlog.TimeLayout, l.Time); err != nil {
			return fmt.Errorf("audit export: leaf %d: time %q", en.Index, airlock.Clip(l.Time))
		}
		if (!e.p.Since.IsZero() && at.Before(e.p.Since)) || (!e.p.Until.IsZero() && !at.Before(e.p.Until)) {
			return nil
		}
	}
	switch e.p.Format {
	case ExportCSV:
		row := []string{strconv.FormatInt(en.Index, 10), l.Time, l.Type, l.Actor, l.RequestID, l.InstanceID, l.TokenID, l.State,
			l.Subject, l.PolicyHash, l.UID, "", l.ToolDigest, l.ArgumentsDigest, l.ReasoningDigest, l.ContextDigest, ""}
		if l.EventID != 0 {
			row[11] = strconv.FormatInt(l.EventID, 10)
		}
		if en.Passkey != nil {
			row[16] = airlock.PasskeyIDString(en.Passkey.Assertion.CredentialID)
		}
		for i := range row {
			row[i] = DefuseCell(row[i])
		}
		return e.csv.Write(row)
	case ExportOCSF:
		line, err := ocsfLine(en, l, at)
		if err != nil {
			return err
		}
		_, err = e.w.Write(line)
		return err
	default:
		e.buf = auditlog.AppendEntry(e.buf[:0], en)
		_, err := e.w.Write(e.buf)
		return err
	}
}

func (e *exportWriter) flush() error {
	if e.csv != nil {
		e.csv.Flush()
		if err := e.csv.Error(); err != nil {
			return err
		}
	}
	return e.w.Flush()
}

// DefuseCell returns a CSV cell a spreadsheet shows as text: one that
// begins with a character a spreadsheet reads as the start of a formula
// (=, +, -, @, a tab or a carriage return) gets a leading apostrophe
// (OWASP, "CSV Injection").
func DefuseCell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// OCSF's API Activity class (schema.ocsf.io, class 6003), the version the
// export writes, and its activities.
const (
	ocsfVersion       = "1.3.0"
	ocsfClassUID      = 6003
	ocsfCategoryUID   = 6
	ocsfCreate        = 1
	ocsfUpdate        = 3
	ocsfDelete        = 4
	ocsfOther         = 99
	ocsfInformational = 1
	ocsfSuccess       = 1
)

// ocsfActivity maps an event type to an API Activity's activity: what
// is created, changed or ended. A type the mapping does not know is
// Other, never dropped.
func ocsfActivity(typ string) (int, string) {
	_, verb, ok := strings.Cut(typ, ".")
	switch {
	case !ok:
		return ocsfOther, "Other"
	case verb == "created":
		return ocsfCreate, "Create"
	case verb == "deleted" || verb == "revoked":
		return ocsfDelete, "Delete"
	default:
		return ocsfUpdate, "Update"
	}
}

// ocsfEvent is an OCSF API Activity object as the export writes it.
type ocsfEvent struct {
	ClassUID     int    `json:"class_uid"`
	ClassName    string `json:"class_name"`
	CategoryUID  int    `json:"category_uid"`
	CategoryName string `json:"category_name"`
	ActivityID   int    `json:"activity_id"`
	ActivityName string `json:"activity_name"`
	TypeUID      int    `json:"type_uid"`
	TypeName     string `json:"type_name"`
	Time         int64  `json:"time"`
	SeverityID   int    `json:"severity_id"`
	Severity     string `json:"severity"`
	StatusID     int    `json:"status_id"`
	Status       string `json:"status"`
	Actor        struct {
		User struct {
			UID string `json:"uid"`
		} `json:"user"`
	} `json:"actor"`
	API struct {
		Operation string `json:"operation"`
		Service   struct {
			Name string `json:"name"`
		} `json:"service"`
	} `json:"api"`
	Resources []ocsfResource `json:"resources,omitempty"`
	Metadata  struct {
		Version string `json:"version"`
		Product struct {
			Name       string `json:"name"`
			VendorName string `json:"vendor_name"`
		} `json:"product"`
		UID          string `json:"uid"`
		Sequence     int64  `json:"sequence"`
		EventCode    string `json:"event_code"`
		OriginalTime string `json:"original_time"`
		LogName      string `json:"log_name"`
	} `json:"metadata"`
	Unmapped struct {
		Leaf json.RawMessage `json:"leaf"`
		// Passkey is the record of a decision or vote signed with a
		// passkey, as the JSON lines carry it.
		Passkey *auditlog.PasskeyRecord `json:"passkey,omitempty"`
	} `json:"unmapped"`
}

type ocsfResource struct {
	UID  string `json:"uid"`
	Type string `json:"type,omitempty"`
}

// ocsfLine is one event as an OCSF API Activity object and a newline.
// The caller's address is not in the log, so src_endpoint is absent; the
// whole leaf is in unmapped.leaf, so nothing of the event is lost, and a
// passkey-signed decision's record in unmapped.passkey.
func ocsfLine(en auditlog.Entry, l exportLeaf, at time.Time) ([]byte, error) {
	id, name := ocsfActivity(l.Type)
	o := ocsfEvent{
		ClassUID: ocsfClassUID, ClassName: "API Activity", CategoryUID: ocsfCategoryUID, CategoryName: "Application Activity",
		ActivityID: id, ActivityName: name, TypeUID: ocsfClassUID*100 + id, TypeName: "API Activity: " + name,
		Time: at.UnixMilli(), SeverityID: ocsfInformational, Severity: "Informational", StatusID: ocsfSuccess, Status: "Success",
	}
	o.Actor.User.UID = l.Actor
	o.API.Operation, o.API.Service.Name = l.Type, "airlock"
	if l.RequestID != "" {
		o.Resources = append(o.Resources, ocsfResource{UID: l.RequestID, Type: "approval_request"})
	}
	if l.InstanceID != "" {
		o.Resources = append(o.Resources, ocsfResource{UID: l.InstanceID, Type: "instance"})
	}
	if l.Subject != "" {
		o.Resources = append(o.Resources, ocsfResource{UID: l.Subject})
	}
	m := &o.Metadata
	m.Version, m.Product.Name, m.Product.VendorName = ocsfVersion, "Airlock", "Airlock"
	m.UID, m.Sequence, m.EventCode, m.OriginalTime, m.LogName = l.UID, en.Index, l.Type, l.Time, "audit"
	if m.UID == "" {
		m.UID = strconv.FormatInt(l.EventID, 10)
	}
	o.Unmapped.Leaf, o.Unmapped.Passkey = en.Leaf, en.Passkey
	line, err := json.Marshal(&o)
	if err != nil {
		return nil, fmt.Errorf("audit export: leaf %d: %w", en.Index, err)
	}
	return append(line, '\n'), nil
}
