package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/airlockhq/airlock/approvaltoken"
	"github.com/airlockhq/airlock/cmd/airlock/internal/server"
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
	srv, err := startServer(ctx, cfg, a.Stderr)
	if err != nil {
		return err
	}
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
	if err := cfg.Validate(); err != nil {
		return Config{}, &usageError{msg: err.Error()}
	}
	return cfg, nil
}

// startServer opens the store cfg.DB names, assembles the server over it
// and listens on cfg.Addr. It prints the address, and a generated admin
// token (once, ever), to notices. cfg must have passed Validate.
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
	signingKey, err := readSigningKey(cfg.SigningKeyFile)
	if err != nil {
		return nil, err
	}
	st, err := openStore(ctx, cfg.DB)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", redactDB(cfg.DB), err)
	}
	srv, err := server.New(ctx, server.Config{
		SigningKey: signingKey, PublicURL: cfg.PublicURL,
		Store:      st, StoreName: redactDB(cfg.DB), Addr: cfg.Addr, AdminToken: cfg.AdminToken,
		Limits: cfg.Limits(), SessionStaleAfter: cfg.SessionStaleAfter,
		InboxSessionIdle: cfg.InboxSessionIdle, InboxSessionMax: cfg.InboxSessionMax,
		OIDC: cfg.OIDC(), NoInboxTokenSignIn: cfg.NoInboxTokenSignIn,
		MaxHeavyReads: cfg.MaxHeavyReads, MaxHeavyReadsPerToken: cfg.MaxHeavyReadsPerToken,
		RateLimit: cfg.RateLimit, AuthGuard: cfg.AuthGuard(), ShutdownGrace: cfg.ShutdownGrace,
		Policy: pol, PolicyReload: policyReload(pol),
		OutboundAllowPrivate: cfg.OutboundAllowPrivate, WebhookTimeout: cfg.WebhookTimeout, RemindBefore: cfg.Remind(),
		Slack: cfg.Slack(), SlackSigningSecret: cfg.SlackSigningSecret, Email: cfg.Email(),
		Logger: log, Version: version,
	})
	if err != nil {
		return nil, err
	}

	fmt.Fprint(notices, startupNotice("http://"+srv.Addr(), redactDB(cfg.DB), srv.GeneratedAdminToken()))
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

// startupNotice is what serve prints when it listens: where it is, where
// the inbox is, and, on a first start, the generated admin token (empty
// when none was) with the next command to run. The README shows it as
// printed (TestReadmeMatchesBinary).
func startupNotice(url, db, generatedAdmin string) string {
	var b strings.Builder
	fmt.Fprintln(&b, listeningNotice(url, db))
	fmt.Fprintf(&b, "Inbox: %s/ (sign in with a reviewer token)\n", url)
	if generatedAdmin == "" {
		fmt.Fprintln(&b, "Mint tokens as an admin: airlock tokens create --name NAME --role reviewer|agent")
		return b.String()
	}
	fmt.Fprintf(&b, "Admin token (shown once): %s\n", generatedAdmin)
	fmt.Fprintln(&b, "  Only its hash is stored; lost it? Restart with --admin-token <new secret> to replace it.")
	// The secret is printed once only, so the command names it.
	env := "AIRLOCK_TOKEN=<the admin token>"
	if url != defaultURL {
		env = "AIRLOCK_URL=" + url + " " + env
	}
	fmt.Fprintf(&b, "Next, mint your reviewer token and sign in to the inbox with it:\n  %s airlock tokens create --name \"Your name\" --role reviewer\n", env)
	return b.String()
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
