// Package slacktest is a fake of Slack's Web API for the tests of the
// Slack adapter (slackapp) and of the server that runs it: a real HTTP
// server speaking the two methods Airlock calls as Slack documents them,
// keeping the messages it was sent, and taking response_url posts.
package slacktest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	// BotToken is the bot token the fake accepts; any other is refused
	// with invalid_auth.
	BotToken = "xoxb-1111-2222-secretbottoken"
	// Channel is the channel the fake posts to; any other is refused with
	// channel_not_found.
	Channel = "C0AIRLOCK"
)

// Message is one Slack message as the fake keeps it.
type Message struct {
	Channel, TS, Text string
	Blocks            []map[string]any
	// Updates counts the chat.update calls that changed it.
	Updates int
	// Replies are the thread's replies (thread_ts = TS), and Broadcast
	// whether each was also sent to the channel (reply_broadcast).
	Replies   []*Message
	Broadcast []bool
}

// HasButtons reports whether the message still offers buttons (an
// actions block).
func (m *Message) HasButtons() bool {
	for _, b := range m.Blocks {
		if b["type"] == "actions" {
			return true
		}
	}
	return false
}

// BlocksJSON is the message's blocks as JSON, for looking for text in
// them.
func (m *Message) BlocksJSON() string { b, _ := json.Marshal(m.Blocks); return string(b) }

// clone copies m and its replies, so that a test reads it without the
// fake's lock.
func (m *Message) clone() *Message {
	c := *m
	c.Blocks = slices.Clone(m.Blocks)
	c.Broadcast = slices.Clone(m.Broadcast)
	c.Replies = make([]*Message, len(m.Replies))
	for i, r := range m.Replies {
		c.Replies[i] = r.clone()
	}
	return &c
}

// Slack speaks the two Web API methods Airlock calls, as Slack documents
// them (chat.postMessage, with thread_ts and reply_broadcast for a reply,
// and chat.update): form-encoded POSTs authenticated by the bot token,
// answering {"ok": true, "channel", "ts", "message"} or {"ok": false,
// "error"}. It also takes response_url posts. A request posted twice
// fails the test that made the fake.
type Slack struct {
	// Fail, when set before the first call, may answer the n-th call
	// (from 1) of a method itself, returning true.
	Fail func(method string, n int, w http.ResponseWriter) bool

	srv     *httptest.Server
	t       *testing.T
	changed chan struct{}

	mu  sync.Mutex
	msg map[string]*Message // by ts
	// byRequest maps a request ID (the buttons' value, or found in the
	// link) to its message's ts.
	byRequest map[string]string
	posts     int
	responses []string // texts posted to the response_url
	calls     map[string]int
}

// New starts a fake Slack that stops when t ends.
func New(t *testing.T) *Slack {
	f := &Slack{msg: map[string]*Message{}, byRequest: map[string]string{}, changed: make(chan struct{}, 1000), t: t,
		calls: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// APIURL is the base URL of the fake's Web API, for slackapp.Config's
// APIURL.
func (f *Slack) APIURL() string { return f.srv.URL + "/api/" }

// ResponseURL is a response_url the fake takes posts at.
func (f *Slack) ResponseURL() string { return f.srv.URL + "/hooks/response" }

// Changed receives after each call to the Web API the fake answered.
func (f *Slack) Changed() <-chan struct{} { return f.changed }

// Message is a copy of the message that shows request id, or nil if none
// was posted.
func (f *Slack) Message(id string) *Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.msg[f.byRequest[id]]
	if m == nil {
		return nil
	}
	return m.clone()
}

// Requests is how many requests have a message.
func (f *Slack) Requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.byRequest)
}

// Posts is how many chat.postMessage calls posted, messages and replies.
func (f *Slack) Posts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.posts
}

// Await waits until cond holds, looking again after each call the fake
// answers, and fails t after 30 s.
func (f *Slack) Await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !cond() {
		select {
		case <-f.changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (f *Slack) answer(w http.ResponseWriter, v map[string]any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	json.NewEncoder(w).Encode(v)
}

func (f *Slack) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/hooks/response" {
		var v map[string]any
		json.NewDecoder(r.Body).Decode(&v)
		f.mu.Lock()
		f.responses = append(f.responses, fmt.Sprint(v["text"]))
		f.mu.Unlock()
		return
	}
	if r.Method != http.MethodPost || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		http.Error(w, "want a form POST", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.calls[r.URL.Path]++
	n, fail := f.calls[r.URL.Path], f.Fail
	f.mu.Unlock()
	if fail != nil && fail(strings.TrimPrefix(r.URL.Path, "/api/"), n, w) {
		f.changed <- struct{}{}
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if tok == "" {
		tok = r.PostForm.Get("token")
	}
	if tok != BotToken {
		f.answer(w, map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	var blocks []map[string]any
	if err := json.Unmarshal([]byte(r.PostForm.Get("blocks")), &blocks); err != nil || len(blocks) == 0 || len(blocks) > 50 {
		f.answer(w, map[string]any{"ok": false, "error": "invalid_blocks"})
		return
	}
	text := r.PostForm.Get("text")
	f.mu.Lock()
	defer func() {
		f.mu.Unlock()
		f.changed <- struct{}{}
	}()
	switch r.URL.Path {
	case "/api/chat.postMessage":
		if r.PostForm.Get("channel") != Channel {
			f.answer(w, map[string]any{"ok": false, "error": "channel_not_found"})
			return
		}
		f.posts++
		ts := fmt.Sprintf("1700000000.%06d", f.posts)
		m := &Message{Channel: Channel, TS: ts, Text: text, Blocks: blocks}
		if parent := r.PostForm.Get("thread_ts"); parent != "" {
			// A reply in the thread of parent, which must exist.
			p := f.msg[parent]
			if p == nil {
				f.answer(w, map[string]any{"ok": false, "error": "thread_not_found"})
				return
			}
			p.Replies = append(p.Replies, m)
			p.Broadcast = append(p.Broadcast, r.PostForm.Get("reply_broadcast") == "true")
			f.answer(w, map[string]any{"ok": true, "channel": Channel, "ts": ts,
				"message": map[string]any{"type": "message", "text": text, "bot_id": "B0AIRLOCK", "ts": ts, "thread_ts": parent}})
			return
		}
		f.msg[ts] = m
		if id := requestOf(blocks); id != "" {
			if prev, ok := f.byRequest[id]; ok {
				f.t.Errorf("request %s posted twice: %s and %s", id, prev, ts)
			}
			f.byRequest[id] = ts
		}
		f.answer(w, map[string]any{"ok": true, "channel": Channel, "ts": ts,
			"message": map[string]any{"type": "message", "subtype": "bot_message", "text": text, "bot_id": "B0AIRLOCK", "ts": ts}})
	case "/api/chat.update":
		m := f.msg[r.PostForm.Get("ts")]
		if m == nil || r.PostForm.Get("channel") != m.Channel {
			f.answer(w, map[string]any{"ok": false, "error": "message_not_found"})
			return
		}
		m.Text, m.Blocks = text, blocks
		m.Updates++
		f.answer(w, map[string]any{"ok": true, "channel": m.Channel, "ts": m.TS, "text": text,
			"message": map[string]any{"type": "message", "text": text, "bot_id": "B0AIRLOCK"}})
	default:
		f.answer(w, map[string]any{"ok": false, "error": "unknown_method"})
	}
}

// requestOf finds the request a message shows, by the link to its page.
func requestOf(blocks []map[string]any) string {
	b, _ := json.Marshal(blocks)
	s := string(b)
	i := strings.Index(s, "/requests/apr_")
	if i < 0 {
		return ""
	}
	s = s[i+len("/requests/"):]
	if j := strings.IndexAny(s, `|">\`); j > 0 {
		s = s[:j]
	}
	return s
}
