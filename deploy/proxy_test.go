package deploy

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
)

// directive is one directive of an nginx or Caddy configuration: its
// name, its arguments, and the block that follows it, if any.
type directive struct {
	name  string
	args  []string
	block []directive
}

// find returns the directives named name among ds.
func find(ds []directive, name string) []directive {
	var out []directive
	for _, d := range ds {
		if d.name == name {
			out = append(out, d)
		}
	}
	return out
}

// one returns the directive named name among ds, failing t unless there
// is exactly one.
func one(t *testing.T, ds []directive, name string) directive {
	t.Helper()
	found := find(ds, name)
	if len(found) != 1 {
		t.Fatalf("%d %s directives, want one", len(found), name)
	}
	return found[0]
}

// header returns the value a proxy_set_header or header_up directive
// among ds gives the header name, or "".
func header(ds []directive, directiveName, name string) string {
	for _, d := range find(ds, directiveName) {
		if len(d.args) == 2 && strings.EqualFold(d.args[0], name) {
			return d.args[1]
		}
	}
	return ""
}

// parseNginx reads nginx's configuration syntax: words and quoted
// strings, directives ended by ";" or followed by a block in braces, and
// "#" comments.
func parseNginx(t *testing.T, text string) []directive {
	t.Helper()
	var toks []string
	for _, line := range strings.Split(text, "\n") {
		line, _, _ = strings.Cut(line, "#")
		for len(line) > 0 {
			line = strings.TrimLeft(line, " \t")
			switch {
			case line == "":
			case line[0] == '"':
				end := strings.IndexByte(line[1:], '"')
				if end < 0 {
					t.Fatalf("unterminated string in %q", line)
				}
				toks = append(toks, line[1:end+1])
				line = line[end+2:]
			case strings.ContainsRune(";{}", rune(line[0])):
				toks = append(toks, line[:1])
				line = line[1:]
			default:
				end := strings.IndexAny(line, " \t;{}")
				if end < 0 {
					end = len(line)
				}
				toks = append(toks, line[:end])
				line = line[end:]
			}
		}
	}
	ds, rest := nginxBlock(t, toks)
	if len(rest) != 0 {
		t.Fatalf("unbalanced braces: %v left", rest)
	}
	return ds
}

func nginxBlock(t *testing.T, toks []string) ([]directive, []string) {
	t.Helper()
	var ds []directive
	for len(toks) > 0 {
		if toks[0] == "}" {
			return ds, toks
		}
		d := directive{name: toks[0]}
		toks = toks[1:]
		for len(toks) > 0 && toks[0] != ";" && toks[0] != "{" && toks[0] != "}" {
			d.args = append(d.args, toks[0])
			toks = toks[1:]
		}
		if len(toks) == 0 {
			t.Fatalf("directive %s does not end", d.name)
		}
		switch toks[0] {
		case ";":
			toks = toks[1:]
		case "{":
			d.block, toks = nginxBlock(t, toks[1:])
			if len(toks) == 0 || toks[0] != "}" {
				t.Fatalf("block of %s does not close", d.name)
			}
			toks = toks[1:]
		default:
			t.Fatalf("directive %s ends with }", d.name)
		}
		ds = append(ds, d)
	}
	return ds, toks
}

// parseCaddyfile reads the Caddyfile's syntax: one directive a line, its
// block opened by a "{" ending the line and closed by a "}" alone on one,
// and "#" comments.
func parseCaddyfile(t *testing.T, text string) []directive {
	t.Helper()
	lines := strings.Split(text, "\n")
	var parse func() []directive
	parse = func() []directive {
		var ds []directive
		for len(lines) > 0 {
			line := lines[0]
			lines = lines[1:]
			if i := strings.Index(line, " #"); i >= 0 || strings.HasPrefix(strings.TrimSpace(line), "#") {
				if i < 0 {
					i = 0
				}
				line = line[:i]
			}
			f := strings.Fields(line)
			switch {
			case len(f) == 0:
				continue
			case len(f) == 1 && f[0] == "}":
				return ds
			}
			d := directive{name: f[0], args: f[1:]}
			if n := len(d.args); n > 0 && d.args[n-1] == "{" {
				d.args = d.args[:n-1]
				d.block = parse()
			}
			ds = append(ds, d)
		}
		return ds
	}
	return parse()
}

// seconds reads an nginx or Caddy duration such as 120s or 2m.
func seconds(t *testing.T, s string) int {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("duration %q: %v", s, err)
	}
	return int(d.Seconds())
}

// maxLongPoll is the longest a long-poll waits (?wait=, provider MaxWait):
// a proxy must wait longer for an answer. Event streams send a comment at
// least every 15 s.
const maxLongPoll = 60

// TestNginxRecipe parses deploy/nginx/airlock.conf and checks that it
// proxies HTTPS to the port Airlock listens on, with the headers and
// timeouts Airlock needs.
func TestNginxRecipe(t *testing.T) {
	t.Parallel()
	conf := parseNginx(t, readFile(t, "nginx/airlock.conf"))
	var tls directive
	for _, s := range find(conf, "server") {
		for _, l := range find(s.block, "listen") {
			if len(l.args) >= 2 && l.args[0] == "443" && l.args[1] == "ssl" {
				tls = s
			}
		}
	}
	if tls.name == "" {
		t.Fatal("no server listens on 443 ssl")
	}
	for _, need := range []string{"ssl_certificate", "ssl_certificate_key"} {
		one(t, tls.block, need)
	}
	if size := one(t, tls.block, "client_max_body_size").args[0]; size != "2m" {
		t.Errorf("client_max_body_size %s; a request of 1 MiB of arguments needs more than 1m", size)
	}
	loc := one(t, tls.block, "location")
	if len(loc.args) != 1 || loc.args[0] != "/" {
		t.Fatalf("location %v, want /", loc.args)
	}
	pass := one(t, loc.block, "proxy_pass").args[0]
	if pass != "http://127.0.0.1:"+listenPort {
		t.Errorf("proxy_pass %s, want http://127.0.0.1:%s, where the unit listens", pass, listenPort)
	}
	// $proxy_host is proxy_pass's host:port: a loopback name.
	if h := header(loc.block, "proxy_set_header", "Host"); h != "$proxy_host" {
		t.Errorf("Host is %q, want $proxy_host (the inbox and /mcp answer loopback names)", h)
	}
	if h := header(loc.block, "proxy_set_header", "X-Forwarded-For"); h != "$proxy_add_x_forwarded_for" {
		t.Errorf("X-Forwarded-For is %q, want $proxy_add_x_forwarded_for (--trusted-proxies reads the last address)", h)
	}
	if b := one(t, loc.block, "proxy_buffering").args[0]; b != "off" {
		t.Errorf("proxy_buffering %s: event streams would wait in nginx's buffers", b)
	}
	if s := seconds(t, one(t, loc.block, "proxy_read_timeout").args[0]); s <= maxLongPoll {
		t.Errorf("proxy_read_timeout %ds cuts long-polls of up to %ds", s, maxLongPoll)
	}
	checkProxiedHost(t, strings.TrimPrefix(pass, "http://"))
}

// TestCaddyRecipe parses deploy/caddy/Caddyfile and checks the same of it.
func TestCaddyRecipe(t *testing.T) {
	t.Parallel()
	conf := parseCaddyfile(t, readFile(t, "caddy/Caddyfile"))
	if len(conf) != 1 || len(conf[0].block) == 0 || !strings.Contains(conf[0].name, ".") {
		t.Fatalf("want one site block named by a host name (which Caddy serves over HTTPS), got %+v", conf)
	}
	site := conf[0].block
	rp := one(t, site, "reverse_proxy")
	if len(rp.args) != 1 || rp.args[0] != "127.0.0.1:"+listenPort {
		t.Errorf("reverse_proxy %v, want 127.0.0.1:%s, where the unit listens", rp.args, listenPort)
	}
	if h := header(rp.block, "header_up", "Host"); h != "{upstream_hostport}" {
		t.Errorf("Host is %q, want {upstream_hostport} (the inbox and /mcp answer loopback names)", h)
	}
	if h := header(rp.block, "header_up", "X-Forwarded-For"); h != "{remote_host}" {
		t.Errorf("X-Forwarded-For is %q, want {remote_host} (--trusted-proxies reads the last address)", h)
	}
	if f := one(t, rp.block, "flush_interval").args[0]; f != "-1" {
		t.Errorf("flush_interval %s, want -1: event streams go out as written", f)
	}
	transport := one(t, rp.block, "transport")
	if s := seconds(t, one(t, transport.block, "read_timeout").args[0]); s <= maxLongPoll {
		t.Errorf("read_timeout %ds cuts long-polls of up to %ds", s, maxLongPoll)
	}
	if size := one(t, one(t, site, "request_body").block, "max_size").args[0]; size != "2MB" {
		t.Errorf("request_body max_size %s; a request of 1 MiB of arguments needs more", size)
	}
	checkProxiedHost(t, rp.args[0])
}

// checkProxiedHost starts a real server and asks its inbox and /mcp as a
// proxy would, with the Host the recipe sends (the upstream's address,
// here with the server's real port) and with the public name a proxy
// that passed Host through would send: the first is served, the second
// refused. So a recipe that forgot the Host line fails here too.
func checkProxiedHost(t *testing.T, upstream string) {
	t.Helper()
	host, _, err := net.SplitHostPort(upstream)
	if err != nil {
		t.Fatal(err)
	}
	srv := testkit.Serve(t, testkit.Airlock(t, false), "", nil,
		"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "airlock.db"), "--admin-token", "proxy-test-admin-token")
	_, port, _ := net.SplitHostPort(srv.Addr)
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	get := func(path, hostHeader string) int {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+path, nil)
		req.Host = hostHeader
		req.Header.Set("Accept", "text/html")
		req.Header.Set("X-Forwarded-For", "203.0.113.7")
		res, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	proxied := net.JoinHostPort(host, port)
	for _, path := range []string{"/", "/mcp"} {
		if code := get(path, proxied); code == http.StatusForbidden || code >= 500 {
			t.Errorf("GET %s with Host %s (what the recipe sends): %d", path, proxied, code)
		}
		if code := get(path, "airlock.example.com"); code != http.StatusForbidden {
			t.Errorf("GET %s with Host airlock.example.com: %d, want 403; the recipe's Host line is what makes it work", path, code)
		}
	}
	if code := get("/readyz", proxied); code != http.StatusOK {
		t.Errorf("GET /readyz through the recipe's Host: %d", code)
	}
}
