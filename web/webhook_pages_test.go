package web_test

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiter-ledger/arbiter/services/webhooks"

	"github.com/PuerkitoBio/goquery"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// The webhook pages: admins create endpoints, see the secret once, send test
// events, follow deliveries and their attempts, redeliver, edit, disable,
// rotate and delete. The env wires the webhook service without a dispatcher;
// tests that need deliveries sent run one.

// hookSink is a webhook receiver that records requests and answers status.
type hookSink struct {
	srv    *httptest.Server
	mu     sync.Mutex
	status int
	got    []*http.Request
	bodies [][]byte
}

func newHookSink(t *testing.T, status int) *hookSink {
	s := &hookSink{status: status}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.got, s.bodies = append(s.got, r), append(s.bodies, body)
		s.mu.Unlock()
		w.WriteHeader(s.status)
		io.WriteString(w, `{"received":"<b>yes</b>"}`)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *hookSink) requests() ([]*http.Request, [][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.got...), append([][]byte(nil), s.bodies...)
}

func (s *hookSink) wait(t *testing.T, n int) ([]*http.Request, [][]byte) {
	t.Helper()
	require.Eventually(t, func() bool { r, _ := s.requests(); return len(r) >= n }, 10*time.Second, 10*time.Millisecond)
	return s.requests()
}

// runDispatcher sends deliveries until the test ends.
func runDispatcher(t *testing.T, st *services.Store) {
	t.Helper()
	d := webhooks.NewDispatcher(st, slog.New(slog.DiscardHandler), webhooks.DispatcherConfig{
		Policy: webhooks.AddressPolicy{AllowPrivate: true}, Poll: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// htmxPost posts as htmx does: no form, the CSRF token in a header.
func (b *browser) htmxPost(path string) page {
	b.t.Helper()
	req, err := http.NewRequest("POST", b.e.srv.URL+path, nil)
	require.NoError(b.t, err)
	req.Header.Set("HX-Request", "true")
	req.Header.Set("X-CSRF-Token", b.csrf)
	return b.do(req)
}

// createWebhook submits the new-endpoint form and returns the page answering
// it.
func (b *browser) createWebhook(u string, events []record.EventType, namespaces, description string) page {
	b.t.Helper()
	b.get("/admin/webhooks/new")
	form := url.Values{"edit": {"settings"}, "url": {u}, "namespaces": {namespaces}, "format": {"standard"},
		"description": {description}}
	for _, ev := range events {
		form.Add("event_types", string(ev))
	}
	return b.post("/admin/webhooks", form)
}

func TestWebhookPagesAreForAdminsOnly(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		u := "http://127.0.0.1:9/hook"
		ep, err := webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{AllowPrivate: true}}).CreateEndpoint(context.Background(),
			services.Principal{Kind: "api_key", Name: "root", Role: services.RoleAdmin},
			webhooks.EndpointInput{URL: &u, EventTypes: &[]record.EventType{record.EventTimedOut}})
		require.NoError(t, err)
		gets := []string{"/admin/webhooks", "/admin/webhooks/new", "/admin/webhooks/" + ep.ID, "/admin/webhooks/" + ep.ID + "/deliveries"}
		posts := []string{"/admin/webhooks", "/admin/webhooks/" + ep.ID, "/admin/webhooks/" + ep.ID + "/rotate",
			"/admin/webhooks/" + ep.ID + "/test", "/admin/webhooks/" + ep.ID + "/delete", "/admin/deliveries/" + ep.ID + "/redeliver"}
		form := url.Values{"url": {u}, "event_types": {string(record.EventTimedOut)}, "enabled": {"false"}, "confirm": {"yes"}}
		for _, role := range []services.Role{services.RoleOperator, services.RoleViewer} {
			email := string(role) + "@example.com"
			b := e.browser()
			b.signIn(email, e.user(email, role))
			for _, path := range gets {
				p := b.get(path)
				require.Equal(t, http.StatusForbidden, p.status, "%s GET %s", role, path)
				require.Contains(t, p.testid("error-page").Text(), "may not do this")
			}
			for _, path := range posts {
				p := b.post(path, maps.Clone(form))
				require.Equal(t, http.StatusForbidden, p.status, "%s POST %s", role, path)
			}
		}
		agent := e.key("payments", "bot", services.RoleAgent)
		status, m := e.do("GET", "/v1/webhooks", agent, "")
		require.Equal(t, http.StatusForbidden, status)
		require.Equal(t, "forbidden", m["error"].(map[string]any)["code"])

		got, err := webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{}}).Endpoint(context.Background(),
			services.Principal{Kind: "api_key", Name: "root", Role: services.RoleAdmin}, ep.ID)
		require.NoError(t, err)
		require.True(t, got.Enabled, "nothing was changed")
	})
}

// TestWebhookPagesCreateTestAndRedeliver: the whole admin flow with a real
// receiver.
func TestWebhookPagesCreateTestAndRedeliver(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		b := e.admin("root@example.com")
		sink := newHookSink(t, http.StatusOK)

		p := b.get("/admin/webhooks")
		require.Equal(t, http.StatusOK, p.status)
		require.Equal(t, 1, p.testid("webhooks-empty").Length())
		require.Equal(t, "page", p.testid("admin-nav-webhooks").AttrOr("aria-current", ""))
		p = b.get("/admin/webhooks/new")
		require.Equal(t, http.StatusOK, p.status)
		require.Equal(t, 1, p.testid("webhook-form").Length())

		p = b.createWebhook(sink.srv.URL+"/hook", []record.EventType{record.EventTimedOut, record.EventDecided}, "payments, ops", hostile)
		require.Equal(t, http.StatusCreated, p.status, p.body)
		require.Equal(t, "no-store", p.header.Get("Cache-Control"))
		secret := p.testid("webhook-secret").AttrOr("value", "")
		require.Regexp(t, `^whsec_[A-Za-z0-9+/]{43}=$`, secret)
		require.Equal(t, sink.srv.URL+"/hook", p.testid("webhook-title-url").Text())
		require.Equal(t, "ops, payments", p.testid("webhook-settings").Find(`[data-testid="webhook-namespaces"]`).Text())
		require.Equal(t, hostile, strings.TrimSpace(p.testid("webhook-settings").Find(`[data-testid="webhook-description"]`).Text()))
		requireNoRawHostile(t, p)
		id := strings.TrimPrefix(p.doc.Find(`form[data-testid="webhook-edit-form"]`).AttrOr("action", ""), "/admin/webhooks/")
		require.NotEmpty(t, id)

		p = b.get("/admin/webhooks/" + id)
		require.Equal(t, http.StatusOK, p.status)
		require.Zero(t, p.testid("webhook-secret").Length(), "the secret is shown once")
		require.NotContains(t, p.body, secret)
		require.Equal(t, 1, p.testid("webhook-deliveries-empty").Length())

		p = b.get("/admin/webhooks")
		row := p.testid("webhook-row")
		require.Equal(t, 1, row.Length())
		require.Equal(t, sink.srv.URL+"/hook", row.Find(`[data-testid="webhook-url"]`).Text())
		require.Equal(t, "action.decidedaction.timed_out", row.Find(`[data-testid="webhook-events"]`).Text())
		require.Equal(t, "ops, payments", row.Find(`[data-testid="webhook-namespaces"]`).Text())
		require.Equal(t, "standard", row.Find(`[data-testid="webhook-format"]`).Text())
		require.Equal(t, "enabled", strings.TrimSpace(row.Find(`[data-testid="webhook-state"]`).Text()))
		require.Equal(t, "—", strings.TrimSpace(row.Find(`[data-testid="webhook-failing-since"]`).Text()))
		requireNoRawHostile(t, p)

		// Send a test event without JavaScript: a redirect to the deliveries.
		b.get("/admin/webhooks/" + id)
		p = b.post("/admin/webhooks/"+id+"/test", nil)
		require.Equal(t, http.StatusSeeOther, p.status)
		require.Equal(t, "/admin/webhooks/"+id+"#deliveries", p.header.Get("Location"))
		p = b.get("/admin/webhooks/" + id)
		require.Contains(t, p.testid("flash").Text(), "Queued a webhook.test message")
		d := p.testid("webhook-delivery")
		require.Equal(t, 1, d.Length())
		require.Equal(t, "pending", d.AttrOr("data-state", ""))
		require.Equal(t, string(record.EventTest), d.Find(`[data-testid="delivery-event"]`).Text())
		require.NotEmpty(t, p.testid("webhook-deliveries").AttrOr("hx-get", ""), "a pending delivery refreshes itself")

		runDispatcher(t, st)
		reqs, bodies := sink.wait(t, 1)
		wh, err := standardwebhooks.NewWebhook(secret)
		require.NoError(t, err)
		require.NoError(t, wh.Verify(bodies[0], reqs[0].Header), "the secret shown on the page verifies the message")
		webhookID := reqs[0].Header.Get("webhook-id")

		require.Eventually(t, func() bool {
			return b.get("/admin/webhooks/"+id).testid("webhook-delivery").AttrOr("data-state", "") == "succeeded"
		}, 10*time.Second, 20*time.Millisecond)
		p = b.get("/admin/webhooks/" + id)
		d = p.testid("webhook-delivery")
		require.Equal(t, webhookID, d.Find(`[data-testid="delivery-webhook-id"]`).Text())
		require.Empty(t, p.testid("webhook-deliveries").AttrOr("hx-get", ""), "nothing pending: no polling")
		attempt := d.Find(`[data-testid="delivery-attempt"]`)
		require.Equal(t, 1, attempt.Length())
		require.Equal(t, "200", attempt.Find(`[data-testid="attempt-status"]`).Text())
		require.Regexp(t, `^\d+ ms$`, attempt.Find(`[data-testid="attempt-latency"]`).Text())
		require.Equal(t, `{"received":"<b>yes</b>"}`, attempt.Find(`[data-testid="attempt-excerpt"]`).Text(), "the excerpt is shown as text")
		require.Empty(t, p.doc.Find("b").Nodes, "never as markup")
		require.Empty(t, strings.TrimSpace(attempt.Find(`[data-testid="attempt-error"]`).Text()))

		// Redeliver: a new delivery with the same webhook-id.
		deliveryID := d.AttrOr("data-id", "")
		p = b.post("/admin/deliveries/"+deliveryID+"/redeliver", nil)
		require.Equal(t, http.StatusSeeOther, p.status)
		require.Equal(t, "/admin/webhooks/"+id+"#deliveries", p.header.Get("Location"))
		reqs, _ = sink.wait(t, 2)
		require.Equal(t, webhookID, reqs[1].Header.Get("webhook-id"))
		p = b.get("/admin/webhooks/" + id)
		require.Contains(t, p.testid("flash").Text(), "Queued a redelivery of "+webhookID)
		ds := p.testid("webhook-delivery")
		require.Equal(t, 2, ds.Length())
		ds.Each(func(_ int, s *goquery.Selection) {
			require.Equal(t, webhookID, s.Find(`[data-testid="delivery-webhook-id"]`).Text())
		})

		// With htmx, the same controls answer the deliveries section alone.
		p = b.htmxPost("/admin/webhooks/" + id + "/test")
		require.Equal(t, http.StatusOK, p.status)
		require.NotContains(t, p.body, "<html")
		require.Contains(t, p.testid("webhook-notice").Text(), "Queued a webhook.test message")
		require.Equal(t, 3, p.testid("webhook-delivery").Length())
		p = b.htmxPost("/admin/deliveries/" + deliveryID + "/redeliver")
		require.Equal(t, http.StatusOK, p.status)
		require.Contains(t, p.testid("webhook-notice").Text(), "Queued a redelivery")
		require.Equal(t, 4, p.testid("webhook-delivery").Length())
		sink.wait(t, 4)
	})
}

// TestWebhookPageFailingEndpoint: a receiver that fails shows on the list as
// failing since the first failure, with the attempt's error on its page.
func TestWebhookPageFailingEndpoint(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		b := e.admin("root@example.com")
		sink := newHookSink(t, http.StatusInternalServerError)
		p := b.createWebhook(sink.srv.URL, []record.EventType{record.EventTimedOut}, "", "")
		require.Equal(t, http.StatusCreated, p.status, p.body)
		id := strings.TrimPrefix(p.doc.Find(`form[data-testid="webhook-edit-form"]`).AttrOr("action", ""), "/admin/webhooks/")
		p = b.post("/admin/webhooks/"+id+"/test", nil)
		require.Equal(t, http.StatusSeeOther, p.status)
		runDispatcher(t, st)
		sink.wait(t, 1)

		var row *goquery.Selection
		require.Eventually(t, func() bool {
			row = b.get("/admin/webhooks").testid("webhook-row")
			return row.Find(`[data-testid="webhook-failing-since"] time`).Length() == 1
		}, 10*time.Second, 20*time.Millisecond)
		require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`, row.Find(`[data-testid="webhook-failing-since"] time`).AttrOr("datetime", ""))
		require.Equal(t, "every namespace", row.Find(`[data-testid="webhook-namespaces"]`).Text())
		require.Equal(t, "failing", row.Find(`[data-testid="webhook-failing"]`).Text(), "not a green enabled while every delivery fails")
		require.Zero(t, row.Find(`.status-active`).Length())

		p = b.get("/admin/webhooks/" + id)
		d := p.testid("webhook-delivery")
		require.Equal(t, "pending", d.AttrOr("data-state", ""), "retried later")
		require.Equal(t, 1, d.Find(`[data-testid="delivery-next"] time`).Length())
		attempt := d.Find(`[data-testid="delivery-attempt"]`)
		require.Equal(t, "500", attempt.Find(`[data-testid="attempt-status"]`).Text())
		require.Equal(t, "receiver answered 500", strings.TrimSpace(attempt.Find(`[data-testid="attempt-error"]`).Text()))
	})
}

// TestWebhookPageRefusals: a refused form comes back with the message and
// what was typed.
func TestWebhookPageRefusals(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		b := e.admin("root@example.com")
		p := b.createWebhook("ftp://hooks.example.com/x", []record.EventType{record.EventTimedOut}, "payments", "kept")
		require.Equal(t, http.StatusBadRequest, p.status)
		require.Contains(t, p.testid("webhook-form-error").Text(), "http or https")
		require.Equal(t, "ftp://hooks.example.com/x", p.doc.Find(`#webhook-form-url`).AttrOr("value", ""))
		require.Equal(t, "payments", p.doc.Find(`#webhook-form-namespaces`).AttrOr("value", ""))
		require.Equal(t, "kept", p.doc.Find(`#webhook-form-description`).Text())
		_, checked := p.doc.Find(`input[name=event_types][value="action.timed_out"]`).Attr("checked")
		require.True(t, checked)

		p = b.createWebhook("https://hooks.example.com/x", nil, "", "")
		require.Equal(t, http.StatusBadRequest, p.status)
		require.Contains(t, p.testid("webhook-form-error").Text(), "Pick at least one event")

		p = b.createWebhook("https://hooks.example.com/x", []record.EventType{record.EventTimedOut}, "Not A Namespace", "")
		require.Equal(t, http.StatusBadRequest, p.status)
		require.Contains(t, p.testid("webhook-form-error").Text(), "namespace")

		p = b.get("/admin/webhooks")
		require.Equal(t, 1, p.testid("webhooks-empty").Length(), "nothing was created")
		p = b.get("/admin/webhooks/0193f2b0-1c2d-7e3f-8a4b-5c6d7e8f9a0b")
		require.Equal(t, http.StatusNotFound, p.status)
	})
}

// TestWebhookPageEditDisableRotateDelete: the controls of one endpoint.
func TestWebhookPageEditDisableRotateDelete(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		b := e.admin("root@example.com")
		p := b.createWebhook("http://127.0.0.1:9/hook", []record.EventType{record.EventTimedOut}, "", "old")
		require.Equal(t, http.StatusCreated, p.status, p.body)
		first := p.testid("webhook-secret").AttrOr("value", "")
		id := strings.TrimPrefix(p.doc.Find(`form[data-testid="webhook-edit-form"]`).AttrOr("action", ""), "/admin/webhooks/")
		path := "/admin/webhooks/" + id

		p = b.post(path, url.Values{"edit": {"settings"}, "url": {"http://127.0.0.1:9/other"},
			"event_types": {string(record.EventFailed), string(record.EventDecided)}, "namespaces": {"payments"},
			"format": {"slack"}, "description": {"on-call"}})
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		p = b.get(path)
		require.Contains(t, p.testid("flash").Text(), "Saved")
		s := p.testid("webhook-settings")
		require.Equal(t, "http://127.0.0.1:9/other", s.Find(`[data-testid="webhook-url"]`).Text())
		require.Equal(t, "action.decidedaction.failed", s.Find(`[data-testid="webhook-events"]`).Text())
		require.Equal(t, "payments", s.Find(`[data-testid="webhook-namespaces"]`).Text())
		require.Equal(t, "slack", s.Find(`[data-testid="webhook-format"]`).Text())
		require.Equal(t, "on-call", strings.TrimSpace(s.Find(`[data-testid="webhook-description"]`).Text()))
		require.Equal(t, "slack", p.doc.Find(`#webhook-edit-form-format option[selected]`).AttrOr("value", ""), "the form shows the settings")

		p = b.post(path, url.Values{"edit": {"settings"}, "url": {"http://127.0.0.1:9/other"}, "format": {"slack"}})
		require.Equal(t, http.StatusBadRequest, p.status)
		require.Contains(t, p.testid("webhook-edit-form-error").Text(), "Pick at least one event")
		_, open := p.testid("webhook-edit").Attr("open")
		require.True(t, open, "a refused edit opens the form")

		b.get(path)
		p = b.post(path, url.Values{"enabled": {"false"}})
		require.Equal(t, http.StatusSeeOther, p.status)
		p = b.get(path)
		state := p.testid("webhook-settings").Find(`[data-testid="webhook-state"]`)
		require.Contains(t, state.Text(), "disabled")
		require.Equal(t, "disabled by an admin", state.Find(`[data-testid="webhook-disabled-reason"]`).Text())
		require.Equal(t, 1, p.testid("webhook-enable").Length())
		require.Equal(t, "disabled by an admin", b.get("/admin/webhooks").testid("webhook-disabled-reason").Text())
		b.get(path)
		p = b.post(path, url.Values{"enabled": {"true"}})
		require.Equal(t, http.StatusSeeOther, p.status)
		p = b.get(path)
		require.Equal(t, "enabled", strings.TrimSpace(p.testid("webhook-settings").Find(`[data-testid="webhook-state"]`).Text()))
		require.Equal(t, "slack", p.testid("webhook-settings").Find(`[data-testid="webhook-format"]`).Text(), "switching kept the settings")

		p = b.post(path+"/rotate", nil)
		require.Equal(t, http.StatusOK, p.status)
		require.Equal(t, "no-store", p.header.Get("Cache-Control"))
		rotated := p.testid("webhook-secret").AttrOr("value", "")
		require.Regexp(t, `^whsec_`, rotated)
		require.NotEqual(t, first, rotated)
		require.Contains(t, p.testid("webhook-secret-panel").Text(), "24 hours")
		p = b.get(path)
		require.Zero(t, p.testid("webhook-secret").Length())
		require.NotContains(t, p.body, rotated)

		p = b.post(path+"/delete", nil)
		require.Equal(t, http.StatusOK, p.status, "first a confirmation page")
		require.Equal(t, "http://127.0.0.1:9/other", p.testid("webhook-delete-confirm").Find(`[data-testid="webhook-url"]`).Text())
		require.Equal(t, http.StatusOK, b.get(path).status, "not deleted yet")
		b.post(path+"/delete", nil)
		p = b.post(path+"/delete", url.Values{"confirm": {"yes"}})
		require.Equal(t, http.StatusSeeOther, p.status)
		require.Equal(t, "/admin/webhooks", p.header.Get("Location"))
		p = b.get("/admin/webhooks")
		require.Contains(t, p.testid("flash").Text(), "Deleted")
		require.Equal(t, 1, p.testid("webhooks-empty").Length())
		require.Equal(t, http.StatusNotFound, b.get(path).status)
	})
}
