package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/cmd/airlock/internal/server"
	"github.com/airlockhq/airlock/inbox"
	"github.com/airlockhq/airlock/internal/outbound"
	"github.com/airlockhq/airlock/internal/ratelimit"
	"github.com/airlockhq/airlock/mailapp"
	"github.com/airlockhq/airlock/notify"
	"github.com/airlockhq/airlock/policy"
	"github.com/airlockhq/airlock/provider"
	"github.com/airlockhq/airlock/rest"
	"github.com/airlockhq/airlock/slackapp"
)

// Config is everything `airlock serve` can be told, by flags or their
// AIRLOCK_* environment twins (the README's Configuration table). A zero
// field means its default; WithDefaults fills them in and Validate checks
// the result.
type Config struct {
	// Addr is the TCP address to listen on. Default 127.0.0.1:8080: this
	// machine only. Port 0 picks a free port; the address is printed.
	Addr string
	// DB is where everything is kept: a SQLite database file, created if
	// missing, or a PostgreSQL database named by a postgres:// (or
	// postgresql://) URL or a libpq keyword string (host=… dbname=…), which
	// any number of replicas may share. Default airlock.db in the working
	// folder.
	DB string
	// AdminToken, when set, becomes the bootstrap admin token's secret at
	// every start, replacing the previous one (for scripts and CI). When
	// empty, a token is generated at the first start and shown once: on
	// the terminal serve runs in, or in AdminTokenFile.
	AdminToken string
	// AdminTokenFile, when set, is where a generated admin token is
	// written (a new file, mode 0600) instead of the terminal: the way to
	// get it when serve's output is a log. No default.
	AdminTokenFile string

	// MinTimeout is the shortest decision window accepted. Default 1s.
	MinTimeout time.Duration
	// MaxTimeout caps decision windows; longer ones are shortened. Default 168h.
	MaxTimeout time.Duration
	// DefaultTimeout is the window when the adapter asks for none. Default 15m.
	DefaultTimeout time.Duration
	// ApprovalValidity is how long an approval lets the call start when the
	// reviewer names no valid_for. Default 5m.
	ApprovalValidity time.Duration
	// MaxApprovalValidity is the most a reviewer's valid_for may ask. Default 1h.
	MaxApprovalValidity time.Duration

	// RateLimit is how many requests per second one token may make on
	// average (bursts of twice that are allowed); over it, 429. Default 50.
	RateLimit float64
	// AuthFailureLimit is how many failed authentications (REST, /mcp, the
	// inbox's sign-in) one client address may make at once, and again per
	// minute; beyond, tokens this server has not accepted before get 429
	// from that address. Default 20.
	AuthFailureLimit int
	// TrustedProxies lists the reverse proxies (IP addresses and CIDR
	// prefixes, comma-separated) whose X-Forwarded-For header names the
	// client that failed authentications are counted against. Default
	// none: the client is the TCP peer, and the header, which any client
	// can write, is ignored.
	TrustedProxies string
	// MaxHeavyReads is how many heavy reads (REST lists of requests, the
	// inbox's pending page and history, history searches) the process
	// serves at once; over it, 429. Each holds up to a page of requests in
	// memory, so this bounds what a burst of them can take. Default 8.
	MaxHeavyReads int
	// MaxHeavyReadsPerToken is how many heavy reads one token may have in
	// progress; over it, 429. Default 2.
	MaxHeavyReadsPerToken int
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string
	// LogFormat is text or json. Default: text when the logs go to a
	// terminal, json otherwise (App.serveConfig decides).
	LogFormat string
	// SessionStaleAfter is how long an MCP session may go without a
	// heartbeat before reviewers see it as stale. Stale is for display
	// only: it cancels and refuses nothing. Default 5m.
	SessionStaleAfter time.Duration
	// InboxSessionIdle is how long an inbox sign-in lasts without a page
	// opened; InboxSessionMax how long it lasts at most, however busy.
	// Sign-ins live in the store, so every replica serves them. Defaults
	// 12h and 168h.
	InboxSessionIdle time.Duration
	InboxSessionMax  time.Duration
	// ShutdownGrace is how long, on SIGINT or SIGTERM, in-flight requests
	// (long-polls included) may take to finish before they are cut. Default 10s.
	ShutdownGrace time.Duration
	// Policy is a policy file (docs/policy.md) whose rules decide requests
	// at creation; reloaded on SIGHUP and when it changes. Default none:
	// a person decides every request.
	Policy string

	// OutboundAllowPrivate lets every outbound connection (webhooks, the
	// Slack Web API, the SMTP server) reach loopback, private, link-local
	// and other non-public addresses. Default off: such URLs and hosts
	// are refused when given and such connections when they are made.
	// --webhook-allow-private is its old name, still read.
	OutboundAllowPrivate bool
	// WebhookTimeout bounds one webhook attempt, connection to answer.
	// Default 10s.
	WebhookTimeout time.Duration
	// RemindBefore sends one reminder (approval_request.reminder) of each
	// request still pending this long before its deadline ("10m") or this
	// share of its window before it ("25%"). Default none.
	RemindBefore string
	// CheckpointInterval is how often the audit log is checkpointed
	// (signed) while it grows. Default 10s.
	CheckpointInterval time.Duration
	// RetainPayloads, when set, is how long after its decision a request
	// keeps its arguments, reasoning and context; then they are purged,
	// and the request keeps its state, tool, decision and the digests
	// the audit log holds (docs/operations.md, "Payload retention").
	// Go durations (2160h), ISO 8601 (P90D) or days (90d), at least 1h.
	// Default 0: kept for ever.
	RetainPayloads time.Duration
	// RequirePasskeyFor names the requests whose decisions must be signed
	// with the reviewer's passkey in the inbox: "all", or a CEL condition
	// over the request as a policy rule's match (docs/phone.md,
	// "Passkeys"). Default "": none.
	RequirePasskeyFor string

	// SigningKeyFile, when set, is an Ed25519 private key (PKCS #8 PEM)
	// that signs every approval token instead of the keys kept in the
	// store (docs/tokens.md).
	SigningKeyFile string
	// KeyActivationDelay is how long after a rotation the new signing key
	// starts signing. Default provider.DefaultKeyActivationDelay; 1ms
	// switches at once, for one replica.
	KeyActivationDelay time.Duration

	// PublicURL is the server's address as reviewers reach it (behind a
	// proxy, say), for the links notifications carry. Default the address
	// listened on.
	PublicURL string
	// SlackBotToken (xoxb-…) and SlackChannel post each pending request to
	// the channel and update it to the outcome; SlackSigningSecret lets
	// linked reviewers decide with its buttons (POST /slack/interactions).
	// SlackAPIURL is Slack's Web API (default https://slack.com/api/).
	SlackBotToken      string
	SlackSigningSecret string
	SlackChannel       string
	SlackAPIURL        string
	// SMTPURL (smtp://user:password@host:port, STARTTLS) mails each
	// pending request and its reminder to linked reviewers with an
	// address; SMTPFrom is the sender (default airlock@ the SMTP host).
	SMTPURL  string
	SMTPFrom string

	// OIDCIssuer, OIDCClientID, OIDCClientSecret and OIDCRedirectURL sign
	// reviewers in to the inbox with an identity provider (docs/teams.md);
	// OIDCAllowedDomains (comma-separated) admits only emails at those
	// domains, and OIDCGroupsClaim names the claim listing a reviewer's
	// groups. Default: no OIDC sign-in.
	OIDCIssuer         string
	OIDCClientID       string
	OIDCClientSecret   string
	OIDCRedirectURL    string
	OIDCAllowedDomains string
	OIDCGroupsClaim    string
	// OIDCScopes are the scopes asked besides openid (space- or
	// comma-separated). Default "email profile".
	OIDCScopes string
	// NoInboxTokenSignIn (--inbox-token-signin=false) turns the inbox's
	// token sign-in off, leaving OIDC the only way in. Default false:
	// tokens sign in. Tokens work for the API and CLI either way.
	NoInboxTokenSignIn bool
}

// DefaultConfig returns the defaults the README's Configuration table lists.
func DefaultConfig() Config {
	l := airlock.DefaultLimits()
	return Config{
		Addr:                  "127.0.0.1:8080",
		DB:                    "airlock.db",
		MinTimeout:            l.MinTimeout,
		MaxTimeout:            l.MaxTimeout,
		DefaultTimeout:        l.DefaultTimeout,
		ApprovalValidity:      l.ApprovalValidity,
		MaxApprovalValidity:   l.MaxApprovalValidity,
		RateLimit:             rest.DefaultRateLimit,
		AuthFailureLimit:      ratelimit.DefaultAddressFailures,
		LogLevel:              "info",
		SessionStaleAfter:     airlock.DefaultStaleAfter,
		InboxSessionIdle:      inbox.DefaultSessionIdle,
		InboxSessionMax:       inbox.DefaultSessionMax,
		ShutdownGrace:         server.DefaultShutdownGrace,
		MaxHeavyReads:         provider.DefaultMaxHeavyReads,
		MaxHeavyReadsPerToken: provider.DefaultMaxHeavyReadsPerToken,
		WebhookTimeout:        notify.DefaultTimeout,
		CheckpointInterval:    provider.DefaultCheckpointInterval,
		SlackAPIURL:           slackapp.DefaultAPIURL,
		KeyActivationDelay:    provider.DefaultKeyActivationDelay,
	}
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	set := func(v *string, def string) {
		if *v == "" {
			*v = def
		}
	}
	setDur := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	set(&c.Addr, d.Addr)
	set(&c.DB, d.DB)
	set(&c.LogLevel, d.LogLevel)
	setDur(&c.MinTimeout, d.MinTimeout)
	setDur(&c.MaxTimeout, d.MaxTimeout)
	setDur(&c.DefaultTimeout, d.DefaultTimeout)
	setDur(&c.ApprovalValidity, d.ApprovalValidity)
	setDur(&c.MaxApprovalValidity, d.MaxApprovalValidity)
	setDur(&c.ShutdownGrace, d.ShutdownGrace)
	setDur(&c.SessionStaleAfter, d.SessionStaleAfter)
	setDur(&c.InboxSessionIdle, d.InboxSessionIdle)
	setDur(&c.InboxSessionMax, d.InboxSessionMax)
	setDur(&c.WebhookTimeout, d.WebhookTimeout)
	setDur(&c.KeyActivationDelay, d.KeyActivationDelay)
	setDur(&c.CheckpointInterval, d.CheckpointInterval)
	set(&c.SlackAPIURL, d.SlackAPIURL)
	if c.RateLimit == 0 {
		c.RateLimit = d.RateLimit
	}
	if c.AuthFailureLimit == 0 {
		c.AuthFailureLimit = d.AuthFailureLimit
	}
	if c.MaxHeavyReads == 0 {
		c.MaxHeavyReads = d.MaxHeavyReads
	}
	if c.MaxHeavyReadsPerToken == 0 {
		c.MaxHeavyReadsPerToken = d.MaxHeavyReadsPerToken
	}
	return c
}

// AuthGuard returns the configuration of the throttle of failed
// authentications: --auth-failure-limit failures at once and per minute
// per client address, as --trusted-proxies say it is seen. c must have
// passed Validate.
func (c Config) AuthGuard() ratelimit.GuardConfig {
	proxies, _ := ratelimit.ParseTrustedProxies(c.TrustedProxies) // checked by Validate
	return ratelimit.GuardConfig{
		AddressBurst: c.AuthFailureLimit, AddressRate: float64(c.AuthFailureLimit) / 60,
		TrustedProxies: proxies,
	}
}

// Limits returns the window and validity limits the provider enforces.
func (c Config) Limits() airlock.Limits {
	return airlock.Limits{
		MinTimeout:          c.MinTimeout,
		MaxTimeout:          c.MaxTimeout,
		DefaultTimeout:      c.DefaultTimeout,
		ApprovalValidity:    c.ApprovalValidity,
		MaxApprovalValidity: c.MaxApprovalValidity,
	}
}

// minAdminTokenLen matches what provider.Service.BootstrapAdmin accepts.
const minAdminTokenLen = 16

// Validate checks a configuration that went through WithDefaults. Its
// errors name the flag to fix.
func (c Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("--addr %q is not host:port (like 127.0.0.1:8080): %v", c.Addr, err)
	}
	if isPostgresURL(c.DB) {
		if _, err := url.Parse(c.DB); err != nil {
			return fmt.Errorf("--db is not a valid PostgreSQL URL (%s); write it as postgres://user:password@host:5432/dbname?sslmode=verify-full, with special characters in the password percent-encoded", redactDB(c.DB))
		}
	}
	if c.AdminToken != "" && len(c.AdminToken) < minAdminTokenLen {
		return fmt.Errorf("--admin-token must be at least %d characters; use a long random value", minAdminTokenLen)
	}
	if strings.TrimSpace(c.AdminToken) != c.AdminToken {
		return errors.New("--admin-token must not start or end with spaces")
	}
	if c.AdminToken != "" && c.AdminTokenFile != "" {
		return errors.New("--admin-token-file is where a generated admin token goes; with --admin-token none is generated: give one or the other")
	}
	if err := c.Limits().Validate(); err != nil {
		return fmt.Errorf("--%v", err)
	}
	if c.RateLimit < 0 {
		return fmt.Errorf("--rate-limit must be positive (requests per second per token)")
	}
	if c.AuthFailureLimit < 0 {
		return fmt.Errorf("--auth-failure-limit must be positive (failed authentications per minute per client address)")
	}
	if _, err := ratelimit.ParseTrustedProxies(c.TrustedProxies); err != nil {
		return fmt.Errorf("--trusted-proxies: %v; list the proxies' IP addresses or CIDR prefixes, comma-separated", err)
	}
	if c.MaxHeavyReads < 0 {
		return fmt.Errorf("--max-heavy-reads must be positive (lists and searches served at once)")
	}
	if c.MaxHeavyReadsPerToken < 0 {
		return fmt.Errorf("--max-heavy-reads-per-token must be positive (lists and searches one token may have in progress)")
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	if c.LogFormat != "" && c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("--log-format must be text or json, not %q", c.LogFormat)
	}
	if c.SessionStaleAfter < 0 {
		return fmt.Errorf("--session-stale-after must be positive")
	}
	if c.InboxSessionIdle < 0 || c.InboxSessionMax < 0 {
		return fmt.Errorf("--inbox-session-idle and --inbox-session-max must be positive")
	}
	if c.ShutdownGrace < 0 {
		return fmt.Errorf("--shutdown-grace must not be negative")
	}
	if c.KeyActivationDelay < time.Millisecond || c.KeyActivationDelay > time.Hour {
		return fmt.Errorf("--key-activation-delay must be between 1ms and 1h")
	}
	if c.WebhookTimeout < 0 || c.WebhookTimeout > time.Minute {
		return fmt.Errorf("--webhook-timeout must be between 1ms and 1m; a receiver should answer at once and work afterwards")
	}
	if _, err := airlock.ParseRemindBefore(c.RemindBefore); err != nil {
		return fmt.Errorf("--%v", err)
	}
	if c.CheckpointInterval < time.Second || c.CheckpointInterval > time.Hour {
		return fmt.Errorf("--checkpoint-interval must be between 1s and 1h; the sequencer's lease lasts three of them")
	}
	if c.RetainPayloads != 0 && (c.RetainPayloads < provider.MinRetainPayloads || c.RetainPayloads > maxRetainPayloads) {
		return fmt.Errorf("--retain-payloads must be between 1h and %dd, or 0 to keep payloads for ever", maxRetainDays)
	}
	if _, err := c.RequirePasskey(); err != nil {
		return err
	}
	if (c.SlackBotToken == "") != (c.SlackChannel == "") {
		return fmt.Errorf("--slack-bot-token and --slack-channel go together: the token posts, the channel says where")
	}
	if c.SlackSigningSecret != "" && c.SlackBotToken == "" {
		return fmt.Errorf("--slack-signing-secret takes the clicks of buttons that only --slack-bot-token and --slack-channel post")
	}
	if o := c.OIDC(); o != nil {
		if err := o.Validate(); err != nil {
			return err
		}
	} else if c.OIDCClientID != "" || c.OIDCClientSecret != "" || c.OIDCRedirectURL != "" || c.OIDCAllowedDomains != "" || c.OIDCGroupsClaim != "" ||
		c.OIDCScopes != "" {
		return fmt.Errorf("the --oidc-* flags need --oidc-issuer, the identity provider's issuer URL (docs/teams.md)")
	}
	if c.NoInboxTokenSignIn && c.OIDCIssuer == "" {
		return fmt.Errorf("--inbox-token-signin=false needs OIDC sign-in (--oidc-issuer and the other --oidc-* flags): otherwise nobody could sign in to the inbox")
	}
	if c.SMTPURL != "" {
		host, _, _, _, err := mailapp.ParseURL(c.SMTPURL)
		if err != nil {
			return err
		}
		if err := outbound.CheckHost(host, c.OutboundAllowPrivate); err != nil {
			return fmt.Errorf("--smtp-url: %v", err)
		}
	}
	for _, f := range []struct{ name, v string }{{"public-url", c.PublicURL}, {"slack-api-url", c.SlackAPIURL}} {
		if f.v == "" {
			continue
		}
		if u, err := url.Parse(f.v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--%s must be an http:// or https:// URL, not %q", f.name, f.v)
		}
	}
	if err := outbound.CheckURL(c.SlackAPIURL, c.OutboundAllowPrivate); c.SlackBotToken != "" && err != nil {
		return fmt.Errorf("--slack-api-url: %v", err)
	}
	return nil
}

// OIDC returns the inbox's OIDC sign-in, or nil without --oidc-issuer.
func (c Config) OIDC() *inbox.OIDCConfig {
	if c.OIDCIssuer == "" {
		return nil
	}
	o := &inbox.OIDCConfig{Issuer: c.OIDCIssuer, ClientID: c.OIDCClientID, ClientSecret: c.OIDCClientSecret,
		RedirectURL: c.OIDCRedirectURL, GroupsClaim: c.OIDCGroupsClaim}
	for _, sc := range strings.FieldsFunc(c.OIDCScopes, func(r rune) bool { return r == ',' || r == ' ' }) {
		if sc != "openid" {
			o.Scopes = append(o.Scopes, sc)
		}
	}
	for _, d := range strings.Split(c.OIDCAllowedDomains, ",") {
		if d = strings.TrimSpace(d); d != "" {
			o.AllowedDomains = append(o.AllowedDomains, d)
		}
	}
	return o
}

// Email returns the mailer's configuration. c must have passed Validate.
func (c Config) Email() mailapp.Config {
	return mailapp.Config{URL: c.SMTPURL, From: c.SMTPFrom, PublicURL: c.PublicURL}
}

// Slack returns the Slack app's configuration. c must have passed
// Validate.
func (c Config) Slack() slackapp.Config {
	return slackapp.Config{BotToken: c.SlackBotToken, Channel: c.SlackChannel, APIURL: c.SlackAPIURL, PublicURL: c.PublicURL}
}

// Remind returns --remind-before as the engine takes it. c must have
// passed Validate.
func (c Config) Remind() airlock.RemindBefore {
	r, _ := airlock.ParseRemindBefore(c.RemindBefore)
	return r
}

// isPostgres reports whether --db names a PostgreSQL database, by URL or
// by libpq keyword string, rather than a SQLite file.
func isPostgres(db string) bool {
	return isPostgresURL(db) || keywordDSN().MatchString(db)
}

// isPostgresURL reports whether --db is a PostgreSQL URL.
func isPostgresURL(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// keywordDSN matches the start of a libpq keyword/value connection string
// (host=db.internal dbname=airlock …), as psql accepts. Like the other
// patterns of this command it is compiled on first use, so commands that
// never read --db (the hook, version) do not pay for it at start-up.
var keywordDSN = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\s*(host|hostaddr|port|dbname|user|password|passfile|service|sslmode)\s*=`)
})

// keywordPassword matches the password of a keyword string, quoted or not.
var keywordPassword = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(\bpassword\s*=\s*)('(?:\\.|[^'\\])*'|\S+)`)
})

// redactDB returns --db fit for notices and logs: a PostgreSQL URL or
// keyword string with its password (in a URL's user part, or a password=
// parameter) replaced by xxxxx. SQLite paths are returned as they are.
func redactDB(db string) string {
	if !isPostgresURL(db) {
		if keywordDSN().MatchString(db) {
			return keywordPassword().ReplaceAllString(db, "${1}xxxxx")
		}
		return db
	}
	u, err := url.Parse(db)
	if err != nil {
		// Unreadable, so possibly mangled around a password: show only
		// what kind of database it is.
		scheme, _, _ := strings.Cut(db, "://")
		return scheme + "://(unreadable URL)"
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	switch strings.ToLower(s) {
	case "debug", "info", "warn", "error":
		return l, l.UnmarshalText([]byte(s))
	}
	return l, fmt.Errorf("--log-level must be debug, info, warn or error, not %q", s)
}

// bindServeFlags defines serve's flags on fs, writing into c, with the
// defaults shown in help.
func bindServeFlags(fs *flag.FlagSet, c *Config) {
	d := DefaultConfig()
	fs.StringVar(&c.Addr, "addr", d.Addr, "TCP address to listen on; the default serves this machine only")
	fs.StringVar(&c.DB, "db", d.DB, "SQLite database file (created if missing), or a postgres:// URL (or host=… dbname=… string) of a PostgreSQL database that several replicas may share")
	fs.StringVar(&c.AdminToken, "admin-token", "", "set the bootstrap admin token's secret (at least 16 characters) instead of generating one at first start")
	fs.StringVar(&c.AdminTokenFile, "admin-token-file", "", "write the admin token generated at first start to this new file (mode 0600) rather than to the terminal")
	durationVar(fs, &c.MinTimeout, "min-timeout", d.MinTimeout, "shortest decision window accepted")
	durationVar(fs, &c.MaxTimeout, "max-timeout", d.MaxTimeout, "longest decision window; longer requests are shortened to it")
	durationVar(fs, &c.DefaultTimeout, "default-timeout", d.DefaultTimeout, "decision window when the request asks for none")
	durationVar(fs, &c.ApprovalValidity, "approval-validity", d.ApprovalValidity, "how long an approval lets the call start, unless the reviewer says otherwise")
	durationVar(fs, &c.MaxApprovalValidity, "max-approval-validity", d.MaxApprovalValidity, "most a reviewer's valid_for may ask")
	fs.Float64Var(&c.RateLimit, "rate-limit", d.RateLimit, "requests per second allowed per token, REST and /mcp together (bursts of twice that); over it, 429")
	fs.IntVar(&c.AuthFailureLimit, "auth-failure-limit", d.AuthFailureLimit, "failed authentications (REST, /mcp, inbox sign-in) one client address may make at once and per minute; beyond, 429 for tokens this server has not accepted before")
	fs.StringVar(&c.TrustedProxies, "trusted-proxies", "", "reverse proxies (IPs or CIDR prefixes, comma-separated) whose X-Forwarded-For names the client; by default the header is ignored")
	fs.IntVar(&c.MaxHeavyReads, "max-heavy-reads", d.MaxHeavyReads, "heavy reads (REST lists of requests, the inbox's pending page and history, history searches) served at once; over it, 429")
	fs.IntVar(&c.MaxHeavyReadsPerToken, "max-heavy-reads-per-token", d.MaxHeavyReadsPerToken, "heavy reads one token may have in progress; over it, 429")
	fs.StringVar(&c.LogLevel, "log-level", d.LogLevel, "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", d.LogFormat, "text or json (default: text on a terminal, json otherwise)")
	durationVar(fs, &c.SessionStaleAfter, "session-stale-after", d.SessionStaleAfter, "how long an MCP session may go without a heartbeat before reviewers see it as stale (display only)")
	durationVar(fs, &c.InboxSessionIdle, "inbox-session-idle", d.InboxSessionIdle, "how long an inbox sign-in lasts without a page opened; sign-ins live in the store, so any replica serves them")
	durationVar(fs, &c.InboxSessionMax, "inbox-session-max", d.InboxSessionMax, "how long an inbox sign-in lasts at most, however busy the reviewer")
	durationVar(fs, &c.ShutdownGrace, "shutdown-grace", d.ShutdownGrace, "on SIGINT/SIGTERM, how long in-flight requests may take before they are cut")
	fs.StringVar(&c.Policy, "policy", "", "policy file (YAML) whose rules allow, deny or ask at creation (docs/policy.md); reloaded on SIGHUP and when it changes")
	fs.BoolVar(&c.OutboundAllowPrivate, "outbound-allow-private", false, "let webhooks, the Slack Web API, the SMTP server and push endpoints be reached at loopback, private and link-local addresses (tests, receivers and relays on this network); off, they are refused")
	fs.BoolVar(&c.OutboundAllowPrivate, deprecatedAllowPrivate, false, "deprecated: the old name of --outbound-allow-private")
	durationVar(fs, &c.WebhookTimeout, "webhook-timeout", d.WebhookTimeout, "bound on one webhook or push attempt, connection to answer; a slower receiver fails and is retried")
	fs.StringVar(&c.SigningKeyFile, "signing-key-file", "", "Ed25519 private key (PKCS #8 PEM, as openssl genpkey -algorithm ed25519 writes it) that signs approval tokens instead of the keys the database keeps; give every replica the same file")
	durationVar(fs, &c.KeyActivationDelay, "key-activation-delay", d.KeyActivationDelay, "how long after airlock keys rotate the new key starts signing; the old key signs until then. Replicas need more than 5s plus the skew of their clocks; 1ms switches at once, for one replica")
	fs.StringVar(&c.PublicURL, "public-url", "", "the server's address as reviewers reach it, for the links in Slack messages and MCP URL elicitations the VAPID subject of pushes and the passkeys' relying party (default the address listened on; MCP clients then wait inside the call)")
	fs.StringVar(&c.SlackBotToken, "slack-bot-token", "", "Slack bot token (xoxb-…): post each pending request to --slack-channel and update it to the outcome (docs/notifications.md)")
	fs.StringVar(&c.SlackChannel, "slack-channel", "", "Slack channel ID (C…) requests are posted to; invite the app to it")
	fs.StringVar(&c.SlackSigningSecret, "slack-signing-secret", "", "Slack app's signing secret: verifies POST /slack/interactions, where linked reviewers' Approve and Deny clicks arrive")
	fs.StringVar(&c.SlackAPIURL, "slack-api-url", slackapp.DefaultAPIURL, "Slack's Web API base URL (tests point it elsewhere)")
	fs.StringVar(&c.SMTPURL, "smtp-url", "", "SMTP server, smtp://user:password@host:587 (STARTTLS required): mail each pending request and its reminder to reviewers linked to an address")
	fs.StringVar(&c.SMTPFrom, "smtp-from", "", "sender address of those mails (default airlock@ the SMTP host)")
	fs.StringVar(&c.OIDCIssuer, "oidc-issuer", "", "identity provider's issuer URL: reviewers sign in to the inbox with it (docs/teams.md)")
	fs.StringVar(&c.OIDCClientID, "oidc-client-id", "", "the inbox's OIDC client ID at the identity provider")
	fs.StringVar(&c.OIDCClientSecret, "oidc-client-secret", "", "the inbox's OIDC client secret; prefer AIRLOCK_OIDC_CLIENT_SECRET, which ps does not show")
	fs.StringVar(&c.OIDCRedirectURL, "oidc-redirect-url", "", "the inbox's OIDC callback as browsers reach it: https://<host>"+inbox.OIDCCallbackPath+", registered at the identity provider")
	fs.StringVar(&c.OIDCAllowedDomains, "oidc-allowed-domains", "", "comma-separated email domains OIDC reviewers must be at (email verified); default any")
	fs.StringVar(&c.OIDCGroupsClaim, "oidc-groups-claim", "", "ID token claim listing a reviewer's groups, such as groups; default none")
	fs.StringVar(&c.OIDCScopes, "oidc-scopes", "", "OIDC scopes asked besides openid, such as \"email profile groups\"; default email profile")
	fs.Var(notBool{&c.NoInboxTokenSignIn}, "inbox-token-signin", "let reviewers sign in to the inbox with a token; false leaves OIDC the only way in (tokens still work for the API and CLI)")
	fs.StringVar(&c.RemindBefore, "remind-before", "", "send one reminder of a request still pending this long (10m) or this share of its window (25%) before its deadline; none by default")
	durationVar(fs, &c.CheckpointInterval, "checkpoint-interval", d.CheckpointInterval, "how often the audit log is checkpointed (a signed tree head) while it grows; the sequencer's lease lasts three of them")
	fs.StringVar(&c.RequirePasskeyFor, "require-passkey-for", "", `decisions that must be signed with the reviewer's passkey in the inbox: "all", or a CEL condition over the request as a policy rule's match, such as 'request.reversibility == "irreversible"'; the CLI, Slack, mail and the API cannot make them. Default none`)
	fs.Var(retentionValue{&c.RetainPayloads}, "retain-payloads", "purge a request's arguments, reasoning and context this long after its decision (90d, 2160h, P90D; at least 1h); the request keeps its state and the digests the audit log holds. Default 0: keep them for ever")
}

// maxRetainDays bounds --retain-payloads: a century, well inside a
// time.Duration.
const (
	maxRetainDays     = 36500
	maxRetainPayloads = maxRetainDays * 24 * time.Hour
)

// retentionValue is --retain-payloads: 0 (keep for ever), a number of days
// (90d), or a duration as durationValue reads it (2160h, P90D).
type retentionValue struct{ d *time.Duration }

func (v retentionValue) String() string {
	if v.d == nil || *v.d == 0 {
		return "0"
	}
	if *v.d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(*v.d/(24*time.Hour)), 10) + "d"
	}
	return v.d.String()
}

func (v retentionValue) Set(s string) error {
	d, err := parseRetention(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

// parseRetention reads a --retain-payloads value.
func parseRetention(s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok && days != "" && strings.Trim(days, "0123456789") == "" {
		n, err := strconv.Atoi(days)
		if err != nil || n > maxRetainDays {
			return 0, fmt.Errorf("%q is more than %d days", s, maxRetainDays)
		}
		if n == 0 {
			return 0, nil
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := airlock.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%w, or in days like 90d", err)
	}
	return d, nil
}

// deprecatedAllowPrivate is the old name of --outbound-allow-private,
// from when it covered webhooks alone; serve warns when it is used.
const deprecatedAllowPrivate = "webhook-allow-private"

// notBool is a boolean flag, default true, stored as its negation, so
// that the Config field's zero value is the default.
type notBool struct{ off *bool }

func (v notBool) IsBoolFlag() bool { return true }

func (v notBool) String() string {
	if v.off == nil || !*v.off {
		return "true"
	}
	return "false"
}

func (v notBool) Set(s string) error {
	on, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*v.off = !on
	return nil
}

// durationValue is a flag that reads Go durations (30m) and ISO 8601 ones
// (PT30M), like the API's timeouts.
type durationValue struct{ d *time.Duration }

func durationVar(fs *flag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var(durationValue{p}, name, usage)
}

func (v durationValue) String() string {
	if v.d == nil {
		return ""
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	d, err := airlock.ParseDuration(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

// RequirePasskey compiles --require-passkey-for: nil for none.
func (c *Config) RequirePasskey() (airlock.GrantExpression, error) {
	switch strings.TrimSpace(c.RequirePasskeyFor) {
	case "":
		return nil, nil
	case "all":
		return provider.AllRequests, nil
	}
	e, err := policy.CompileExpression(c.RequirePasskeyFor)
	if err != nil {
		return nil, fmt.Errorf("--require-passkey-for: %w", err)
	}
	return e, nil
}
