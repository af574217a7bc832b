// Command rawupstream is a scripted MCP server that writes its JSON-RPC by
// hand, for the tests of what `airlock gate` forwards: its lists, schemas
// and results (fixtures.json) are in no alphabetical order and carry fields
// the Go SDK does not know (a tool's execution.taskSupport, a tasks
// capability), so a test can compare bytes. It records the initialize
// params it got in the file UPSTREAM_INIT and each tool run and
// notification in UPSTREAM_LOG. Its tools ask_form, ask_url, sample and
// list_roots send the client an elicitation (form or URL mode), a
// sampling request or roots/list and return the answer as they got it,
// result or error. ask_url respects the client's capabilities as a server
// should; the others (and ask_url_anyway) do not, to see what the gate
// answers.
package main

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"strconv"
	"sync"
)

//go:embed fixtures.json
var fixturesJSON []byte

// message is any JSON-RPC message.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

type server struct {
	fixtures map[string]json.RawMessage

	writeMu sync.Mutex
	mu      sync.Mutex
	pending map[string]chan message // by the id of a request to the client
	nextID  int
	caps    struct {
		Elicitation *struct {
			URL *struct{} `json:"url"`
		} `json:"elicitation"`
	}
}

func main() {
	log.SetOutput(os.Stderr)
	s := &server{fixtures: map[string]json.RawMessage{}, pending: map[string]chan message{}}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(fixturesJSON, &raw); err != nil {
		log.Fatal(err)
	}
	for k, v := range raw {
		var b bytes.Buffer
		if err := json.Compact(&b, v); err != nil {
			log.Fatal(err)
		}
		s.fixtures[k] = b.Bytes()
	}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			log.Fatalf("rawupstream: bad message %q: %v", sc.Bytes(), err)
		}
		switch {
		case m.Method != "" && m.ID != nil:
			if m.Method == "initialize" {
				s.handle(m) // before anything else
				continue
			}
			go s.handle(m)
		case m.Method != "":
			record(os.Getenv("UPSTREAM_LOG"), "notification "+m.Method)
		default:
			s.mu.Lock()
			ch := s.pending[string(m.ID)]
			delete(s.pending, string(m.ID))
			s.mu.Unlock()
			if ch != nil {
				ch <- m
			}
		}
	}
	// Stdin ended: the client is gone, and so is this server (requests still
	// waiting for the client are abandoned).
}

func (s *server) write(m message) {
	m.JSONRPC = "2.0"
	data, err := json.Marshal(m)
	if err != nil {
		log.Fatal(err)
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	os.Stdout.Write(append(data, '\n'))
}

func (s *server) reply(id, result json.RawMessage) { s.write(message{ID: id, Result: result}) }

func (s *server) fail(id json.RawMessage, code int, msg string) {
	e, _ := json.Marshal(map[string]any{"code": code, "message": msg})
	s.write(message{ID: id, Error: e})
}

// ask sends the client a request and returns its answer as it came:
// {"result":…} or {"error":…}.
func (s *server) ask(method string) string {
	s.mu.Lock()
	s.nextID++
	id := json.RawMessage(strconv.Itoa(1000 + s.nextID))
	ch := make(chan message, 1)
	s.pending[string(id)] = ch
	s.mu.Unlock()
	params := s.fixtures[method]
	if method == "roots/list" {
		params = nil
	}
	if method == "elicitation/form" || method == "elicitation/url" {
		method = "elicitation/create"
	}
	s.write(message{ID: id, Method: method, Params: params})
	m := <-ch
	data, _ := json.Marshal(struct {
		Result json.RawMessage `json:"result,omitempty"`
		Error  json.RawMessage `json:"error,omitempty"`
	}{m.Result, m.Error})
	return string(data)
}

func text(s string, isError bool) json.RawMessage {
	data, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}, "isError": isError})
	return data
}

func (s *server) handle(m message) {
	switch m.Method {
	case "initialize":
		if err := os.WriteFile(os.Getenv("UPSTREAM_INIT"), m.Params, 0o600); err != nil {
			log.Fatal(err)
		}
		var p struct {
			ProtocolVersion string          `json:"protocolVersion"`
			Capabilities    json.RawMessage `json:"capabilities"`
		}
		json.Unmarshal(m.Params, &p)
		json.Unmarshal(p.Capabilities, &s.caps)
		var res map[string]any
		json.Unmarshal(s.fixtures["initialize"], &res)
		res["protocolVersion"] = p.ProtocolVersion
		data, _ := json.Marshal(res)
		s.reply(m.ID, data)
	case "ping":
		s.reply(m.ID, json.RawMessage(`{}`))
	case "tools/list":
		var p struct {
			Cursor string `json:"cursor"`
		}
		json.Unmarshal(m.Params, &p)
		switch p.Cursor {
		case "":
			s.reply(m.ID, s.fixtures["tools/list"])
		case "page-2":
			s.reply(m.ID, s.fixtures["tools/list page-2"])
		default:
			e, _ := json.Marshal(map[string]any{"code": -32602, "message": "unknown cursor", "data": map[string]any{"cursor": p.Cursor, "hint": "list from the start"}})
			s.write(message{ID: m.ID, Error: e})
		}
	case "prompts/list", "resources/list", "resources/templates/list":
		s.reply(m.ID, s.fixtures[m.Method])
	case "tools/call":
		var p struct {
			Name string          `json:"name"`
			Task json.RawMessage `json:"task"`
		}
		json.Unmarshal(m.Params, &p)
		switch p.Name {
		case "research", "zeta_write", "alpha_read", "summarize", "wipe":
			record(os.Getenv("UPSTREAM_LOG"), fmt.Sprintf("call %s task=%t", p.Name, p.Task != nil))
			if p.Name == "research" && p.Task == nil {
				s.fail(m.ID, -32601, "Tool research requires task augmentation")
				return
			}
			s.reply(m.ID, s.fixtures["result"])
		case "block": // answers nothing; the client's cancellation should come
			record(os.Getenv("UPSTREAM_LOG"), "call block")
		case "ask_form":
			s.reply(m.ID, text(s.ask("elicitation/form"), false))
		case "ask_url":
			if s.caps.Elicitation == nil || s.caps.Elicitation.URL == nil {
				s.reply(m.ID, text("the client declared no url-mode elicitation", true))
				return
			}
			s.reply(m.ID, text(s.ask("elicitation/url"), false))
		case "ask_url_anyway":
			s.reply(m.ID, text(s.ask("elicitation/url"), false))
		case "sample":
			s.reply(m.ID, text(s.ask("sampling/createMessage"), false))
		case "list_roots":
			s.reply(m.ID, text(s.ask("roots/list"), false))
		default:
			s.fail(m.ID, -32602, "unknown tool "+p.Name)
		}
	default:
		s.fail(m.ID, -32601, "method not found: "+m.Method)
	}
}

// record appends a line to the file named by path and syncs it.
func record(path, line string) {
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		log.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		log.Fatal(err)
	}
}
