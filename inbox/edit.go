package inbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf16"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/display"
	"github.com/google/jsonschema-go/jsonschema"
)

// Edit, then rebind (docs/inbox.md, "Edit and approve"): a pending tool
// call's page has a JSON editor seeded with the exact arguments; its form
// goes to the confirmation page, which shows the diff of the original and
// the edited arguments before anything is recorded, and the two requests'
// pages show it afterwards, each linking to the other.

// diffRow is one line of an edit's diff as a page shows it.
type diffRow struct {
	Op   string // " ", "-" or "+"
	Text []display.Segment
}

// diffRows is the diff of an edit's original and edited arguments.
func diffRows(original, edited []byte) []diffRow {
	var out []diffRow
	for _, l := range airlock.ArgumentsDiff(original, edited) {
		out = append(out, diffRow{Op: string(l.Op), Text: display.Line(l.Text)})
	}
	return out
}

// editLink is what a page of an edit's request says of the other one.
type editLink struct {
	// ReplacedBy is set on the original: the request approved in its
	// place; DerivedFrom on that request: the original.
	ReplacedBy, DerivedFrom string
	Diff                    []diffRow
	// Missing says the other request could not be read (or its
	// arguments were purged): the diff is then absent.
	Missing bool
}

// editOf reads the other request of an edit r is part of, and the diff.
func (h *handler) editOf(ctx context.Context, v *view, r airlock.Request) *editLink {
	other := r.ReplacedBy
	if other == "" {
		other = r.DerivedFrom
	}
	if other == "" {
		return nil
	}
	e := &editLink{ReplacedBy: r.ReplacedBy, DerivedFrom: r.DerivedFrom}
	o, err := h.svc.Request(ctx, v.caller, other, 0)
	if err != nil || o.PurgedAt != nil || r.PurgedAt != nil {
		e.Missing = true
		return e
	}
	if r.ReplacedBy != "" {
		e.Diff = diffRows(r.Arguments, o.Arguments)
	} else {
		e.Diff = diffRows(o.Arguments, r.Arguments)
	}
	return e
}

// editSeed is the arguments as the editor starts from them: the exact
// bytes, but for each character the pages mark as hidden (a control, an
// invisible or a bidirectional character, display.Hidden) written as its
// JSON escape, \uXXXX. The document is the same JSON (the same canonical
// form and digest), and the reviewer sees every character they edit.
// Outside strings JSON has only plain whitespace, which stays.
func editSeed(args []byte) string {
	var b strings.Builder
	for _, r := range string(args) {
		switch {
		case r == '\n' || r == '\t' || r == '\r' || r == ' ' || !display.Hidden(r, false):
			b.WriteRune(r)
		case r > 0xFFFF:
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(&b, "\\u%04x\\u%04x", hi, lo)
		default:
			fmt.Fprintf(&b, "\\u%04x", r)
		}
	}
	return b.String()
}

// inputSchema is the tool's input schema a request carries in its
// context (input_schema, as airlock gate attaches its upstream's), or
// nil.
func inputSchema(r airlock.Request) json.RawMessage {
	var c struct {
		Schema json.RawMessage `json:"input_schema"`
	}
	if len(r.Context) == 0 || json.Unmarshal(r.Context, &c) != nil || len(c.Schema) == 0 || c.Schema[0] != '{' {
		return nil
	}
	return c.Schema
}

// checkEdited checks edited arguments as the inbox's editor does: a JSON
// object, and valid against the tool's input schema when the request
// carries one. The message is for the reviewer.
func checkEdited(r airlock.Request, edited []byte) error {
	edited = bytes.TrimSpace(edited)
	if !json.Valid(edited) {
		return fmt.Errorf("the edited arguments are not valid JSON")
	}
	if err := airlock.CheckEditedArguments(edited); err != nil {
		return err
	}
	raw := inputSchema(r)
	if raw == nil {
		return nil
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil // a schema the inbox cannot read checks nothing
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil
	}
	var doc any
	if err := json.Unmarshal(edited, &doc); err != nil {
		return fmt.Errorf("the edited arguments are not valid JSON")
	}
	if err := rs.Validate(doc); err != nil {
		return fmt.Errorf("the edited arguments do not match the tool's input schema: %v", err)
	}
	return nil
}

// adapterClaims is what an adapter claims about a call, as a page shows
// it: how reversible, and a preview, a diff line by line (each marked
// removed, added or context by its first character) or text.
type adapterClaims struct {
	Reversibility string
	PreviewType   string
	PreviewDiff   []diffRow
	PreviewText   []display.Segment
}

// claimsOf is r's adapter claims, or nil when it has none.
func claimsOf(r airlock.Request) *adapterClaims {
	if r.Preview == nil && r.Reversibility == "" {
		return nil
	}
	c := &adapterClaims{Reversibility: r.Reversibility}
	if p := r.Preview; p != nil {
		c.PreviewType = p.Type
		if p.Type == airlock.PreviewDiff {
			for _, l := range strings.Split(strings.TrimSuffix(p.Content, "\n"), "\n") {
				op := " "
				if l != "" && (l[0] == '-' || l[0] == '+') && !strings.HasPrefix(l, "---") && !strings.HasPrefix(l, "+++") {
					op = l[:1]
				}
				c.PreviewDiff = append(c.PreviewDiff, diffRow{Op: op, Text: display.Line(l)})
			}
		} else {
			c.PreviewText = display.Text(p.Content)
		}
	}
	return c
}
