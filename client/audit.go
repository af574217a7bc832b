package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/airlockhq/airlock/auditlog"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// The verifiable audit log (docs/audit.md), for admins and auditors. These
// return what the server says; auditlog checks it against the log's key,
// so a server that lies is caught there, not trusted here.

// AuditKey returns the log's note verifier key (GET /v1/audit/key), such as
// "airlock.example.com/audit+1a2b3c4d+AbC…". An auditor pins it: a key
// fetched from the server proves only that the server signed.
func (c *Client) AuditKey(ctx context.Context) (string, error) {
	cl := call{method: http.MethodGet, path: "/v1/audit/key", retry: true}
	var body []byte
	if _, err := c.do(ctx, cl, &body); err != nil {
		return "", err
	}
	key := strings.TrimSpace(string(body))
	if _, err := note.NewVerifier(key); err != nil {
		return "", &AnswerError{Method: cl.method, Path: cl.path, Status: http.StatusOK, Reason: fmt.Sprintf("the body is not a note verifier key (it starts %q): %v", snippet(body), err)}
	}
	return key, nil
}

// AuditCheckpoint returns the latest signed checkpoint (GET
// /v1/audit/checkpoint), the note's bytes as signed: auditlog.OpenCheckpoint
// reads and checks it.
func (c *Client) AuditCheckpoint(ctx context.Context) ([]byte, error) {
	cl := call{method: http.MethodGet, path: "/v1/audit/checkpoint", retry: true}
	var body []byte
	if _, err := c.do(ctx, cl, &body); err != nil {
		return nil, err
	}
	if len(body) == 0 {
		return nil, &AnswerError{Method: cl.method, Path: cl.path, Status: http.StatusOK, Reason: "the body is empty"}
	}
	return body, nil
}

// AuditEntries returns up to limit entries of the tree from index start on
// (GET /v1/audit/entries), fewer at the tree's end or where the server
// caps a page. Each comes back as the server wrote it, index included:
// auditlog.VerifyEntries names an entry out of place, so a log with one
// deleted is reported there, at its index, rather than here.
func (c *Client) AuditEntries(ctx context.Context, start int64, limit int) ([]auditlog.Entry, error) {
	q := url.Values{"start": {strconv.FormatInt(start, 10)}, "limit": {strconv.Itoa(limit)}}
	cl := call{method: http.MethodGet, path: "/v1/audit/entries", query: q, retry: true}
	var body []byte
	if _, err := c.do(ctx, cl, &body); err != nil {
		return nil, err
	}
	bad := func(reason string) error {
		return &AnswerError{Method: cl.method, Path: cl.path, Status: http.StatusOK, Reason: reason}
	}
	var out []auditlog.Entry
	r := auditlog.NewEntryReader(bytes.NewReader(body))
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, bad(fmt.Sprintf("the body is not entries as JSON lines: %v", err))
		}
		if len(out) == limit {
			return nil, bad(fmt.Sprintf("more than the %d entries asked for", limit))
		}
		out = append(out, e)
	}
	return out, nil
}

// AuditConsistencyProof returns the proof that the tree of from leaves is a
// prefix of the tree of to leaves (GET /v1/audit/proofs/consistency).
// auditlog checks it against the signed checkpoints; here it is only held
// to being the proof asked for: the sizes echoed and every hash a hash.
func (c *Client) AuditConsistencyProof(ctx context.Context, from, to int64) (auditlog.ConsistencyProof, error) {
	q := url.Values{"from": {strconv.FormatInt(from, 10)}, "to": {strconv.FormatInt(to, 10)}}
	cl := call{method: http.MethodGet, path: "/v1/audit/proofs/consistency", query: q, retry: true}
	var answer struct {
		From     *int64   `json:"from"`
		TreeSize *int64   `json:"tree_size"`
		Hashes   []string `json:"hashes"`
	}
	if _, err := c.do(ctx, cl, &answer); err != nil {
		return nil, err
	}
	bad := func(reason string) error {
		return &AnswerError{Method: cl.method, Path: cl.path, Status: http.StatusOK, Reason: reason}
	}
	if answer.From == nil || answer.TreeSize == nil || *answer.From != from || *answer.TreeSize != to || answer.Hashes == nil {
		return nil, bad(fmt.Sprintf("the answer is not the proof from %d to %d", from, to))
	}
	proof := make(auditlog.ConsistencyProof, len(answer.Hashes))
	for i, h := range answer.Hashes {
		parsed, err := tlog.ParseHash(h)
		if err != nil {
			return nil, bad(fmt.Sprintf("hash %d: %v", i, err))
		}
		proof[i] = parsed
	}
	return proof, nil
}
