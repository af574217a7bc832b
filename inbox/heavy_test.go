package inbox

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// countingLists is a store that counts the lists of full requests and of
// summaries it is asked for.
type countingLists struct {
	store.Store
	full, summaries atomic.Int64
}

func (s *countingLists) ListRequests(ctx context.Context, f store.RequestFilter) ([]airlock.Request, bool, error) {
	s.full.Add(1)
	return s.Store.ListRequests(ctx, f)
}

func (s *countingLists) ListRequestSummaries(ctx context.Context, f store.RequestFilter) ([]airlock.RequestSummary, bool, error) {
	s.summaries.Add(1)
	return s.Store.ListRequestSummaries(ctx, f)
}

// TestListPagesReadSummaries checks that the pending page, its live
// stream and the history read summaries only, never a request's
// arguments, and that a history search, which does look into arguments,
// still finds a word that only they hold.
func TestListPagesReadSummaries(t *testing.T) {
	t.Parallel()
	db := &countingLists{}
	b := setup(t, func(o *options) {
		o.wrapStore = func(s store.Store) store.Store { db.Store = s; return db }
	})
	inst := b.instance(t, "payments adapter")
	pending := b.toolCall(t, inst, "issue_refund", map[string]any{"payment": "pay_quokka"}, "a refund")
	decided := b.toolCall(t, inst, "close_account", map[string]any{"account": "acct_wombat"}, "closing")
	if _, err := b.svc.Decide(context.Background(), b.callers["Carol (reviewer)"], decided, airlock.DecisionInput{Status: airlock.StateDenied}); err != nil {
		t.Fatal(err)
	}
	c, _ := b.signedInClient(t, b.reviewer)
	for _, tc := range []struct{ path, shows string }{
		{"/", "/requests/" + pending},
		{"/?tool=issue_refund", "/requests/" + pending},
		{"/history", "/requests/" + decided},
		{"/history?state=denied", "/requests/" + decided},
	} {
		r := c.do(t, "GET", tc.path, nil, nil)
		if r.status != http.StatusOK || !strings.Contains(r.body, tc.shows) {
			t.Fatalf("GET %s: status %d, page without %s", tc.path, r.status, tc.shows)
		}
	}
	if n := db.full.Load(); n != 0 || db.summaries.Load() == 0 {
		t.Fatalf("the pending page and the history read %d lists of whole requests (and %d of summaries); want summaries only", n, db.summaries.Load())
	}
	r := c.do(t, "GET", "/history?q=ACCT_WOMBAT", nil, nil)
	if !strings.Contains(r.body, "/requests/"+decided) {
		t.Fatalf("a search for a word only the arguments hold found nothing:\n%s", r.body)
	}
}

// TestHistorySearchBoundedByBytes checks that one history search reads at
// most 16 pages' worth of arguments (provider.Config.ListPageBytes each),
// however few requests that is, and offers to go on from there: the match
// further back is found on the next page.
func TestHistorySearchBoundedByBytes(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) { o.pageBytes = 16 << 10 })
	inst := b.instance(t, "bulk adapter")
	reviewer := b.callers["Carol (reviewer)"]
	blob := strings.Repeat("q", 20_000)
	var oldest string
	for i := range 20 {
		args := map[string]any{"blob": blob}
		if i == 0 {
			args["marker"] = "needle-far-back"
		}
		id := b.toolCall(t, inst, "bulk", args, "")
		if i == 0 {
			oldest = id
		}
		if _, err := b.svc.Decide(context.Background(), reviewer, id, airlock.DecisionInput{Status: airlock.StateDenied}); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := b.signedInClient(t, b.reviewer)
	first := c.do(t, "GET", "/history?q=needle-far-back", nil, nil)
	// 16 pages of 16 KiB is 256 KiB: the search stops after the 14th
	// request of 20,000 bytes.
	if !strings.Contains(first.body, "among the latest 14") || strings.Contains(first.body, "/requests/"+oldest) {
		t.Fatalf("the first search page did not stop after 256 KiB of arguments:\n%s", first.body)
	}
	next := regexp.MustCompile(`href="/history\?([^"]+)" rel="next"`).FindStringSubmatch(first.body)
	if next == nil {
		t.Fatalf("the first search page offers no older page:\n%s", first.body)
	}
	second := c.do(t, "GET", "/history?"+strings.ReplaceAll(next[1], "&amp;", "&"), nil, nil)
	if !strings.Contains(second.body, "/requests/"+oldest) {
		t.Fatalf("the older page did not find the match:\n%s", second.body)
	}
}

// TestListPagesBusy checks that the pending page and the history answer
// 429 with Retry-After when the reviewer's token has every slot for lists
// in use, that the live stream, which holds none, still follows, and that
// the pages serve again once a slot is free.
func TestListPagesBusy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c, _ := b.signedInClient(t, b.reviewer)
	reviewer := b.callers["Carol (reviewer)"]
	var releases []func()
	for range 2 {
		release, err := b.svc.HeavyRead(reviewer)
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, release)
	}
	for _, path := range []string{"/", "/history", "/history?q=x"} {
		r := c.do(t, "GET", path, nil, nil)
		if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "1" || !strings.Contains(r.body, "Too many lists at once") {
			t.Fatalf("GET %s with every slot taken: status %d, Retry-After %q:\n%s", path, r.status, r.header.Get("Retry-After"), r.body)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", b.srv.URL+"/live", nil)
	res, err := c.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, _ := res.Body.Read(buf)
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(string(buf[:n]), "event: pending") {
		t.Fatalf("live stream with every slot taken: status %d, first bytes %q", res.StatusCode, buf[:n])
	}
	cancel()
	res.Body.Close()
	releases[0]()
	for _, path := range []string{"/", "/history"} {
		if r := c.do(t, "GET", path, nil, nil); r.status != http.StatusOK {
			t.Fatalf("GET %s with a slot free: status %d", path, r.status)
		}
	}
	releases[1]()
}
