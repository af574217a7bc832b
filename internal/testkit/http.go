package testkit

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Reply is one decoded answer of Airlock's REST API.
type Reply struct {
	Status int
	Header http.Header
	Body   map[string]any // the JSON body, nil when the answer is not JSON
	Raw    string
}

// Str returns the string at a dotted path of the body such as
// "decision.status", "" when there is none.
func (r Reply) Str(path string) string {
	var v any = r.Body
	for key := range strings.SplitSeq(path, ".") {
		m, _ := v.(map[string]any)
		v = m[key]
	}
	s, _ := v.(string)
	return s
}

// Call makes one request of the REST API with hc and decodes the answer.
// body, when not empty, is sent as JSON; token, when not empty, as the
// bearer token; extra headers come as name, value pairs. It returns
// transport errors, for the caller to judge (a killed server's are
// expected).
func Call(ctx context.Context, hc *http.Client, method, url, token, body string, header ...string) (Reply, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return Reply{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := hc.Do(req)
	if err != nil {
		return Reply{}, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return Reply{}, err
	}
	out := Reply{Status: res.StatusCode, Header: res.Header, Raw: string(raw)}
	if strings.Contains(res.Header.Get("Content-Type"), "json") {
		if err := json.Unmarshal(raw, &out.Body); err != nil {
			return Reply{}, fmt.Errorf("decode %s: %v", raw, err)
		}
	}
	return out, nil
}

// Events reads the event stream (GET /v1/events) of the server at base
// with token on a connection of its own, and calls fn with each event's
// type and data until fn returns false, the stream ends or ctx is done.
func Events(ctx context.Context, base, token string, fn func(typ, data string) bool) {
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	res, err := hc.Do(req)
	if err != nil {
		return
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	typ := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			typ = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if !fn(typ, strings.TrimPrefix(line, "data: ")) {
				return
			}
		}
	}
}
