package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strconv"
	"strings"

	"github.com/airlockhq/airlock/internal/ctxwait"
)

// Events streams the audit events after the event with ID after (0: from
// the first), as the server sends them (reviewers, admins). When the
// connection drops or the server restarts, it reconnects with backoff and
// resumes with Last-Event-ID, so no event is missed or repeated. It ends
// when ctx ends (without yielding an error) or after yielding an error that
// reconnecting cannot fix (a refused token, a malformed event).
//
//	for ev, err := range c.Events(ctx, 0) {
//		if err != nil { return err }
//		fmt.Println(ev.Event.Type, ev.Event.RequestID)
//	}
func (c *Client) Events(ctx context.Context, after int64) iter.Seq2[EventData, error] {
	return func(yield func(EventData, error) bool) {
		failures := 0
		for ctx.Err() == nil {
			got, err := c.stream(ctx, &after, yield)
			if got {
				failures = 0
			}
			switch {
			case err == errStop || ctx.Err() != nil:
				return
			case !transient(err) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF):
				yield(EventData{}, err)
				return
			}
			if ctxwait.Sleep(ctx, c.retry.backoff(failures)) != nil {
				return
			}
			failures++
		}
	}
}

// errStop says the consumer stopped the iteration.
var errStop = errors.New("stop")

// stream reads one connection's events, advancing *after with each. It
// reports whether any event arrived and why the connection ended.
func (c *Client) stream(ctx context.Context, after *int64, yield func(EventData, error) bool) (got bool, err error) {
	u := *c.base
	u.Path += "/v1/events"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("User-Agent", c.agent)
	req.Header.Set("Authorization", "Bearer "+c.token)
	if *after > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(*after, 10))
	}
	res, err := c.http.Do(req)
	if err != nil {
		return false, &NetworkError{Method: "GET", Path: "/v1/events", Err: err}
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		return false, decodeError("GET", "/v1/events", res, data)
	}
	r := bufio.NewReaderSize(res.Body, 64<<10)
	var id, typ string
	var data strings.Builder
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if ctx.Err() != nil {
				return got, ctx.Err()
			}
			return got, &NetworkError{Method: "GET", Path: "/v1/events", Err: fmt.Errorf("stream ended: %w", err)}
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line != "" {
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "id":
				id = value
			case "event":
				typ = value
			case "data":
				if data.Len() > 0 {
					data.WriteByte('\n')
				}
				data.WriteString(value)
			}
			continue // "" field: a comment (heartbeat)
		}
		if data.Len() == 0 {
			id, typ = "", ""
			continue
		}
		var ev EventData
		if err := json.Unmarshal([]byte(data.String()), &ev); err != nil {
			return got, fmt.Errorf("event stream: event %s (%s) is not valid JSON: %w", id, typ, err)
		}
		data.Reset()
		id, typ = "", ""
		got = true
		*after = ev.Event.ID
		if !yield(ev, nil) {
			return got, errStop
		}
	}
}
