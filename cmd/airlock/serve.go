package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/airlockhq/airlock/approvaltoken"
	"github.com/airlockhq/airlock/cmd/airlock/internal/server"
	"github.com/airlockhq/airlock/internal/heapfloor"
	"github.com/airlockhq/airlock/internal/telemetry"
	"github.com/airlockhq/airlock/policy"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/postgres"
	"github.com/airlockhq/airlock/store/sqlite"
)

func runServe(ctx context.Context, a *App, args []string) error {
	cfg, err := a.serveConfig(args)
	if err != nil {
		return err
	}
	// Tracing starts before the server, so that its first spans are
	// exported, and stops after it, flushing the last ones.
	log, err := newLogger(cfg, a.Stderr)
	if err != nil {
		return err
	}
	stopTracing, err := telemetry.Start(ctx, telemetry.Config{Version: userAgentVersion(), Logger: log,
		Getenv: func(k string) string { v, _ := a.LookupEnv(k); return v }})
	if err != nil {
		return usageErrorf("%v", err)
	}
	defer func() {
		flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := stopTracing(flush); err != nil {
			log.Warn("telemetry: the last spans were not exported", "err", err)
		}
	}()
	srv, err := startServer(ctx, cfg, a.Stderr)
	if err != nil {
		return err
	}
	// A server's heap is small: without a floor it is collected every
	// few megabytes (internal/heapfloor). GOGC, when set, wins.
	defer heapfloor.Start(heapfloor.DefaultFloor)()
	return srv.Run(ctx)
}

// serveConfig reads serve's flags over their environment twins, fills in
// the defaults and validates the result.
func (a *App) serveConfig(args []string) (Config, error) {
	var cfg Config
	fs := a.newFlagSet("serve")
	bindServeFlags(fs, &cfg)
	if err := a.parseFlags(fs, args); err != nil {
		return Config{}, err
	}
	// fs.Visit sees the flags set, from the command line or the
	// environment.
	fs.Visit(func(f *flag.Flag) {
		if f.Name == deprecatedAllowPrivate {
			fmt.Fprintf(a.Stderr, "airlock: --%s (%s) is deprecated; use --outbound-allow-private (%s), which covers webhooks, Slack and SMTP\n",
				f.Name, envName(f.Name), envName("outbound-allow-private"))
		}
	})
	cfg = cfg.WithDefaults()
	if cfg.LogFormat == "" {
		// A person reads a terminal; a service manager, a container
		// runtime or a pipe keeps lines a machine reads.
		cfg.LogFormat = "json"
		if a.IsTerminal != nil && a.IsTerminal(a.Stderr) {
			cfg.LogFormat = "text"
		}
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, &usageError{msg: err.Error()}
	}
	return cfg, nil
}

// startServer opens the store cfg.DB names, assembles the server over it
// and listens on cfg.Addr. It prints the start-up notice to notices first
// (before any log line but a failure's): where the server is, and, at a
// first start, where the admin token went. cfg must have passed Validate.
func startServer(ctx context.Context, cfg Config, notices io.Writer) (*server.Server, error) {
	log, err := newLogger(cfg, notices)
	if err != nil {
		return nil, err
	}
	var pol *policy.Engine
	if cfg.Policy != "" {
		// A policy that does not compile stops the start, before the
		// store is opened: serving without the rules meant would be
		// serving the wrong rules.
		if pol, err = policy.NewEngine(cfg.Policy, log); err != nil {
			return nil, usageErrorf("--policy %s: %v", cfg.Policy, err)
		}
	}
	requirePasskey, err := cfg.RequirePasskey()
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	signingKey, err := readSigningKey(cfg.SigningKeyFile)
	if err != nil {
		return nil, err
	}
	st, err := openStore(ctx, cfg.DB)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", redactDB(cfg.DB), err)
	}
	n := startup{db: redactDB(cfg.DB), self: selfCommand(), json: cfg.LogFormat == "json", tokenFile: cfg.AdminTokenFile}
	srv, err := server.New(ctx, server.Config{
		SigningKey: signingKey, KeyActivationDelay: cfg.KeyActivationDelay, PublicURL: cfg.PublicURL,
		Store: st, StoreName: redactDB(cfg.DB), Addr: cfg.Addr, AdminToken: cfg.AdminToken,
		ShowAdminToken: n.showAdminToken(cfg, notices),
		Limits:         cfg.Limits(), SessionStaleAfter: cfg.SessionStaleAfter,
		InboxSessionIdle: cfg.InboxSessionIdle, InboxSessionMax: cfg.InboxSessionMax,
		OIDC: cfg.OIDC(), NoInboxTokenSignIn: cfg.NoInboxTokenSignIn,
		MaxHeavyReads: cfg.MaxHeavyReads, MaxHeavyReadsPerToken: cfg.MaxHeavyReadsPerToken,
		RateLimit: cfg.RateLimit, AuthGuard: cfg.AuthGuard(), ShutdownGrace: cfg.ShutdownGrace,
		Policy: pol, PolicyReload: policyReload(pol),
		OutboundAllowPrivate: cfg.OutboundAllowPrivate, WebhookTimeout: cfg.WebhookTimeout, RemindBefore: cfg.Remind(),
		CheckpointInterval: cfg.CheckpointInterval, RetainPayloads: cfg.RetainPayloads, RequirePasskey: requirePasskey,
		Slack: cfg.Slack(), SlackSigningSecret: cfg.SlackSigningSecret, Email: cfg.Email(),
		Logger: log, Version: userAgentVersion(),
	})
	if err != nil {
		if n.wrote {
			// New fails after the token is shown only when storing it
			// failed: the file would hold a token that does not work.
			os.Remove(cfg.AdminTokenFile)
		}
		return nil, err
	}
	n.url = "http://" + srv.Addr()
	n.noAdmin = srv.AdminTokenMissing()
	n.print(notices)
	if host, _, _ := net.SplitHostPort(cfg.Addr); !isLoopback(host) {
		log.Warn("listening beyond this machine; put TLS in front of Airlock", "addr", srv.Addr())
	}
	return srv, nil
}

// policyReload is SIGHUP, for a server with a policy to reload.
func policyReload(pol *policy.Engine) <-chan os.Signal {
	if pol == nil {
		return nil
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	return hup
}

// openStore opens the store --db names: PostgreSQL for a postgres:// or
// postgresql:// URL or a keyword string (its search_path parameter, when
// given, picks the schema), a SQLite file otherwise. Both apply their
// migrations.
func openStore(ctx context.Context, db string) (store.Store, error) {
	if isPostgres(db) {
		s, err := postgres.Open(ctx, db)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	s, err := sqlite.Open(ctx, db)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// listeningNotice is the line that says where the server is; tests and the
// README rely on its shape.
func listeningNotice(url, db string) string {
	return fmt.Sprintf("Airlock listening on %s (REST API under %s/v1; database %s)", url, url, db)
}

// startup is what serve says when it listens: where it is, and where a
// first start's admin token went.
type startup struct {
	url, db string
	// self is how to run this binary again: "airlock" when that is what
	// PATH finds, its path otherwise (selfCommand).
	self string
	// json is --log-format json: the notice is log records, and no
	// secret is among them.
	json bool
	// admin is a generated admin token shown on the terminal; tokenFile is
	// --admin-token-file, and wrote whether this start wrote a token there.
	admin     string
	tokenFile string
	wrote     bool
	// noAdmin is a first start that had nowhere to show a token, and so
	// generated none.
	noAdmin bool
}

// showAdminToken is how this start shows a generated admin token (see
// server.Config.ShowAdminToken): in --admin-token-file; else, with text
// logs, on notices when it is an interactive terminal, never in a log a
// pipe or a file would keep; else nowhere (nil), and none is generated.
func (n *startup) showAdminToken(cfg Config, notices io.Writer) func(string) error {
	switch {
	case cfg.AdminTokenFile != "":
		return func(secret string) error {
			if err := writeTokenFile(cfg.AdminTokenFile, secret); err != nil {
				return err
			}
			n.wrote = true
			return nil
		}
	case cfg.LogFormat == "text" && isTerminal(notices):
		return func(secret string) error { n.admin = secret; return nil }
	}
	return nil
}

// writeTokenFile writes a generated admin token to path, a file it
// creates with mode 0600: the secret is the admin's alone. It never writes
// over an existing file (nor follows a link planted there): a token file
// from another server or database would be lost, and an old one would be
// mistaken for this one.
func writeTokenFile(path, secret string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return usageErrorf("--admin-token-file %s already exists, and this database has no admin token yet, so the file is not this server's: "+
			"remove it if its token is no longer needed, or name a file that does not exist", path)
	}
	if err != nil {
		return fmt.Errorf("--admin-token-file: %w", err)
	}
	_, err = f.WriteString(secret + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("--admin-token-file: write %s: %w", path, err)
	}
	return nil
}

// print writes the notice: as text to notices, or, with --log-format
// json, as log records, so that nothing but JSON reaches the output. Like
// the text, the records are written whatever --log-level says: a notice
// is not a log line to filter, and tools wait for the listening one.
func (n *startup) print(notices io.Writer) {
	if n.json {
		log := slog.New(slog.NewJSONHandler(notices, nil))
		log.Info(listeningNotice(n.url, n.db), "url", n.url, "inbox", n.url+"/", "db", n.db)
		switch {
		case n.wrote:
			log.Info("admin token generated and written to --admin-token-file; it is shown nowhere else", "file", n.tokenFile)
		case n.noAdmin:
			log.Warn(noAdminNotice)
		}
		return
	}
	fmt.Fprint(notices, n.text())
}

// noAdminNotice says how to get an admin token when a first start could
// show it nowhere.
const noAdminNotice = "No admin token yet: one is generated only where it can be shown once, on a terminal or in a file. " +
	"Restart with --admin-token-file PATH (a new file, mode 0600) or --admin-token SECRET to set one."

// text is the notice as serve prints it with text logs; the README shows
// a first start's as printed (TestReadmeMatchesBinary).
func (n *startup) text() string {
	var b strings.Builder
	fmt.Fprintln(&b, listeningNotice(n.url, n.db))
	fmt.Fprintf(&b, "Inbox: %s/ (sign in with a reviewer token)\n", n.url)
	env := ""
	if n.url != defaultURL {
		env = "AIRLOCK_URL=" + n.url + " "
	}
	switch {
	case n.noAdmin:
		fmt.Fprintln(&b, noAdminNotice)
		return b.String()
	case n.admin != "":
		fmt.Fprintf(&b, "Admin token (shown once): %s\n", n.admin)
		fmt.Fprintln(&b, "  Only its hash is stored; lost it? Restart with --admin-token <new secret> to replace it.")
		// The secret is printed once only, so the command names it.
		env += "AIRLOCK_TOKEN=<the admin token>"
	case n.wrote:
		fmt.Fprintf(&b, "Admin token written to %s (mode 0600; shown nowhere else).\n", n.tokenFile)
		env += "AIRLOCK_TOKEN=$(cat " + shellQuote(n.tokenFile) + ")"
	default:
		fmt.Fprintf(&b, "Mint tokens as an admin: %s tokens create --name NAME --role reviewer|agent\n", n.self)
		return b.String()
	}
	fmt.Fprintf(&b, "Next, mint your reviewer token and sign in to the inbox with it:\n  %s %s tokens create --name \"Your name\" --role reviewer\n", env, n.self)
	return b.String()
}

// selfCommand is how the next command should name this binary: "airlock"
// when that is what PATH finds, else the running executable's path (after
// `go build -o` into a folder not on PATH, or under `go run`), so that the
// command printed runs as printed.
func selfCommand() string {
	exe, err := os.Executable()
	if err != nil {
		return "airlock"
	}
	if onPath, err := exec.LookPath("airlock"); err == nil && sameFile(onPath, exe) {
		return "airlock"
	}
	return shellQuote(exe)
}

func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// newLogger returns the slog logger the flags ask for, writing to w.
func newLogger(cfg Config, w io.Writer) (*slog.Logger, error) {
	level, err := parseLevel(cfg.LogLevel)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// readSigningKey reads --signing-key-file; nil when it is not set, so the
// store's keys sign.
func readSigningKey(path string) (*approvaltoken.Key, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, usageErrorf("--signing-key-file: %v", err)
	}
	k, err := approvaltoken.ParsePrivateKeyPEM(data)
	if err != nil {
		return nil, usageErrorf("--signing-key-file %s: %v", path, err)
	}
	return &k, nil
}
