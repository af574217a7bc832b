package rest

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/ctxwait"
)

// eventBatch is how many audit events one store read returns.
const eventBatch = 200

// events streams audit events as server-sent events: id is the event's ID,
// event its type, and data a JSON object with the event and, for request
// events, the request as it is when sent. A client resumes after the last
// ID it saw with the Last-Event-ID header (or ?after=).
//
// The change signal is taken before each read of the store, so a change
// that lands during the read wakes the next wait and nothing is missed. The
// stream re-checks its token on every wake (a revoked token ends it) and
// ends when the client goes away or the server's Context is done.
func (h *handler) events(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	after, err := resumePoint(r)
	if err != nil {
		h.problem(w, r, err)
		return
	}
	ctx, stop := ctxwait.WithStop(r.Context(), h.shutdown)
	defer stop()
	changes := h.svc.Changes()
	evs, err := h.svc.Events(ctx, c, after, eventBatch)
	if err != nil {
		h.problem(w, r, err)
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no") // tell proxies not to buffer
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write([]byte(": connected\n\n")); err != nil {
		return
	}
	if err := rc.Flush(); err != nil {
		return
	}
	heartbeat := time.NewTicker(h.heartbeat)
	defer heartbeat.Stop()
	var buf bytes.Buffer
	for {
		for _, e := range evs {
			buf.Reset()
			h.writeSSE(&buf, r, c, e)
			if _, err := w.Write(buf.Bytes()); err != nil {
				return
			}
			after = e.ID
		}
		if err := rc.Flush(); err != nil {
			return
		}
		if len(evs) < eventBatch {
			select {
			case <-changes:
			case <-heartbeat.C:
				// Also a safety net for changes made by other replicas,
				// which this process's change signal does not see.
				if _, err := w.Write([]byte(": heartbeat\n\n")); err != nil {
					return
				}
			case <-ctx.Done():
				return
			}
			if _, err := h.svc.Authenticate(ctx, bearer(r)); err != nil {
				return
			}
		}
		changes = h.svc.Changes()
		if evs, err = h.svc.Events(ctx, c, after, eventBatch); err != nil {
			if ctx.Err() == nil {
				h.log.Error("event stream: read events", "after", after, "err", err)
			}
			return
		}
	}
}

// resumePoint reads where a stream resumes: the Last-Event-ID header, else
// ?after=, else from the first event.
func resumePoint(r *http.Request) (int64, error) {
	field, s := "Last-Event-ID", r.Header.Get("Last-Event-ID")
	if s == "" {
		field, s = "after", r.URL.Query().Get("after")
	}
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, airlock.Invalid(field, "%s must be an event ID this stream sent (a non-negative integer)", field)
	}
	return n, nil
}

// writeSSE writes one event. The data is JSON; stored arguments may hold
// line breaks, so each line goes out as its own data: line, which the
// client joins back with "\n".
func (h *handler) writeSSE(buf *bytes.Buffer, r *http.Request, c airlock.Caller, e airlock.Event) {
	var data bytes.Buffer
	o := beginObject(&data)
	o.key("event")
	writeEvent(&data, e)
	if e.RequestID != "" {
		req, err := h.svc.Request(r.Context(), c, e.RequestID, 0)
		switch {
		case err == nil:
			o.key("request")
			writeRequest(&data, req)
		case airlock.ErrorCode(err) != airlock.CodeNotFound && r.Context().Err() == nil:
			h.log.Error("event stream: read request", "id", e.RequestID, "err", err)
		}
	}
	o.end()
	buf.WriteString("id: " + strconv.FormatInt(e.ID, 10) + "\n")
	buf.WriteString("event: " + string(e.Type) + "\n")
	text := strings.ReplaceAll(strings.ReplaceAll(data.String(), "\r\n", "\n"), "\r", "\n")
	for line := range strings.SplitSeq(text, "\n") {
		buf.WriteString("data: " + line + "\n")
	}
	buf.WriteByte('\n')
}
