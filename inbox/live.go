package inbox

import (
	"bytes"
	"net/http"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/ctxwait"
)

// live streams server-sent events to an inbox page, authenticated by its
// session cookie:
//
//   - /live?kind=…&tool=…&instance=…&session=… sends "pending" events whose
//     data is the pending list (the same HTML the page has, rendered by
//     html/template), each time it changes;
//   - /live?request=apr_… sends, while the request is pending, a "state"
//     event or, for a request needing several approvals, "votes" events
//     whose data is its quorum line and Votes panel, at each vote; once it
//     is not pending, "outcome" events whose data is the request page's
//     Outcome panel (who decided, when, the note), so an open request page
//     shows votes and a decision made elsewhere at once.
//
// It waits on Service.Changes, taken before each read so no change is
// missed, looks the session up again on every wake (a revoked token or a
// sign-out on any replica ends the stream), and re-reads on a heartbeat too, which also
// catches changes made by other replicas.
func (h *handler) live(w http.ResponseWriter, r *http.Request) {
	s, c, err := h.lookup(r)
	if err != nil {
		if code := airlock.ErrorCode(err); code != airlock.CodeNotFound && code != airlock.CodeUnauthorized {
			h.fail(w, r, err)
			return
		}
		h.errorPage(w, r, http.StatusUnauthorized, "Signed out", "Sign in again to follow the inbox live.")
		return
	}
	ctx, stop := ctxwait.WithStop(r.Context(), h.shutdown)
	defer stop()
	id := r.URL.Query().Get("request")
	f := readFilter(r.URL.Query())
	v := &view{caller: c, sess: s}

	// snapshot renders what the stream sends now: the event name and data.
	snapshot := func() (string, string, error) {
		if id != "" {
			req, err := h.svc.Request(ctx, v.caller, id, 0)
			if err != nil {
				return "", "", err
			}
			if req.State == airlock.StatePending && !req.NeedsQuorum() {
				return "state", string(req.State), nil
			}
			if req.State == airlock.StatePending {
				var buf bytes.Buffer
				if err := h.pages["request"].ExecuteTemplate(&buf, "tally", h.requestBody(ctx, v, req)); err != nil {
					return "", "", err
				}
				return "votes", buf.String(), nil
			}
			var buf bytes.Buffer
			if err := h.pages["request"].ExecuteTemplate(&buf, "outcome", h.requestBody(ctx, v, req)); err != nil {
				return "", "", err
			}
			return "outcome", buf.String(), nil
		}
		body, err := h.pendingRows(ctx, v.caller, f)
		if err != nil {
			return "", "", err
		}
		var buf bytes.Buffer
		if err := h.pages["pending"].ExecuteTemplate(&buf, "pendingList", body); err != nil {
			return "", "", err
		}
		return "pending", buf.String(), nil
	}

	changes := h.svc.Changes()
	event, data, err := snapshot()
	if err != nil {
		h.fail(w, r, err)
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	heartbeat := time.NewTicker(h.heartbeat)
	defer heartbeat.Stop()
	last := ""
	for {
		if data != last {
			if _, err := w.Write(sseEvent(event, data)); err != nil {
				return
			}
			last = data
		} else if _, err := w.Write([]byte(": heartbeat\n\n")); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		select {
		case <-changes:
		case <-heartbeat.C:
		case <-ctx.Done():
			return
		}
		// The session, looked up again: a sign-out on any replica or a
		// revoked token ends the stream. A stream does not touch it: an
		// open tab is not a reviewer's activity.
		if _, _, err := h.svc.WebSession(ctx, s.id); err != nil {
			return
		}
		changes = h.svc.Changes()
		if event, data, err = snapshot(); err != nil {
			if ctx.Err() == nil && airlock.ErrorCode(err) != airlock.CodeNotFound {
				h.log.Error("inbox: live stream", "err", err)
			}
			return
		}
	}
}

// sseEvent formats one event; each line of data goes out as its own data:
// line, which the browser joins back with "\n".
func sseEvent(event, data string) []byte {
	var b bytes.Buffer
	b.WriteString("event: " + event + "\n")
	data = strings.ReplaceAll(strings.ReplaceAll(data, "\r\n", "\n"), "\r", "\n")
	for line := range strings.SplitSeq(data, "\n") {
		b.WriteString("data: " + line + "\n")
	}
	b.WriteByte('\n')
	return b.Bytes()
}
