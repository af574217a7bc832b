package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A run's webhook receivers live in a child process of their own (the
// same binary, re-executed, as a server is: child.go), so that what a
// delivery costs the sending process is measured apart from what
// receiving it costs. The run asks the child, over its stdin, for:
//
//	received        how many deliveries it has received
//	record <time>   to start timing each delivery of an event committed at
//	                or after <time> (RFC 3339) from its commit to its arrival
//	lags            the times recorded since, and to stop recording

// receiverAnswer is a receiver child's answer to each command.
type receiverAnswer struct {
	Received int64   `json:"received"`
	LagsNS   []int64 `json:"lags_ns,omitempty"`
	Error    string  `json:"error,omitempty"`
}

// receiverState is the receiver child's own state: every POST to any path
// is one delivery, answered 204.
type receiverState struct {
	got atomic.Int64

	mu     sync.Mutex
	record bool
	since  time.Time
	lags   []int64
}

// startReceiverChild serves receiverState on a loopback port.
func startReceiverChild() (*childServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rs := &receiverState{}
	srv := &http.Server{Handler: http.HandlerFunc(rs.serve), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return &childServer{
		hello:   childHello{URL: "http://" + ln.Addr().String()},
		stats:   func() childStats { return childStats{} },
		command: rs.command,
		stop: func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			srv.Shutdown(ctx)
		},
	}, nil
}

func (rs *receiverState) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	now := time.Now()
	rs.got.Add(1)
	w.WriteHeader(http.StatusNoContent)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if !rs.record {
		return
	}
	if at, ok := bodyTimestamp(body); ok && !at.Before(rs.since) {
		rs.lags = append(rs.lags, int64(now.Sub(at)))
	}
}

// command answers one of the run's commands; ok is false for a line it
// does not know.
func (rs *receiverState) command(line string) (answer any, ok bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	a := receiverAnswer{Received: rs.got.Load()}
	switch verb, arg, _ := strings.Cut(line, " "); verb {
	case "received":
	case "record":
		since, err := time.Parse(time.RFC3339Nano, arg)
		if err != nil {
			a.Error = fmt.Sprintf("record: %v", err)
			break
		}
		rs.record, rs.since, rs.lags = true, since, nil
	case "lags":
		a.LagsNS, rs.record, rs.lags = rs.lags, false, nil
	default:
		return nil, false
	}
	return a, true
}

// receivers are a run's receiver child, seen from the run. Each endpoint
// is a path of its URL.
type receivers struct {
	c   *child
	url string

	mu  sync.Mutex
	err error // the first failure to talk to the child
}

// startReceivers starts a receiver child.
func startReceivers(ctx context.Context, progress io.Writer) (*receivers, error) {
	c, err := startChild(ctx, childSpec{Kind: childReceiver}, progress)
	if err != nil {
		return nil, fmt.Errorf("start the webhook receivers' process: %w", err)
	}
	return &receivers{c: c, url: c.hello.URL}, nil
}

// ask sends the child a command and returns its answer.
func (rc *receivers) ask(command string) (receiverAnswer, error) {
	var a receiverAnswer
	err := rc.c.switchChild(command, &a)
	if err == nil && a.Error != "" {
		err = fmt.Errorf("the webhook receivers' process: %s", a.Error)
	}
	if err != nil {
		rc.mu.Lock()
		if rc.err == nil {
			rc.err = err
		}
		rc.mu.Unlock()
	}
	return a, err
}

// received is how many deliveries the child has received; 0 after a
// failure to ask, which failed reports.
func (rc *receivers) received() int64 {
	a, _ := rc.ask("received")
	return a.Received
}

// failed returns the first failure to talk to the child.
func (rc *receivers) failed() error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.err
}

func (rc *receivers) startRecording(since time.Time) error {
	_, err := rc.ask("record " + since.UTC().Format(time.RFC3339Nano))
	return err
}

func (rc *receivers) stopRecording() (samples, error) {
	a, err := rc.ask("lags")
	s := make(samples, len(a.LagsNS))
	for i, ns := range a.LagsNS {
		s[i] = time.Duration(ns)
	}
	return s, err
}

func (rc *receivers) close() { rc.c.stop(context.Background()) }

// bodyTimestamp reads a webhook body's "timestamp": its event's commit.
func bodyTimestamp(body []byte) (time.Time, bool) {
	const key = `"timestamp":"`
	i := bytes.Index(body, []byte(key))
	if i < 0 {
		return time.Time{}, false
	}
	rest := body[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, string(rest[:j]))
	return at, err == nil
}
