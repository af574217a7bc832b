package bench

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"time"
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
//
// It answers {"id", "state"} to writes and the whole row to a read; a bad
// token is 401, a bad body 400, a failed statement 500.
func rawHandler(rs *rawStore) http.Handler {
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

// serveRaw serves rawHandler(rs) on a loopback port; stop closes it.
func serveRaw(rs *rawStore) (base string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: rawHandler(rs), ReadHeaderTimeout: 10 * time.Second}
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
	spec := childSpec{Kind: childRawHTTP, Connections: cfg.Clients}
	if isPostgres(cfg.DB) {
		schema, drop, err := createRawSchema(ctx, cfg)
		if err != nil {
			return nil, err
		}
		defer drop()
		spec.Store = storeSpec{Postgres: cfg.DB, Schema: schema}
	} else {
		path, remove, err := rawSQLitePath(cfg, "rawhttp")
		if err != nil {
			return nil, err
		}
		defer remove()
		spec.Store = storeSpec{SQLite: path}
	}
	srv, err := startChild(ctx, spec, cfg.Progress)
	if err != nil {
		return nil, fmt.Errorf("raw over HTTP: %w", err)
	}
	if cfg.onChild != nil {
		cfg.onChild(srv.pid)
	}
	defer srv.stop(context.WithoutCancel(ctx))
	base, kind := srv.hello.URL, "sqlite"
	if spec.Store.Postgres != "" {
		kind = "postgres"
	}
	var server cpuReader
	if procCPUAvailable() {
		server = childrenCPU(srv)
	}
	// As many clients as Airlock's lifecycle had: over HTTP they overlap
	// their calls' HTTP work even where the store has one connection.
	clients := cfg.Clients
	api := &target{hc: newHTTPClient(clients)} // only its HTTP client, for target.call
	defer api.hc.CloseIdleConnections()
	run := randomHex(4)
	fmt.Fprintf(cfg.Progress, "raw over HTTP: %s behind a minimal handler at %s (process %d), %d clients, up to %s or %d lifecycles\n", srv.hello.Describe, base, srv.pid, clients, cfg.Duration, cfg.Count)
	res, err := runLoad(ctx, clients, cfg.Duration, cfg.Count, 0, server, func(context.Context, int) (clientOp, func(), error) {
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
	if err != nil {
		return nil, fmt.Errorf("raw over HTTP, %s: %w", kind, err)
	}
	return &RawReport{Store: kind, Transport: "http", Connections: srv.hello.Connections, Clients: clients, Result: res}, nil
}
