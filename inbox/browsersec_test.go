package inbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/provider"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// xssPayloads are T17's attacks: script and event-handler injections,
// attribute and context breakouts, mutation and parser-confusion tricks,
// URL schemes, CSS and resource loads aimed at the canary (CANARY is
// replaced by its URL). Each must show literally, run nothing and load
// nothing.
func xssPayloads(canary string) []string {
	ps := []string{
		`<script>alert(1)</script>`,
		`<script>window.__pwned=1</script>`,
		`"><script>alert(2)</script>`,
		`'><script>alert(3)</script>`,
		`</textarea><script>alert(4)</script>`,
		`</title><script>alert(5)</script>`,
		`</pre><script>alert(6)</script>`,
		`</blockquote><img src=x onerror=alert(7)>`,
		`<img src=x onerror=alert(8)>`,
		`<img src=x onerror="window.__pwned=9">`,
		`<svg onload=alert(10)>`,
		`<svg><script>alert(11)</script></svg>`,
		`<body onload=alert(12)>`,
		`<details open ontoggle=alert(13)>`,
		`<input autofocus onfocus=alert(14)>`,
		`<select autofocus onfocus=alert(15)>`,
		`<video><source onerror=alert(16)></video>`,
		`<audio src=x onerror=alert(17)>`,
		`<iframe srcdoc="<script>parent.alert(18)</script>">`,
		`<object data="javascript:alert(19)">`,
		`<a href="javascript:alert(20)">click</a>`,
		`javascript:alert(21)`,
		`<math><mtext><table><mglyph><style><img src=x onerror=alert(22)>`,
		`<noscript><p title="</noscript><img src=x onerror=alert(23)>">`,
		`<!--<img src="--><img src=x onerror=alert(24)//">`,
		`<scr<script>ipt>alert(25)</script>`,
		`<ScRiPt>alert(26)</sCrIpT>`,
		"<img src=\"x` `<script>alert(27)</script>\"` `>",
		`<template><script>alert(28)</script></template>`,
		`<svg><animate onbegin=alert(29) attributeName=x dur=1s>`,
		`<xmp><script>alert(30)</script></xmp>`,
		`" onmouseover="alert(31)`,
		`' onfocus='alert(32)' autofocus='`,
		`{{.}}{{template "layout" .}}`,
		`${alert(34)}`,
		`\u003cscript\u003ealert(35)\u003c/script\u003e`,
		`&lt;script&gt;alert(36)&lt;/script&gt;`,
		`<a href="data:text/html,<script>alert(37)</script>">x</a>`,
		`<form><button formaction=javascript:alert(38)>x</button></form>`,
		`<marquee onstart=alert(39)>x</marquee>`,
		`javascript:/*--></title></style></textarea></script></xmp><svg/onload='+/"/+/onmouseover=1/+/[*/[]/+alert(40)//'>`,
		`<img src=CANARY/img>`,
		`<script src=CANARY/script.js></script>`,
		`<script type=module src=CANARY/module.js></script>`,
		`<link rel=stylesheet href=CANARY/style.css>`,
		`<link rel=prefetch href=CANARY/prefetch>`,
		`<link rel=preload as=image href=CANARY/preload>`,
		`<iframe src=CANARY/frame></iframe>`,
		`<embed src=CANARY/embed>`,
		`<object data=CANARY/object></object>`,
		`<img srcset="CANARY/srcset 1x">`,
		`<video poster=CANARY/poster></video>`,
		`<input type=image src=CANARY/input>`,
		`<table background=CANARY/table>`,
		`<div style="background:url(CANARY/inline-style)">x</div>`,
		`<style>@import 'CANARY/import.css';</style>`,
		`<meta http-equiv=refresh content="0;url=CANARY/refresh">`,
		`<base href="CANARY/"><script src="base.js"></script>`,
		`<svg><image href=CANARY/svg-image /></svg>`,
		`<meta http-equiv="Content-Security-Policy" content="script-src * 'unsafe-inline'"><script>alert(60)</script>`,
		`<form action=CANARY/form><input name=x value=1></form><script>document.forms[0].submit()</script>`,
		`<img src=x:x onerror=fetch('CANARY/fetch')>`,
	}
	for i, p := range ps {
		ps[i] = strings.ReplaceAll(p, "CANARY", canary)
	}
	return ps
}

// canary counts requests that reach it: none may.
func canary(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		t.Logf("canary hit: %s %s", r.Method, r.URL)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// jsonText is how a string appears inside the formatted arguments: JSON
// with no HTML escaping, as it was sent.
func jsonText(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

// TestBrowserXSS is T17: 60+ payloads in a tool call's reasoning,
// arguments and context, in MCP titles, descriptions, targets and choices,
// in decision notes, instance, session, column and item names, rendered in
// headless Chromium: no script runs, nothing reaches the canary, every
// payload shows as text, every page carries the CSP. Payloads as tool
// names are refused at creation.
func TestBrowserXSS(t *testing.T) {
	t.Parallel()
	b := setup(t)
	can, hits := canary(t)
	payloads := xssPayloads(can.URL)
	if len(payloads) < 60 {
		t.Fatalf("only %d payloads", len(payloads))
	}
	ctx := context.Background()
	reviewer := b.callers["Carol (reviewer)"]
	agent := b.callers["release bot"]

	// Tool names: only ^[A-Za-z0-9_.-]{1,128}$ gets in.
	inst := b.instance(t, payloads[0])
	for _, p := range payloads {
		if status, _ := b.createREST(t, inst, map[string]any{"tool": p, "arguments": map[string]any{}}); status != http.StatusBadRequest {
			t.Errorf("tool %q: status %d, want 400", p, status)
		}
	}

	args := map[string]any{}
	for i, p := range payloads {
		args[fmt.Sprintf("p%02d", i)] = p
	}
	toolCall := b.toolCall(t, inst, "xss.probe_tool-1", args, strings.Join(payloads, "\n"))
	if status, out := b.createREST(t, inst, map[string]any{"tool": "xss_context", "arguments": map[string]any{"p": payloads[1]},
		"context": map[string]any{"observed": payloads}}); status != http.StatusCreated {
		t.Fatalf("create with context: %d %v", status, out)
	}

	sess, err := b.svc.OpenSession(ctx, agent, payloads[2], nil)
	if err != nil {
		t.Fatal(err)
	}
	var mcp []airlock.Request
	for _, p := range payloads {
		mcp = append(mcp, b.mcp(t, provider.MCPRequestInput{Title: p, Description: p, TargetType: "doc", TargetID: p, SessionID: sess.ID}))
	}
	question := b.mcp(t, provider.MCPRequestInput{Kind: airlock.KindAgentRequest, Title: payloads[3], Question: &airlock.Question{Choices: []string{payloads[4], payloads[5], payloads[8]}}})
	// Half the MCP requests are denied with a payload as the note.
	for i, r := range mcp[:len(mcp)/2] {
		if _, err := b.svc.Decide(ctx, reviewer, r.ID, airlock.DecisionInput{Status: airlock.StateDenied, Note: payloads[i]}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.svc.CreateColumn(ctx, reviewer, "todo", payloads[6]); err != nil {
		t.Fatal(err)
	}
	for _, p := range payloads[:10] {
		if _, err := b.svc.CreateWorkItem(ctx, reviewer, p, "todo"); err != nil {
			t.Fatal(err)
		}
	}

	tb := b.signedInTab(t, b.reviewer)
	shown := func(where string, want ...string) {
		t.Helper()
		text := tb.bodyText()
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: %q is not shown literally", where, w)
			}
		}
	}

	tb.open("/")
	tb.waitLive()
	shown("pending list", payloads[len(payloads)/2:]...)

	tb.open("/requests/" + toolCall)
	reasoning := tb.text("#reasoning")
	for _, p := range payloads {
		if !strings.Contains(reasoning, p) {
			t.Errorf("reasoning: %q is not shown literally", p)
		}
	}
	argText := tb.text("#arguments")
	for _, p := range payloads {
		if !strings.Contains(argText, jsonText(p)) {
			t.Errorf("arguments: %s is not shown literally", jsonText(p))
		}
	}
	for _, r := range mcp[len(mcp)-3:] {
		tb.open("/requests/" + r.ID)
		shown("MCP request page", r.Title)
		if got := tb.text("#description"); got != r.Description {
			t.Errorf("description shown as %q, want %q", got, r.Description)
		}
	}
	tb.open("/requests/" + question.ID)
	shown("question", payloads[3], payloads[4], payloads[5], payloads[8])
	if n := eval[int](tb, `document.querySelectorAll("button.choice").length`); n != 3 {
		t.Errorf("%d choice buttons, want 3", n)
	}
	tb.open("/history")
	shown("history", payloads[:len(payloads)/2]...)
	tb.open("/history?q=" + strings.ReplaceAll(payloads[0], " ", "+"))
	tb.open("/sessions")
	shown("sessions", payloads[2])
	tb.open("/board")
	shown("board", payloads[:10]...)
	shown("board column", payloads[6])
	tb.open("/?tool=" + payloads[0])
	tb.open("/signin?next=" + payloads[0])

	// A denial through the page itself, with a payload as the note.
	tb.open("/requests/" + mcp[len(mcp)-1].ID)
	tb.do(chromedp.SetValue(chromedp.ID("deny-note"), payloads[40]))
	tb.do(chromedp.Click(chromedp.CSS("#deny-form button")))
	tb.waitFor(`document.getElementById("confirm").open`)
	if got := tb.text("#confirm-note"); got != payloads[40] {
		t.Errorf("the confirmation shows the note as %q", got)
	}
	tb.noScriptRan()
	tb.do(chromedp.Click(chromedp.ID("confirm-ok")))
	tb.waitFor(`document.getElementById("flash") !== null`)
	tb.noScriptRan()
	if got := tb.text("#decision-note"); got != payloads[40] {
		t.Errorf("note shown as %q", got)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the canary was reached %d times", n)
	}
}

// TestBrowserUnicode is T18: bidirectional controls, zero-width and tag
// characters, homoglyphs and newlines show as visible markers (and never
// raw); tool names outside the pattern are refused at creation.
func TestBrowserUnicode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, "adapter\u200B")
	for _, tool := range []string{"rm\u202Etxt.exe", "ls\u200B", "lѕ", "ls\nrm", "deploy\U000E0041", "dеploy", "a b", ""} {
		if status, _ := b.createREST(t, inst, map[string]any{"tool": tool, "arguments": map[string]any{}}); status != http.StatusBadRequest {
			t.Errorf("tool %q: status %d, want 400", tool, status)
		}
	}
	id := b.toolCall(t, inst, "send_file", map[string]any{
		"file": "invoice\u202Efdp.exe", "to": "admin\u200B@example.com", "tag": "ok\U000E0041\U000E0042", "host": "pаypal.com",
	}, "Routine\u2066 transfer\u2069.\nSecond line\u2028third.")
	mcp := b.mcp(t, provider.MCPRequestInput{Title: "Approve\u202E the\nnew plan\uFEFF", TargetID: "doc\u00A0id"})

	tb := b.signedInTab(t, b.reviewer)
	tb.open("/requests/" + id)
	text := tb.bodyText()
	for _, want := range []string{"invoice⟨U+202E⟩fdp.exe", "admin⟨U+200B⟩@example.com", "ok⟨U+E0041⟩⟨U+E0042⟩", "Routine⟨U+2066⟩ transfer⟨U+2069⟩.", "Second line⟨U+2028⟩third.", "adapter⟨U+200B⟩", "mixes Latin and Cyrillic letters"} {
		if !strings.Contains(text, want) {
			t.Errorf("request page lacks %q", want)
		}
	}
	for _, raw := range []string{"\u202E", "\u200B", "\U000E0041", "\u2066", "\u2028"} {
		if strings.Contains(text, raw) {
			t.Errorf("request page shows %U raw", []rune(raw)[0])
		}
	}
	if n := eval[int](tb, `document.querySelectorAll("#arguments .mark").length`); n < 4 {
		t.Errorf("%d markers in the arguments, want at least 4", n)
	}
	tb.screenshot("unicode")
	tb.open("/requests/" + mcp.ID)
	text = tb.bodyText()
	for _, want := range []string{"Approve⟨U+202E⟩ the⟨U+000A⟩new plan⟨U+FEFF⟩", "doc⟨U+00A0⟩id"} {
		if !strings.Contains(text, want) {
			t.Errorf("MCP page lacks %q", want)
		}
	}
	tb.open("/")
	if text := tb.bodyText(); !strings.Contains(text, "Approve⟨U+202E⟩ the⟨U+000A⟩new plan⟨U+FEFF⟩") {
		t.Errorf("the list does not mark the title's characters")
	}
	if got := eval[string](tb, "document.title"); strings.ContainsAny(got, "\u202E\u200B") {
		t.Errorf("title %q", got)
	}
}

// TestBrowserCSRFAndFraming is T19: a page on another origin auto-posts a
// decision with the reviewer's cookie — without and even with the right
// CSRF token — and gets 403, with no state change; a page framing the
// inbox gets nothing: CSP frame-ancestors 'none' and X-Frame-Options DENY.
func TestBrowserCSRFAndFraming(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, "adapter")
	id := b.toolCall(t, inst, "wire_money", map[string]any{"to": "attacker", "amount": 1e6}, "")
	var evilHits atomic.Int64
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		evilHits.Add(1)
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/post":
			fmt.Fprintf(w, `<!doctype html><form id=f method=post action="%s/requests/%s/decide">
<input name=action value=approve><input name=csrf value="%s"></form>
<script>document.getElementById('f').submit()</script>`, b.srv.URL, id, r.URL.Query().Get("csrf"))
		case "/frame":
			fmt.Fprintf(w, `<!doctype html><h1>cute cats</h1><iframe id=fr src="%s/requests/%s" width=800 height=600></iframe>`, b.srv.URL, id)
		}
	}))
	t.Cleanup(evil.Close)

	tb := b.signedInTab(t, b.reviewer)
	tb.open("/requests/" + id)
	token := eval[string](tb, `document.querySelector('#approve-form input[name="csrf"]').value`)

	for _, csrf := range []string{"", "guess", token} {
		ctx, cancel := context.WithTimeout(tb.ctx, stepTimeout)
		if err := chromedp.Do(ctx, chromedp.Navigate(evil.URL+"/post?csrf="+csrf)); err != nil {
			cancel()
			t.Fatal(err)
		}
		cancel()
		tb.waitFor(`location.href.indexOf("/decide") > 0 && document.readyState === "complete" && document.querySelector("h1") !== null`)
		status := eval[int](tb, `performance.getEntriesByType("navigation")[0].responseStatus`)
		if status != http.StatusForbidden {
			t.Errorf("csrf %q: the forged decision answered %d, want 403", csrf, status)
		}
		if got := tb.text("h1"); got != "Refused" {
			t.Errorf("csrf %q: page says %q", csrf, got)
		}
		if s := b.get(t, id).State; s != airlock.StatePending {
			t.Fatalf("csrf %q: the forged decision changed the state to %s", csrf, s)
		}
	}

	// Framing: the inbox's frame stays empty.
	ctx, cancel := context.WithTimeout(tb.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(evil.URL+"/frame")); err != nil {
		t.Fatal(err)
	}
	tree, err := chromedp.Call(ctx, page.GetFrameTree, struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tree.FrameTree.ChildFrames) != 1 {
		t.Fatalf("%d child frames", len(tree.FrameTree.ChildFrames))
	}
	child := tree.FrameTree.ChildFrames[0].Frame
	if strings.HasPrefix(child.URL, b.srv.URL) && child.UnreachableURL == "" {
		t.Errorf("the inbox rendered inside another site's frame: %+v", child)
	}
	if s := b.get(t, id).State; s != airlock.StatePending {
		t.Fatalf("state %s", s)
	}
	if evilHits.Load() < 4 {
		t.Fatalf("the attacker's pages were not loaded (%d)", evilHits.Load())
	}
}
