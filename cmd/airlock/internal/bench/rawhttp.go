package bench

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/airlockhq/airlock/approvaltoken"
)

// The raw baseline over HTTP is the raw baseline's three statements
// behind the least an HTTP service can be: a handler that reads a JSON
// body, checks a bearer token against one constant, runs one statement
// and answers JSON, on a loopback listener in this process, driven by the
// same HTTP client as Airlock's lifecycle. Its ops/s is the ceiling of any
// HTTP service doing the same durable work on this machine, so it splits
// ratio_to_raw in two: what HTTP itself costs (raw_http_to_raw) and what
// Airlock adds on top of it (ratio_to_raw_http).

// rawHTTPToken is the one bearer token the raw handler accepts.
const rawHTTPToken = "raw-http-bench"

// rawHTTPMaxBody bounds a request body the raw handler reads.
const rawHTTPMaxBody = 64 << 10

// rawHandler serves rs's statements:
//
//	POST /raw/{id}           insert (body: a create request; Idempotency-Key header), 201
//	POST /raw/{id}/decision  the conditional update (body: {"status":"approved"}), 200
//	GET  /raw/{id}           the row, 200
//	POST /raw/consume        with keys: a tool server's consume of an approval
//	                         token (body: {"token", "tool", "arguments"}), 200
//
// It answers {"id", "state"} to writes and the whole row to a read; a bad
// token is 401, a bad body 400, a failed statement 500. A consume answers
// {"request_id", "consumed_at"}, 401 for an approval token that does not
// verify and 409 for one used before.
func rawHandler(rs *rawStore, keys *approvaltoken.KeySet) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /raw/{id}", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Arguments json.RawMessage `json:"arguments"`
		}
		key := r.Header.Get("Idempotency-Key")
		if !readRawBody(w, r, &in) {
			return
		}
		if key == "" || len(in.Arguments) == 0 {
			http.Error(w, "send an Idempotency-Key header and a body with arguments", http.StatusBadRequest)
			return
		}
		id := r.PathValue("id")
		if err := rs.insert(r.Context(), id, key, string(in.Arguments)); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeRawJSON(w, http.StatusCreated, rawRow{ID: id, State: "pending"})
	})
	mux.HandleFunc("POST /raw/{id}/decision", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Status string `json:"status"`
		}
		if !readRawBody(w, r, &in) {
			return
		}
		if in.Status != "approved" {
			http.Error(w, `the raw baseline only approves: send {"status":"approved"}`, http.StatusBadRequest)
			return
		}
		id := r.PathValue("id")
		if err := rs.approve(r.Context(), id); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeRawJSON(w, http.StatusOK, rawRow{ID: id, State: "approved"})
	})
	mux.HandleFunc("GET /raw/{id}", func(w http.ResponseWriter, r *http.Request) {
		if !rawAuthorized(w, r) {
			return
		}
		row, err := rs.read(r.Context(), r.PathValue("id"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeRawJSON(w, http.StatusOK, row)
	})
	if keys != nil {
		mux.HandleFunc("POST /raw/consume", func(w http.ResponseWriter, r *http.Request) {
			var in consumeBody
			if !readRawBody(w, r, &in) {
				return
			}
			claims, err := keys.Verify(in.Token, approvaltoken.Expect{Tool: in.Tool, Args: in.Arguments})
			if err != nil {
				http.Error(w, "the approval token does not verify: "+err.Error(), http.StatusUnauthorized)
				return
			}
			err = rs.consume(r.Context(), claims.Subject, claims.ID)
			switch {
			case errors.Is(err, errRawUsed):
				http.Error(w, "the approval token of "+claims.Subject+" was used before", http.StatusConflict)
			case err != nil:
				http.Error(w, err.Error(), http.StatusInternalServerError)
			default:
				writeRawJSON(w, http.StatusOK, tokenUse{RequestID: claims.Subject, ConsumedAt: time.Now()})
			}
		})
	}
	return mux
}

// rawAuthorized checks the bearer token, and answers 401 when it is not
// rawHTTPToken.
func rawAuthorized(w http.ResponseWriter, r *http.Request) bool {
	if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+rawHTTPToken)) != 1 {
		http.Error(w, "send Authorization: Bearer "+rawHTTPToken, http.StatusUnauthorized)
		return false
	}
	return true
}

// readRawBody checks the token and decodes a JSON body of at most
// rawHTTPMaxBody bytes into v, answering 401 or 400 when it cannot.
func readRawBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if !rawAuthorized(w, r) {
		return false
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, rawHTTPMaxBody)).Decode(v); err != nil {
		http.Error(w, "read the JSON body: "+err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func writeRawJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// serveRaw serves rawHandler(rs, keys) on a loopback port; stop closes it.
func serveRaw(rs *rawStore, keys *approvaltoken.KeySet) (base string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: rawHandler(rs, keys), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln) // until stop; a listener that broke shows as the clients' errors
	}()
	return "http://" + ln.Addr().String(), func() { srv.Close(); <-done }, nil
}

// runRawHTTP runs the raw baseline over HTTP: each lifecycle is three
// HTTP calls, as Airlock's, each one statement of the raw baseline. Its
// server runs in a child process, as Airlock's does, so that the two
// servers' CPU per lifecycle can be compared apart from their clients'.
func runRawHTTP(ctx context.Context, cfg Config) (*RawReport, error) {
	rh, err := startRawHTTP(ctx, cfg, nil)
	if err != nil {
		return nil, err
	}
	defer rh.close()
	base, api, run := rh.base, rh.api, randomHex(4)
	fmt.Fprintf(cfg.Progress, "raw over HTTP: %s behind a minimal handler at %s (process %d), %d clients, up to %s or %d lifecycles\n", rh.srv.hello.Describe, base, rh.srv.pid, cfg.Clients, cfg.Duration, cfg.Count)
	res, err := runLoad(ctx, cfg.Clients, cfg.Duration, cfg.Count, 0, rh.cpu, func(context.Context, int) (clientOp, func(), error) {
		return func(ctx context.Context, n int64) error {
			id := fmt.Sprintf("rawhttp_%s_%d", run, n)
			var r rawRow
			if err := api.call(ctx, "POST", base, "/raw/"+id, rawHTTPToken, requestBody(n, "1h"), &r, "Idempotency-Key", "key-"+id); err != nil {
				return err
			}
			if err := api.call(ctx, "POST", base, "/raw/"+id+"/decision", rawHTTPToken, `{"status":"approved"}`, &r); err != nil {
				return err
			}
			if err := api.call(ctx, "GET", base, "/raw/"+id, rawHTTPToken, "", &r); err != nil {
				return err
			}
			if r.State != "approved" {
				return fmt.Errorf("read %s as %s, want approved", id, r.State)
			}
			return nil
		}, nil, nil
	})
	return rh.report(res, err)
}

// rawHTTP is a raw baseline's server over HTTP, in a child process, and
// the HTTP client that drives it.
type rawHTTP struct {
	srv   *child
	base  string
	store string // sqlite or postgres
	cpu   cpuReader
	api   *target // only its HTTP client, for target.call
	// clients is how many clients drive it: as many as Airlock's run had.
	clients int
	clean   []func()
}

// startRawHTTP starts the raw baseline's server over HTTP on a fresh store
// of the kind cfg.DB names, with a consume that verifies approval tokens
// with keys (a JWKS document) when keys is set.
func startRawHTTP(ctx context.Context, cfg Config, keys json.RawMessage) (_ *rawHTTP, err error) {
	rh := &rawHTTP{store: "sqlite", clients: cfg.Clients}
	defer func() {
		if err != nil {
			rh.close()
		}
	}()
	spec := childSpec{Kind: childRawHTTP, Connections: cfg.Clients, TokenKeys: keys}
	if isPostgres(cfg.DB) {
		schema, drop, err := createRawSchema(ctx, cfg)
		if err != nil {
			return nil, err
		}
		rh.clean = append(rh.clean, drop)
		spec.Store, rh.store = storeSpec{Postgres: cfg.DB, Schema: schema}, "postgres"
	} else {
		path, remove, err := rawSQLitePath(cfg, "rawhttp")
		if err != nil {
			return nil, err
		}
		rh.clean = append(rh.clean, remove)
		spec.Store = storeSpec{SQLite: path}
	}
	rh.srv, err = startChild(ctx, spec, cfg.Progress)
	if err != nil {
		return nil, fmt.Errorf("raw over HTTP: %w", err)
	}
	rh.clean = append(rh.clean, func() { rh.srv.stop(context.WithoutCancel(ctx)) })
	if cfg.onChild != nil {
		cfg.onChild(rh.srv.pid)
	}
	rh.base = rh.srv.hello.URL
	if procCPUAvailable() {
		rh.cpu = childrenCPU(rh.srv)
	}
	// As many clients as Airlock's run had: over HTTP they overlap their
	// calls' HTTP work even where the store has one connection.
	rh.api = &target{hc: newHTTPClient(cfg.Clients)}
	rh.clean = append(rh.clean, rh.api.hc.CloseIdleConnections)
	return rh, nil
}

// close stops the server and removes its store, in the reverse order of
// their making.
func (rh *rawHTTP) close() {
	for i := len(rh.clean) - 1; i >= 0; i-- {
		rh.clean[i]()
	}
	rh.clean = nil
}

// report is the RawReport of a load run against rh, or the run's error.
func (rh *rawHTTP) report(res Result, err error) (*RawReport, error) {
	if err != nil {
		return nil, fmt.Errorf("raw over HTTP, %s: %w", rh.store, err)
	}
	return &RawReport{Store: rh.store, Transport: "http", Connections: rh.srv.hello.Connections, Clients: rh.clients, Result: res}, nil
}
