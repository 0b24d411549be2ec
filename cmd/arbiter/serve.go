package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/evidence"
	"github.com/arbiter-ledger/arbiter/services/policies"
	"github.com/arbiter-ledger/arbiter/services/sso"
	"github.com/arbiter-ledger/arbiter/services/webhooks"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/web"
)

type serveCmd struct {
	Addr                string        `env:"ARBITER_ADDR" default:"127.0.0.1:8080" help:"Address to listen on."`
	SweepInterval       time.Duration `name:"sweep-interval" env:"ARBITER_SWEEP_INTERVAL" default:"1s" help:"How often expired leases are timed out."`
	Retention           time.Duration `env:"ARBITER_RETENTION" default:"720h" help:"How long terminal actions are kept (0 keeps them forever); unresolved actions are never pruned."`
	Migrate             bool          `env:"ARBITER_AUTO_MIGRATE" help:"Apply pending migrations at start (always done on SQLite)."`
	DrainTimeout        time.Duration `name:"drain-timeout" env:"ARBITER_DRAIN_TIMEOUT" default:"30s" help:"How long in-flight requests may finish after SIGTERM."`
	PublicURL           string        `name:"public-url" env:"ARBITER_PUBLIC_URL" help:"Where people reach the dashboard (e.g. https://arbiter.example.com); https makes session cookies Secure."`
	WebhookAllowPrivate bool          `name:"webhook-allow-private" env:"ARBITER_WEBHOOK_ALLOW_PRIVATE" help:"Let webhooks reach loopback, private and link-local addresses (tests, on-premises receivers)."`
	WebhookConcurrency  int           `name:"webhook-concurrency" env:"ARBITER_WEBHOOK_CONCURRENCY" default:"32" help:"Webhook requests in flight to one endpoint at most."`
	WebhookDisableAfter time.Duration `name:"webhook-disable-after" env:"ARBITER_WEBHOOK_DISABLE_AFTER" default:"120h" help:"Disable a webhook endpoint that has failed without a success for this long."`
	SessionIdle         time.Duration `name:"session-idle-timeout" env:"ARBITER_SESSION_IDLE_TIMEOUT" default:"8h" help:"Dashboard sessions end after this long without a request."`
	SessionAbsolute     time.Duration `name:"session-absolute-timeout" env:"ARBITER_SESSION_ABSOLUTE_TIMEOUT" default:"168h" help:"Dashboard sessions end this long after sign-in, whatever happens."`
	TrustedProxies      []string      `name:"trusted-proxies" env:"ARBITER_TRUSTED_PROXIES" sep:"," help:"CIDRs of the proxies and load balancers in front of Arbiter, comma-separated; X-Forwarded-For is read only from them."`
	MetricsAddr         string        `name:"metrics-addr" env:"ARBITER_METRICS_ADDR" help:"Serve /metrics on this address only, not on the main listener (the production setting)."`
	PprofAddr           string        `name:"pprof-addr" env:"ARBITER_PPROF_ADDR" help:"Serve Go's profiler (/debug/pprof/) on this address, e.g. 127.0.0.1:6060; keep it on loopback, it shows the process's internals."`
	WriteTimeout        time.Duration `name:"write-timeout" env:"ARBITER_WRITE_TIMEOUT" default:"30s" help:"A client that has not read its whole answer this long after sending its request is dropped (event streams and waiting requests keep their own deadlines)."`
	MaxWaiters          int           `name:"max-waiters" env:"ARBITER_MAX_WAITERS" default:"10000" help:"Requests that may wait for a decision (Prefer: wait) at once; beyond it a request is answered at once, pending approval. Lowered at start so waiters leave at least 1,000 open files (half of a small limit) to other requests."`
	LogKeyFile          string        `name:"log-key-file" env:"ARBITER_LOG_KEY_FILE" default:"arbiter-data/log.key" help:"The evidence log's Ed25519 signing key (a note signing key, mode 0600), made at first start; every replica needs the same one."`
	LogOrigin           string        `name:"log-origin" env:"ARBITER_LOG_ORIGIN" default:"arbiter.local/log" help:"The evidence log's name, the first line of its checkpoints and the name of its verifier key."`
	AdminPasswordFile   string        `name:"admin-password-file" env:"ARBITER_ADMIN_PASSWORD_FILE" default:"arbiter-data/initial-admin-password" help:"Where the first start writes the first admin's password (mode 0600)."`

	// Single sign-on (README, Security).
	OIDCIssuer       string   `name:"oidc-issuer" env:"ARBITER_OIDC_ISSUER" help:"Issuer URL of the OpenID Connect provider; setting it turns single sign-on on. Register PUBLIC_URL/signin/sso/callback as the redirect URL."`
	OIDCClientID     string   `name:"oidc-client-id" env:"ARBITER_OIDC_CLIENT_ID" help:"Arbiter's client id at the provider."`
	OIDCClientSecret string   `name:"oidc-client-secret" env:"ARBITER_OIDC_CLIENT_SECRET" help:"Arbiter's client secret at the provider (prefer the environment variable to the flag)."`
	OIDCScopes       []string `name:"oidc-scopes" env:"ARBITER_OIDC_SCOPES" sep:"," default:"email,profile" help:"Scopes asked for besides openid, comma-separated (add groups where the provider needs it for the groups claim)."`
	OIDCRoleClaim    string   `name:"oidc-role-claim" env:"ARBITER_OIDC_ROLE_CLAIM" default:"groups" help:"The ID token claim the group mapping reads (a name, or a dotted path such as realm_access.roles)."`
	OIDCGroups       []string `name:"oidc-groups" env:"ARBITER_OIDC_GROUPS" sep:"," help:"The group mapping, comma-separated VALUE=ROLE[:NAMESPACE], e.g. arbiter-admins=admin,payments-ops=operator:payments,readers=viewer:*."`
	LocalPasswords   bool     `name:"local-passwords" env:"ARBITER_LOCAL_PASSWORDS" default:"true" negatable:"" help:"Let people sign in with an Arbiter password; false leaves single sign-on the only way in."`
}

func (s *serveCmd) Run(ctx context.Context, c *cli, log *slog.Logger) error {
	if err := s.validate(); err != nil {
		return err
	}
	st, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := ensureSchema(ctx, st, s.Migrate || st.Embedded()); err != nil {
		return err
	}
	srv, err := s.start(ctx, st, log)
	if err != nil {
		return err
	}
	return srv.run(ctx)
}

func (s *serveCmd) validate() error {
	if s.SweepInterval <= 0 {
		return fmt.Errorf("--sweep-interval must be positive, got %s", s.SweepInterval)
	}
	if s.WebhookConcurrency < 0 {
		return fmt.Errorf("--webhook-concurrency must be positive, got %d", s.WebhookConcurrency)
	}
	if s.Retention < 0 {
		return fmt.Errorf("--retention must not be negative, got %s", s.Retention)
	}
	if _, err := web.ParseTrustedProxies(s.TrustedProxies); err != nil {
		return fmt.Errorf("--trusted-proxies: %w", err)
	}
	if s.WriteTimeout < 0 {
		return fmt.Errorf("--write-timeout (ARBITER_WRITE_TIMEOUT) must not be negative, got %s", s.WriteTimeout)
	}
	if s.MaxWaiters < 0 {
		return fmt.Errorf("--max-waiters (ARBITER_MAX_WAITERS) is %d: give 0 (no request waits) or more", s.MaxWaiters)
	}
	if !s.LocalPasswords && s.OIDCIssuer == "" {
		return fmt.Errorf("local passwords are off (ARBITER_LOCAL_PASSWORDS=false) but no single sign-on is set up (ARBITER_OIDC_ISSUER): nobody could sign in")
	}
	if s.OIDCIssuer != "" {
		if s.OIDCClientID == "" {
			return fmt.Errorf("ARBITER_OIDC_ISSUER is set: ARBITER_OIDC_CLIENT_ID is required too")
		}
		if _, err := sso.ParseRule(s.OIDCRoleClaim, s.OIDCGroups); err != nil {
			return fmt.Errorf("ARBITER_OIDC_GROUPS: %w", err)
		}
	}
	return nil
}

// passwordsOff reports whether single sign-on is the only way in. A
// serveCmd built in code (the demo) leaves LocalPasswords false and has no
// provider: passwords stay on.
func (s *serveCmd) passwordsOff() bool { return !s.LocalPasswords && s.OIDCIssuer != "" }

// singleSignOn reads the provider's discovery document when single sign-on
// is set up, so a wrong issuer stops the start rather than every sign-in.
func (s *serveCmd) singleSignOn(ctx context.Context, st *services.Store) (*sso.SSO, error) {
	if s.OIDCIssuer == "" {
		return nil, nil
	}
	return sso.New(ctx, st, sso.Config{Issuer: s.OIDCIssuer, ClientID: s.OIDCClientID, ClientSecret: s.OIDCClientSecret,
		Scopes: s.OIDCScopes, RoleClaim: s.OIDCRoleClaim, Groups: s.OIDCGroups})
}

// writeTimeout is --write-timeout; a serveCmd built in code (the demo)
// leaves it zero and gets the default.
func (s *serveCmd) writeTimeout() time.Duration {
	if s.WriteTimeout == 0 {
		return web.DefaultWriteTimeout
	}
	return s.WriteTimeout
}

// apiServer is the HTTP server of the API and the dashboard, with the
// bounds that keep a client from holding the server's memory and
// connections (SPEC, Running it): request headers within 10 s, the body
// within 60 s, and the whole answer read within writeTimeout of the
// request, or the connection is closed. Event streams and requests
// waiting for a decision set their own deadlines (web.Deps.WriteTimeout).
func apiServer(handler http.Handler, log *slog.Logger, writeTimeout time.Duration) *http.Server {
	return &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second,
		WriteTimeout: writeTimeout, IdleTimeout: 120 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
}

// server is Arbiter listening on its address, with its sweeper and webhook
// dispatcher running, until run returns. serve and demo share it, so the
// demo is the product as deployed, not a look-alike.
type server struct {
	URL        string // http://host:port actually listened on
	MetricsURL string // where /metrics is served when it has a listener of its own

	log          *slog.Logger
	http         *http.Server
	metrics      *http.Server // nil unless --metrics-addr
	drainTimeout time.Duration
	serveErr     chan error
	stopBG       context.CancelFunc
	bg           sync.WaitGroup
	// ledger answers the requests parked in Prefer: wait when the server
	// shuts down: http.Server's drain does not see their connections.
	ledger *services.Ledger
}

// start wires the services to the HTTP handler on st, whose schema must be
// current, creates the first dashboard user on an empty database (its
// password in a file only its owner can read), and starts listening and the
// background work. ctx ending is the signal to shut down: event streams
// close on it.
func (s *serveCmd) start(ctx context.Context, st *services.Store, log *slog.Logger) (*server, error) {
	metrics := web.NewMetrics(st.CountByStatus, webhooks.QueueOf(st))
	logKey, err := evidence.LoadOrCreateKey(cmp.Or(s.LogKeyFile, "arbiter-data/log.key"), cmp.Or(s.LogOrigin, evidence.DefaultOrigin))
	if err != nil {
		return nil, err
	}
	selfCheck := evidence.NewSelfChecker(st.Driver(), log, metrics.ObserveSelfCheck)
	accts := accounts.New(st)
	accts.IdleTimeout, accts.AbsoluteTimeout = s.SessionIdle, s.SessionAbsolute
	signOn, err := s.singleSignOn(ctx, st)
	if err != nil {
		return nil, err
	}
	// With passwords off, the first admin comes from the group mapping.
	if !s.passwordsOff() {
		if email, password, created, err := accts.EnsureAdmin(ctx); err != nil {
			return nil, err
		} else if created {
			s.reportFirstAdmin(log, email, password)
		}
	}
	trusted, err := web.ParseTrustedProxies(s.TrustedProxies)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", s.Addr, err)
	}
	url := "http://" + ln.Addr().String()
	policy := webhooks.AddressPolicy{AllowPrivate: s.WebhookAllowPrivate}
	// Links in Slack messages go to the public URL, else to where this
	// server listens.
	dcfg := webhooks.DispatcherConfig{Policy: policy, PublicURL: cmp.Or(s.PublicURL, url), DisableAfter: s.WebhookDisableAfter,
		OnResult: metrics.ObserveDelivery}
	if s.WebhookConcurrency > 0 {
		dcfg.PerEndpoint = s.WebhookConcurrency
		dcfg.Workers = max(webhooks.DefaultWorkers, 4*s.WebhookConcurrency)
	}
	dispatcher := webhooks.NewDispatcher(st, log, dcfg)
	hooks := webhooks.New(st, webhooks.Config{Policy: policy, OnQueued: dispatcher.Wake})
	approvals := policies.New(st)
	limits := policies.NewLimits(st)
	ledger, freezes, breakers := policies.NewBraked(st, services.LedgerConfig{
		Approver:          approvals,
		Limiter:           limits,
		OnAlert:           dispatcher.Wake,
		OnGroup:           metrics.ObserveGroup,
		OnApprovalDecided: metrics.ObserveApproval,
		OnLookupAnswered:  metrics.ObserveLookup,
		OnTimeoutResolved: metrics.ObserveTimeoutResolved,
	}, dispatcher.Wake)

	nofile, before, err := raiseFDLimit()
	if err != nil {
		log.Warn("could not raise the open files limit", "limit", before, "err", err)
	} else if nofile != before {
		log.Info("raised the open files limit", "from", before, "to", nofile)
	}
	maxWaiters := waiterCap(s.MaxWaiters, nofile)
	if s.MaxWaiters > 0 && maxWaiters < s.MaxWaiters {
		log.Warn("fewer waiters than ARBITER_MAX_WAITERS: the open files limit keeps room for other requests", "max_waiters", maxWaiters, "open_files_limit", nofile)
	}
	if maxWaiters == 0 {
		maxWaiters = -1 // none waits
	}
	handler := web.New(web.Deps{MaxWaiters: maxWaiters, Store: st, Ledger: ledger, Keys: accounts.NewKeys(st), Accounts: accts,
		Evidence: evidence.NewLog(st.Driver(), logKey), SelfCheck: selfCheck,
		Webhooks: hooks, Policies: approvals, Limits: limits, Freezes: freezes, Breakers: breakers, Metrics: metrics, Log: log, PublicURL: s.PublicURL, Done: ctx.Done(),
		TrustedProxies: trusted, MetricsElsewhere: s.MetricsAddr != "", SSO: signOn, LocalPasswordsOff: s.passwordsOff(),
		WriteTimeout: s.writeTimeout()})

	srv := &server{
		URL:          url,
		log:          log,
		ledger:       ledger,
		http:         apiServer(handler, log, s.writeTimeout()),
		drainTimeout: s.DrainTimeout,
		serveErr:     make(chan error, 1),
	}
	log.Info("arbiter: listening", "addr", srv.URL, "database", st.Where, "dialect", st.Dialect,
		"sweep_interval", s.SweepInterval.String(), "retention", s.Retention.String(), "log_verifier_key", logKey.Verifier)
	if s.MetricsAddr != "" {
		mln, err := net.Listen("tcp", s.MetricsAddr)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("listen on %s for metrics: %w", s.MetricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", metrics.Handler())
		srv.metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: srv.http.ErrorLog}
		srv.MetricsURL = "http://" + mln.Addr().String()
		log.Info("arbiter: serving metrics on their own listener", "metrics_url", srv.MetricsURL+"/metrics")
		go func() {
			if err := srv.metrics.Serve(mln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("arbiter: metrics listener stopped", "err", err)
			}
		}()
	}

	if s.PprofAddr != "" {
		pln, err := net.Listen("tcp", s.PprofAddr)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("listen on %s for the profiler: %w", s.PprofAddr, err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		log.Info("arbiter: serving the profiler", "pprof_url", "http://"+pln.Addr().String()+"/debug/pprof/")
		go func() { _ = http.Serve(pln, mux) }()
	}

	bg, stopBG := context.WithCancel(context.Background())
	srv.stopBG = stopBG
	srv.bg.Go(func() { ledger.RunSweeper(bg, log, s.SweepInterval, s.Retention, metrics.ObserveSweep) })
	srv.bg.Go(func() { dispatcher.Run(bg) })
	srv.bg.Go(func() { policies.RunBrakes(bg, log, BrakesInterval, freezes, breakers, metrics.ObserveBreakerTrip) })
	sequencer := evidence.NewSequencer(st.Driver(), evidence.SequencerConfig{Key: logKey, Every: evidence.CheckpointEvery,
		Log: log, OnCheckpoint: func(n int64) { metrics.ObserveCheckpoint(n); dispatcher.Wake() }, OnRefused: metrics.ObserveSignRefused})
	srv.bg.Go(func() { sequencer.Run(bg, LogInterval) })
	srv.bg.Go(func() { selfCheck.Run(bg, evidence.SelfCheckEvery) })
	go func() { srv.serveErr <- srv.http.Serve(ln) }()
	return srv, nil
}

// LogInterval is how often each replica offers to sequence the evidence
// log; one at a time does (SPEC: entries join it within 2 s).
const LogInterval = time.Second

// BrakesInterval is how often each replica checks the breakers and
// finishes letting go of what lifted freezes held.
const BrakesInterval = time.Second

// run serves until ctx ends, then drains in-flight requests for up to the
// drain timeout and stops the background work.
func (srv *server) run(ctx context.Context) error {
	select {
	case err := <-srv.serveErr:
		if srv.metrics != nil {
			srv.metrics.Close()
		}
		srv.stopBG()
		srv.bg.Wait()
		return err
	case <-ctx.Done():
	}
	return srv.shutdown()
}

func (srv *server) shutdown() error {
	srv.log.Info("arbiter: shutting down; draining in-flight requests", "timeout", srv.drainTimeout.String())
	dctx, cancel := context.WithTimeout(context.Background(), srv.drainTimeout)
	defer cancel()
	err := srv.http.Shutdown(dctx)
	// Requests waiting for a decision (Prefer: wait) are answered now with
	// their pending outcome: the agent may wait again on another replica.
	if werr := srv.ledger.EndWaits(dctx); werr != nil && err == nil {
		err = werr
	}
	if srv.metrics != nil {
		srv.metrics.Close()
	}
	srv.stopBG()
	srv.bg.Wait()
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("drain: %w", err)
	}
	srv.log.Info("arbiter: stopped")
	return nil
}

// reportFirstAdmin hands the first admin's password to whoever started the
// server without putting it in the log, which is often shipped elsewhere:
// it goes to a file only this user can read, and the log says where. The
// admin must choose a new password at the first sign-in anyway.
func (s *serveCmd) reportFirstAdmin(log *slog.Logger, email, password string) {
	change := "arbiter users set-password --email " + email + " --password-stdin"
	if err := writeSecret(s.AdminPasswordFile, password+"\n"); err != nil {
		log.Error("arbiter: created the first dashboard user but could not write its password; set one from the command line",
			"email", email, "err", err, "set_it_with", change)
		return
	}
	log.Warn("arbiter: created the first dashboard user; its password is in a file only this user can read; a new one must be chosen at the first sign-in; delete the file afterwards",
		"email", email, "password_file", s.AdminPasswordFile, "or_set_it_with", change)
}

// writeSecret writes a file readable by its owner only (0600), in a
// directory only its owner can enter if it has to create one.
func writeSecret(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	// An older file keeps its mode through O_TRUNC.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
