package rest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// TestListPagesByBytes checks that a page of GET /v1/approval-requests
// ends, with a next_cursor, once its requests hold the page's bytes
// (provider.Config.ListPageBytes), however many the limit allows; that a
// request larger than that comes alone on its page; that following the
// cursors lists every request once, each byte for byte; and that the page
// is written as it is encoded, not measured whole first (no
// Content-Length).
func TestListPagesByBytes(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) { o.pageBytes = 64 << 10 })
	inst := b.instance(t, b.agentA)
	// Six requests of 20,000 bytes of arguments: after four, a page holds
	// more than 64 KiB. Then one of 100,000 bytes, the newest.
	var created []string // newest first
	args := map[string]string{}
	for i, size := range []int{20_000, 20_000, 20_000, 20_000, 20_000, 20_000, 100_000} {
		a := fmt.Sprintf(`{"n":%d,"blob":%q}`, i, strings.Repeat("z", size-18))
		r := b.create(t, b.agentA, inst, fmt.Sprint("big-", i), `{"tool":"big","arguments":`+a+`}`)
		want(t, r, http.StatusCreated, "")
		id := r.obj(t)["id"].(string)
		created = slices.Insert(created, 0, id)
		args[id] = a
	}
	var (
		got   []string
		pages []int
	)
	path := "/v1/approval-requests?limit=50&instance_id=" + inst
	for cursor := ""; ; {
		q := path
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		res, err := b.client.Do(b.newRequest(context.Background(), t, req{method: "GET", path: q, token: b.reviewer}))
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Items []struct {
				ID        string          `json:"id"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"items"`
			NextCursor string `json:"next_cursor"`
		}
		err = json.NewDecoder(res.Body).Decode(&page)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("list: status %d, %v", res.StatusCode, err)
		}
		if res.ContentLength != -1 {
			t.Errorf("a page of %d requests came with Content-Length %d: it was built whole before it was written", len(page.Items), res.ContentLength)
		}
		pages = append(pages, len(page.Items))
		for _, it := range page.Items {
			got = append(got, it.ID)
			if string(it.Arguments) != args[it.ID] {
				t.Fatalf("request %s listed with other arguments than it was sent with", it.ID)
			}
		}
		if cursor = page.NextCursor; cursor == "" || len(pages) > 7 {
			break
		}
	}
	if !slices.Equal(pages, []int{1, 4, 2}) || !slices.Equal(got, created) {
		t.Fatalf("pages of %v listing %v; want pages of [1 4 2] listing %v", pages, got, created)
	}
}

// blockingLists is a store whose ListRequests, once it has said so on
// entered, waits until release is closed or its caller gives up: the list
// then holds its slot for as long as the test needs.
type blockingLists struct {
	store.Store
	entered chan struct{}
	release chan struct{}
}

func (s *blockingLists) ListRequests(ctx context.Context, f store.RequestFilter) ([]airlock.Request, bool, error) {
	select {
	case <-s.release:
		return s.Store.ListRequests(ctx, f)
	default:
	}
	select {
	case s.entered <- struct{}{}:
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	return s.Store.ListRequests(ctx, f)
}

// TestListConcurrencyBound checks the bound on lists in progress: a token
// may have two at once and the server three; beyond either, 429
// rate_limited with Retry-After, saying which bound it is. A slot is given
// back when its list is answered, and when its client goes away first.
func TestListConcurrencyBound(t *testing.T) {
	t.Parallel()
	lists := &blockingLists{entered: make(chan struct{}), release: make(chan struct{})}
	b := setup(t, func(o *options) {
		o.heavyReads, o.heavyPerToken = 3, 2
		o.wrapStore = func(s store.Store) store.Store { lists.Store = s; return lists }
	})
	var releaseOnce sync.Once
	releaseAll := func() { releaseOnce.Do(func() { close(lists.release) }) }
	t.Cleanup(releaseAll) // a failed test must not leave lists waiting in the store
	list := func(token string) req { return req{method: "GET", path: "/v1/approval-requests", token: token} }
	var wg sync.WaitGroup
	results := make(chan resp, 8)
	// start begins a list that stops in the store, and waits until it has.
	start := func(ctx context.Context, token string) {
		t.Helper()
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := b.client.Do(b.newRequest(ctx, t, list(token)))
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("list: %v", err)
				}
				return
			}
			res.Body.Close()
			results <- resp{status: res.StatusCode}
		}()
		<-lists.entered
	}
	refused := func(token, says string) {
		t.Helper()
		// A list let through would stop in the store: it must give up.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r := b.doCtx(ctx, t, list(token))
		want(t, r, http.StatusTooManyRequests, airlock.CodeRateLimited)
		if r.header.Get("Retry-After") != "1" || !strings.Contains(r.obj(t)["detail"].(string), says) {
			t.Fatalf("refused with Retry-After %q and detail %q; want 1 and a detail saying %q", r.header.Get("Retry-After"), r.obj(t)["detail"], says)
		}
	}

	gone, leave := context.WithCancel(context.Background())
	start(gone, b.agentA)
	start(context.Background(), b.agentA)
	refused(b.agentA, "this token already has 2")
	start(context.Background(), b.reviewer)
	refused(b.agentB, "the server is serving 3")

	leave() // the first list's client goes away while it waits
	waitFor(t, "the abandoned list to give its slot back", func() bool { return b.svc.HeavyReads() == 2 })
	start(context.Background(), b.agentB)
	refused(b.admin, "the server is serving 3")

	releaseAll()
	wg.Wait()
	close(results)
	n := 0
	for r := range results {
		if r.status != http.StatusOK {
			t.Errorf("a held list answered %d, want 200", r.status)
		}
		n++
	}
	if n != 3 {
		t.Errorf("%d held lists answered, want 3 (the fourth was abandoned)", n)
	}
	if got := b.svc.HeavyReads(); got != 0 {
		t.Fatalf("%d slots still taken once every list was answered", got)
	}
	// Released, the slots serve again, without waiting in the store.
	for _, tok := range []string{b.agentA, b.agentA, b.reviewer} {
		want(t, b.do(t, list(tok)), http.StatusOK, "")
	}
}
