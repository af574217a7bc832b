package rest

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/auditlog"
	"github.com/airlockhq/airlock/provider"
)

// The verifiable audit log (docs/audit.md), for auditors and admins. The
// provider carries the logic; these read the query and write the answer.
// Hashes are in standard base64, as golang.org/x/mod/sumdb/tlog and the
// checkpoints write them.

func (h *handler) auditCheckpoint(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	cp, err := h.svc.AuditCheckpoint(r.Context(), c)
	if err != nil {
		h.problem(w, r, err)
		return
	}
	replyText(w, cp.Note)
}

func (h *handler) auditKey(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	vkey, err := h.svc.AuditVerifierKey(r.Context(), c)
	if err != nil {
		h.problem(w, r, err)
		return
	}
	replyText(w, []byte(vkey+"\n"))
}

// replyText answers 200 with body as text/plain, byte for byte.
func replyText(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Header().Set("Cache-Control", "no-store")
	w.Write(body)
}

// queryInt64 reads the whole number q names, or def when it is absent;
// ok is false, the problem answered, when it is not a whole number.
func (h *handler) queryInt64(w http.ResponseWriter, r *http.Request, name string, def int64, required bool) (int64, bool) {
	s := r.URL.Query().Get(name)
	if s == "" {
		if required {
			h.problem(w, r, airlock.Invalid(name, "%s is required", name))
			return 0, false
		}
		return def, true
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		h.problem(w, r, airlock.Invalid(name, "%s must be a whole number, not %q", name, airlock.Clip(s)))
		return 0, false
	}
	return n, true
}

func (h *handler) auditEntries(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	start, ok := h.queryInt64(w, r, "start", 0, false)
	if !ok {
		return
	}
	limit, ok := h.queryInt64(w, r, "limit", 0, false)
	if !ok {
		return
	}
	if (r.URL.Query().Has("limit") && limit < 1) || limit > provider.MaxAuditEntries {
		h.problem(w, r, airlock.Invalid("limit", "limit is 1 to %d entries, not %d", provider.MaxAuditEntries, limit))
		return
	}
	leaves, release, err := h.svc.AuditEntries(r.Context(), c, start, int(limit))
	if err != nil {
		h.refuseHeavyRead(w, r, err) // a 429 says when to retry
		return
	}
	defer release()
	var b bytes.Buffer
	buf := b.AvailableBuffer()
	for _, e := range leaves {
		buf = auditlog.AppendEntry(buf, e)
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Length", strconv.Itoa(len(buf)))
	w.Header().Set("Cache-Control", "no-store")
	w.Write(buf)
}

// writeProof writes an inclusion or a consistency proof.
func writeProof(b *bytes.Buffer, p provider.AuditProof, inclusion bool) {
	o := beginObject(b)
	if inclusion {
		o.always("index", p.Index)
	} else {
		o.always("from", p.From)
	}
	o.always("tree_size", p.TreeSize)
	o.key("hashes")
	writeHashes(b, p.Hashes)
	o.end()
}

func writeHashes(b *bytes.Buffer, hs []auditlog.Hash) {
	s := make([]string, len(hs))
	for i, h := range hs {
		s[i] = h.String()
	}
	writeValue(b, s)
}

func (h *handler) auditInclusion(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	index, ok := h.queryInt64(w, r, "index", 0, true)
	if !ok {
		return
	}
	size, ok := h.queryInt64(w, r, "tree_size", 0, true)
	if !ok {
		return
	}
	p, err := h.svc.AuditInclusionProof(r.Context(), c, index, size)
	h.answerOK(w, r, err, func(b *bytes.Buffer) { writeProof(b, p, true) })
}

func (h *handler) auditConsistency(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	from, ok := h.queryInt64(w, r, "from", 0, true)
	if !ok {
		return
	}
	to, ok := h.queryInt64(w, r, "to", 0, true)
	if !ok {
		return
	}
	p, err := h.svc.AuditConsistencyProof(r.Context(), c, from, to)
	h.answerOK(w, r, err, func(b *bytes.Buffer) { writeProof(b, p, false) })
}

func (h *handler) requestProof(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	p, err := h.svc.AuditRequestProof(r.Context(), c, r.PathValue("id"))
	h.answerOK(w, r, err, func(b *bytes.Buffer) {
		o := beginObject(b)
		o.always("request_id", p.RequestID)
		o.always("tree_size", p.Checkpoint.Size)
		o.always("checkpoint", string(p.Checkpoint.Note))
		o.key("entries")
		b.WriteByte('[')
		for i, e := range p.Entries {
			if i > 0 {
				b.WriteByte(',')
			}
			eo := beginObject(b)
			eo.always("index", e.Index)
			eo.raw("leaf", e.Leaf)
			eo.key("proof")
			writeHashes(b, e.Proof)
			if e.Passkey != nil {
				// A record's members are strings, which always marshal.
				rec, _ := e.Passkey.MarshalJSON()
				eo.raw("passkey", rec)
			}
			eo.end()
		}
		b.WriteByte(']')
		o.key("later")
		b.WriteByte('[')
		for i, x := range p.Later {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatInt(x, 10))
		}
		b.WriteByte(']')
		o.end()
	})
}

// queryTime reads the RFC 3339 time q names, or the zero time when it is
// absent.
func (h *handler) queryTime(w http.ResponseWriter, r *http.Request, name string) (time.Time, bool) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return time.Time{}, true
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		h.problem(w, r, airlock.Invalid(name, "%s must be an RFC 3339 time such as 2026-12-01T00:00:00Z, not %q", name, airlock.Clip(s)))
		return time.Time{}, false
	}
	return t, true
}

func (h *handler) auditExport(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	p := provider.AuditExportParams{Format: provider.ExportFormat(r.URL.Query().Get("format"))}
	if p.Format == "" {
		p.Format = provider.ExportJSONL
	}
	var ok bool
	if p.Since, ok = h.queryTime(w, r, "since"); !ok {
		return
	}
	if p.Until, ok = h.queryTime(w, r, "until"); !ok {
		return
	}
	started := false
	err := h.svc.ExportAudit(r.Context(), c, p, func() io.Writer {
		started = true
		w.Header().Set("Content-Type", p.Format.ContentType())
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Disposition", `attachment; filename="airlock-audit.`+string(p.Format)+`"`)
		w.WriteHeader(http.StatusOK)
		return w
	})
	switch {
	case err == nil:
	case !started:
		h.refuseHeavyRead(w, r, err)
	case r.Context().Err() == nil:
		// The answer has begun: all that is left is to cut it short, so
		// that the client sees an incomplete body, never a complete one.
		h.log.Error("audit export cut short", "err", err)
		panic(http.ErrAbortHandler)
	}
}
