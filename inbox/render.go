package inbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/display"
	"github.com/airlockhq/airlock/provider"
)

// pageNames are the templates, each parsed with layout.html.
var pageNames = []string{"pending", "request", "history", "sessions", "board", "grants", "fatigue", "signin", "continue", "error", "confirm", "batch", "passkeys"}

// funcs are the templates' helpers. None returns template.HTML: every
// value from data is escaped by html/template.
var funcs = template.FuncMap{
	"vis":       display.Line,
	"visText":   display.Text,
	"utc":       func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"iso":       func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"clock":     func(t time.Time) string { return t.UTC().Format("15:04 UTC") },
	"kindName":  kindName,
	"plainText": display.Join,
	// agentClaim labels what an agent wrote, the same on every surface.
	"agentClaim":   func() string { return airlock.AgentClaim },
	"adapterClaim": func() string { return airlock.AdapterClaim },
	"lower":        strings.ToLower,
	"reviewPhrase": reviewPhrase,
}

// reviewPhrase says a reviewer's client's claim (airlock.ReviewClaim) as
// people read it, exactly: "seen in full, 12 s open" or "41.7 % seen, 3 s
// open".
func reviewPhrase(rc *airlock.ReviewClaim) string {
	seen := "seen in full"
	if rc.SeenFraction < 1 {
		seen = strconv.FormatFloat(rc.SeenFraction*100, 'f', -1, 64) + " % of the arguments seen"
	}
	return seen + ", open " + strconv.Itoa(rc.SecondsOpen) + " s before the decision"
}

func parsePages() map[string]*template.Template {
	pages := map[string]*template.Template{}
	for _, name := range pageNames {
		t := template.Must(template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html"))
		pages[name] = t
	}
	return pages
}

// kindName is how a request kind reads to people.
func kindName(k airlock.Kind) string {
	switch k {
	case airlock.KindToolCall:
		return "Tool call"
	case airlock.KindWorkChange:
		return "Work change"
	case airlock.KindMemoryChange:
		return "Memory change"
	case airlock.KindLifeChange:
		return "Life change"
	case airlock.KindAgentRequest:
		return "Agent request"
	}
	return string(k)
}

// pageData is what every template gets; Body is the page's own data.
type pageData struct {
	Title        string
	Page         string // the template name, also body's data-page
	Signed       bool
	Who          string
	CanDecide    bool
	CSRF         string
	PendingCount int
	Flash        *flash
	Body         any
}

// view carries the signed-in reviewer through a page's handler.
type view struct {
	caller airlock.Caller
	sess   *session
}

// render writes a page with status. Rendering goes to a buffer first, so a
// template error is a clean 500, never half a page.
func (h *handler) render(w http.ResponseWriter, r *http.Request, status int, v *view, name, title string, body any) {
	p := pageData{Title: title, Page: name, Body: body}
	if v != nil {
		p.Signed = true
		p.Who = v.caller.Name
		p.CanDecide = v.caller.Role == airlock.RoleReviewer
		p.CSRF = v.sess.csrf
		p.Flash = h.takeFlash(w, r, v.sess)
		if n, err := h.svc.PendingCount(r.Context()); err == nil {
			p.PendingCount = n
		}
	}
	var buf bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		h.log.Error("inbox: render", "page", name, "err", err)
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString("<!doctype html><title>Internal error</title><p>Internal error: the page could not be shown; it has been logged.</p>")
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// errorBody is the error page's data.
type errorBody struct {
	Heading, Message string
}

// errorPage writes a page that says what went wrong and what to do.
func (h *handler) errorPage(w http.ResponseWriter, r *http.Request, status int, heading, message string) {
	h.render(w, r, status, nil, "error", heading, errorBody{Heading: heading, Message: message})
}

// signedInHeavy is signedIn for a page that lists requests: it also takes
// a slot for the list (provider.Service.HeavyRead). When none is free, it
// answers 429 with Retry-After and a page saying so, and reports false.
func (h *handler) signedInHeavy(w http.ResponseWriter, r *http.Request) (v *view, release func(), ok bool) {
	v, ok = h.signedIn(w, r)
	if !ok {
		return nil, nil, false
	}
	release, err := h.svc.HeavyRead(v.caller)
	switch {
	case err == nil:
		return v, release, true
	case airlock.ErrorCode(err) == airlock.CodeRateLimited:
		w.Header().Set("Retry-After", strconv.Itoa(int(provider.HeavyReadRetryAfter.Seconds())))
		h.errorPage(w, r, http.StatusTooManyRequests, "Busy", "Too many lists at once: "+err.Error()+". Reload the page to try again.")
	default:
		h.fail(w, r, err)
	}
	return nil, nil, false
}

// fail answers a failed read: not_found is a 404 page, a gone client
// nothing, an unavailable store a logged 503 page, anything unexpected a
// logged 500 page.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return
	}
	var e *airlock.Error
	if errors.As(err, &e) && e.Code == airlock.CodeUnavailable {
		h.log.Error("inbox: store unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", strconv.Itoa(int(airlock.UnavailableRetryAfter.Seconds())))
		h.errorPage(w, r, http.StatusServiceUnavailable, "Try again shortly",
			"Airlock cannot use its store right now ("+e.Message+"). Reload this page in a few seconds to see where things stand.")
		return
	}
	if errors.As(err, &e) && e.Code != airlock.CodeInternal {
		status := http.StatusBadRequest
		switch e.Code {
		case airlock.CodeNotFound:
			status = http.StatusNotFound
		case airlock.CodeForbidden:
			status = http.StatusForbidden
		}
		h.errorPage(w, r, status, "Cannot show this", e.Message)
		return
	}
	h.log.Error("inbox: internal error", "method", r.Method, "path", r.URL.Path, "err", err)
	h.errorPage(w, r, http.StatusInternalServerError, "Internal error", "Something went wrong on the server; it has been logged. Try again.")
}

// left says how long until t, in words: "14m 05s left".
func left(now, t time.Time) string {
	d := t.Sub(now)
	if d <= 0 {
		return "deadline passed"
	}
	d = d.Truncate(time.Second)
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%dd %dh left", int(d.Hours())/24, int(d.Hours())%24)
	case d >= time.Hour:
		return fmt.Sprintf("%dh %02dm left", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dm %02ds left", int(d.Minutes()), int(d.Seconds())%60)
}

// ago says how long since t: "3m ago".
func ago(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours())/24)
}

// shortDuration writes d as a Go duration without zero units: 5m, 1h, 90s.
func shortDuration(d time.Duration) string {
	s := d.String()
	for _, suffix := range []string{"m0s", "h0m"} {
		if len(s) > len(suffix) && s[len(s)-len(suffix):] == suffix {
			s = s[:len(s)-len(suffix)+1]
		}
	}
	return s
}
