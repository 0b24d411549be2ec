package web

import (
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/evidence"
	"github.com/arbiter-ledger/arbiter/services/policies"
	"github.com/arbiter-ledger/arbiter/services/sso"
	"github.com/arbiter-ledger/arbiter/services/webhooks"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/views"
)

// Deps are what the HTTP surface is built from.
type Deps struct {
	Store    *services.Store
	Ledger   *services.Ledger
	Keys     *accounts.Keys
	Accounts *accounts.Accounts
	Webhooks *webhooks.Webhooks
	Policies *policies.Service
	// Limits serves /v1/limits; nil leaves the routes out.
	Limits *policies.Limits
	// Freezes and Breakers serve /v1/freezes and /v1/breakers; nil leaves
	// the routes out.
	Freezes  *policies.Freezes
	Breakers *policies.Breakers
	Metrics  *Metrics
	// Evidence serves /v1/audit; SelfCheck tells the Audit page of the
	// last self-check. Nil leaves them out.
	Evidence  *evidence.Log
	SelfCheck *evidence.SelfChecker
	Log       *slog.Logger
	// SecureCookies makes session cookies Secure with the __Host- prefix
	// even when PublicURL is not https (an https PublicURL does it too).
	SecureCookies bool
	// PublicURL is where people reach the dashboard, for links in alerts.
	PublicURL string
	// Done is closed when the server starts shutting down; long-lived
	// responses (event streams) end then, so the drain does not wait on them.
	Done <-chan struct{}
	// TrustedProxies are the proxies whose X-Forwarded-For is believed
	// (ARBITER_TRUSTED_PROXIES); none means the peer is the client.
	TrustedProxies []*net.IPNet
	// MetricsElsewhere leaves /metrics to a listener of its own
	// (ARBITER_METRICS_ADDR, Metrics.Handler).
	MetricsElsewhere bool
	// SSO is single sign-on with an OpenID Connect provider; nil for none.
	SSO *sso.SSO
	// LocalPasswordsOff leaves single sign-on the only way in
	// (ARBITER_LOCAL_PASSWORDS=false); it needs SSO.
	LocalPasswordsOff bool
	// WriteTimeout is the server's write deadline (ARBITER_WRITE_TIMEOUT;
	// zero is DefaultWriteTimeout): a client that has not read its answer
	// by then is dropped. Event streams push it back before each write, so
	// a stream outlives it while its client keeps reading.
	WriteTimeout time.Duration
	// MaxWaiters bounds the requests waiting at once with Prefer: wait
	// (ARBITER_MAX_WAITERS); beyond it a request is answered at once.
	// Zero is DefaultMaxWaiters; negative lets no request wait.
	MaxWaiters int
}

// New returns the HTTP handler with every route. The whole surface reads
// here.
func New(d Deps) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.IPExtractor = clientAddress(d.TrustedProxies)
	overTLS := servedOverTLS(d.PublicURL)
	dash := &dashboard{cookies: cookies{secure: d.SecureCookies || overTLS}, origins: newOriginCheck(d.PublicURL),
		signIn: views.SignInOptions{SSO: d.SSO != nil, Passwords: d.SSO == nil || !d.LocalPasswordsOff}}
	e.HTTPErrorHandler = errorHandler(d.Log, dash)
	e.Use(screenRequestID, middleware.RequestID())
	e.Use(requestLog(d.Log, d.Metrics))
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{DisableStackAll: true, LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
		d.Log.Error("web: panic", "err", err, "stack", string(stack))
		return err
	}}))
	e.Use(securityHeaders(overTLS))
	e.Use(limitBody(MaxBodyBytes))

	health := &healthHandler{store: d.Store}
	e.GET("/healthz", health.healthz)
	e.GET("/readyz", health.readyz)
	if !d.MetricsElsewhere {
		e.GET("/metrics", d.Metrics.handler())
	}
	e.GET("/v1/openapi.json", serveOpenAPI)

	// The API key is checked per route rather than on the group, so that an
	// unknown method on a known path answers 405, not 401 or 404.
	key := requireAPIKey(d.Keys)
	api := e.Group("/v1")
	entries := &entriesHandler{ledger: d.Ledger, metrics: d.Metrics, release: newReleaser(d.Ledger), keys: d.Keys, maxWaiters: int64(d.MaxWaiters), writeTimeout: d.WriteTimeout}
	api.POST("/entries", entries.submit, key)
	actions := &actionsHandler{ledger: d.Ledger}
	api.GET("/actions", actions.list, key)
	api.GET("/actions/:id", actions.get, key)
	api.GET("/actions/:id/entries", actions.entries, key)
	api.POST("/actions/:id/decisions", actions.decide, key)
	bulk := &decisionsHandler{ledger: d.Ledger}
	api.POST("/decisions", bulk.decideMany, key)
	if d.Policies != nil {
		pol := &policiesHandler{policies: d.Policies}
		api.POST("/policies", pol.create, key)
		api.GET("/policies", pol.list, key)
		api.POST("/policies/test", pol.test, key)
		api.GET("/policies/:id", pol.get, notPolicyTest, key)
		api.PATCH("/policies/:id", pol.update, notPolicyTest, key)
		api.DELETE("/policies/:id", pol.delete, notPolicyTest, key)
		api.GET("/policies/:id/versions", pol.versions, key)
	}
	if d.Limits != nil {
		lim := &limitsHandler{limits: d.Limits}
		api.POST("/limits", lim.create, key)
		api.GET("/limits", lim.list, key)
		api.GET("/limits/:id", lim.get, key)
		api.PATCH("/limits/:id", lim.update, key)
		api.DELETE("/limits/:id", lim.delete, key)
		api.GET("/limits/:id/versions", lim.versions, key)
		api.GET("/limits/:id/usage", lim.usage, key)
	}
	if d.Freezes != nil && d.Breakers != nil {
		fz := &freezesHandler{freezes: d.Freezes, breakers: d.Breakers}
		api.POST("/freezes", fz.start, key)
		api.GET("/freezes", fz.list, key)
		api.GET("/freezes/:id", fz.get, key)
		api.POST("/freezes/:id/lift", fz.lift, key)
		api.POST("/breakers", fz.createBreaker, key)
		api.GET("/breakers", fz.listBreakers, key)
		api.GET("/breakers/:id", fz.getBreaker, key)
		api.PATCH("/breakers/:id", fz.updateBreaker, key)
		api.DELETE("/breakers/:id", fz.deleteBreaker, key)
		api.GET("/breakers/:id/versions", fz.breakerVersions, key)
	}
	if d.Evidence != nil {
		au := &auditHandler{log: d.Evidence}
		api.GET("/audit/key", au.key)
		api.GET("/audit/checkpoint", au.checkpoint)
		api.GET("/audit/entries/:id/proof", au.proof, key)
		api.GET("/audit/consistency", au.consistency, key)
		api.GET("/audit/export", au.export, key)
	}
	hooks := &webhooksHandler{hooks: d.Webhooks}
	api.POST("/webhooks", hooks.create, key)
	api.GET("/webhooks", hooks.list, key)
	api.GET("/webhooks/:id", hooks.get, key)
	api.PATCH("/webhooks/:id", hooks.update, key)
	api.DELETE("/webhooks/:id", hooks.delete, key)
	api.POST("/webhooks/:id/rotate-secret", hooks.rotate, key)
	api.POST("/webhooks/:id/test", hooks.test, key)
	api.GET("/webhooks/:id/deliveries", hooks.deliveries, key)
	api.POST("/deliveries/:id/redeliver", hooks.redeliver, key)

	// The dashboard: server-rendered pages for people, behind a session.
	e.GET("/static/*", staticFiles())
	// Middleware is attached per route, not per group: a group's middleware
	// would answer unknown paths and methods of the whole site.
	session := []echo.MiddlewareFunc{limitBody(FormBodyBytes), readForm, loadSession(d.Accounts, dash.cookies), checkCSRF(dash.origins)}
	signedIn := slices.Concat(session, []echo.MiddlewareFunc{requireUser})
	user := slices.Concat(signedIn, []echo.MiddlewareFunc{requirePasswordChosen})
	admins := slices.Concat(user, []echo.MiddlewareFunc{requireRole(services.RoleAdmin)})
	// Every admin change of who may do what, or of what holds actions and
	// tells people (keys, users, roles, memberships, sessions, policies,
	// webhook endpoints), asks for the password again when it was given
	// more than accounts.ReauthAfter ago (web/reauth.go).
	recent := func(when func(echo.Context) bool) []echo.MiddlewareFunc {
		return slices.Concat(admins, []echo.MiddlewareFunc{requireRecentAuth(dash, d.Accounts, services.Now, when)})
	}
	saving := func(c echo.Context) bool { return c.FormValue("do") != "test" }        // trying a policy changes nothing
	confirmed := func(c echo.Context) bool { return c.FormValue("confirm") == "yes" } // the first step only asks

	signin := &signinPages{dashboard: dash, accounts: d.Accounts, absolute: d.Accounts.AbsoluteTimeout}
	e.GET("/signin", signin.form, session...)
	e.POST("/signin", signin.submit, session...)
	e.POST("/signout", signin.signOut, session...)
	if d.SSO != nil {
		// The callback is a GET from the provider: the state bound to this
		// browser's cookie stands in for the CSRF token (web/signin_sso.go).
		ssoSignIn := &ssoPages{signinPages: signin, sso: d.SSO, identity: d.Accounts, publicURL: d.PublicURL, log: d.Log}
		e.GET("/signin/sso", ssoSignIn.begin, session...)
		e.GET(ssoCallbackPath, ssoSignIn.callback, session...)
	}
	password := &passwordPages{dashboard: dash, accounts: d.Accounts}
	e.GET(changePasswordPath, password.form, signedIn...)
	e.POST(changePasswordPath, password.submit, signedIn...)
	sessions := &sessionPages{dashboard: dash, accounts: d.Accounts}
	e.GET("/account/sessions", sessions.list, user...)
	e.POST("/account/sessions/end-others", sessions.endOthers, user...)
	e.POST("/account/sessions/:id/end", sessions.end, user...)

	// Triage and the action list.
	triage := newTriagePages(dash, d)
	e.GET("/", triage.page, user...)
	e.GET("/triage/items", triage.items, user...)
	e.GET("/triage/events", triage.events, user...)
	e.GET("/actions", triage.list, user...)

	// One action: its record, timeline and decision panel.
	detail := newActionPages(dash, d)
	e.GET("/actions/:id", detail.page, user...)
	e.GET("/actions/:id/timeline", detail.timeline, user...)
	e.POST("/actions/:id/decisions", detail.decide, user...)

	// Limits across actions, freezes and breakers.
	if d.Limits != nil && d.Freezes != nil && d.Breakers != nil {
		brakes := &brakePages{dashboard: dash, limits: d.Limits, freezes: d.Freezes, breakers: d.Breakers}
		e.GET("/limits", brakes.limitsPage, user...)
		e.GET("/limits/:id/group", brakes.limitGroupPage, user...)
		e.GET("/freezes", brakes.freezesPage, user...)
		e.POST("/freezes", brakes.start, user...)
		e.POST("/freezes/:id/lift", brakes.lift, user...)
	}

	// Bulk decisions from triage and the action list: count, then decide.
	bulkSteps := newBulkPages(dash, d)
	e.POST("/decisions/preview", bulkSteps.preview, user...)
	e.POST("/decisions", bulkSteps.apply, user...)

	// Administration: namespaces, API keys, users.
	admin := newAdminPages(dash, d)
	e.GET("/admin", admin.index, admins...)
	e.GET("/admin/namespaces", admin.namespaces, admins...)
	e.POST("/admin/namespaces", admin.createNamespace, admins...)
	e.GET("/admin/keys", admin.keys, admins...)
	e.POST("/admin/keys", admin.createKey, recent(nil)...)
	e.POST("/admin/keys/:id/revoke", admin.revokeKey, recent(nil)...)
	e.GET("/admin/users", admin.users, admins...)
	e.POST("/admin/users", admin.createUser, recent(nil)...)
	e.POST("/admin/users/:id/role", admin.setRole, recent(nil)...)
	e.POST("/admin/users/:id/memberships", admin.grant, recent(nil)...)
	e.POST("/admin/users/:id/memberships/revoke", admin.revoke, recent(nil)...)
	e.POST("/admin/users/:id/disable", admin.disableUser, recent(nil)...)
	e.POST("/admin/users/:id/enable", admin.enableUser, recent(nil)...)
	e.POST("/admin/users/:id/end-sessions", admin.endSessions, recent(nil)...)

	// Webhook endpoints.
	hookPages := newWebhookPages(dash, d)
	e.GET("/admin/webhooks", hookPages.list, admins...)
	e.GET("/admin/webhooks/new", hookPages.newForm, admins...)
	e.POST("/admin/webhooks", hookPages.create, recent(nil)...)
	e.GET("/admin/webhooks/:id", hookPages.show, admins...)
	e.POST("/admin/webhooks/:id", hookPages.update, recent(nil)...)
	e.GET("/admin/webhooks/:id/deliveries", hookPages.deliveries, admins...)
	e.POST("/admin/webhooks/:id/rotate", hookPages.rotate, recent(nil)...)
	e.POST("/admin/webhooks/:id/test", hookPages.test, admins...)
	e.POST("/admin/webhooks/:id/delete", hookPages.delete, recent(confirmed)...)
	e.POST("/admin/deliveries/:id/redeliver", hookPages.redeliver, admins...)

	// The evidence log's Audit page.
	audit := &auditPages{dashboard: dash, log: d.Evidence, check: d.SelfCheck}
	e.GET("/admin/audit", audit.page, admins...)
	e.POST("/admin/audit/check", audit.checkNow, admins...)

	// Approval policies (tests may build a server without them).
	if d.Policies != nil {
		polPages := &policyPages{dashboard: dash, policies: d.Policies}
		e.GET("/admin/policies", polPages.list, admins...)
		e.POST("/admin/policies", polPages.create, recent(saving)...)
		e.GET("/admin/policies/:id", polPages.show, admins...)
		e.POST("/admin/policies/:id", polPages.update, recent(saving)...)
		e.POST("/admin/policies/:id/delete", polPages.delete, recent(nil)...)
	}
	return e
}

// securityHeaders sets the headers every answer carries. HSTS is sent on
// TLS, and always when the public URL is https: TLS is then usually
// terminated in front of Arbiter, which sees plain HTTP.
func securityHeaders(httpsPublic bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			h := c.Response().Header()
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("Referrer-Policy", "no-referrer")
			h.Set("Cache-Control", "no-store")
			h.Set("Content-Security-Policy", contentSecurityPolicy)
			h.Set("X-Frame-Options", "DENY")
			h.Set("Cross-Origin-Opener-Policy", "same-origin")
			if c.Request().TLS != nil || httpsPublic {
				h.Set("Strict-Transport-Security", "max-age=63072000; includeSubDomains")
			}
			return next(c)
		}
	}
}
