package web

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/arbiter-ledger/arbiter/services/webhooks"

	"github.com/arbiter-ledger/arbiter/services/record"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/views"
)

// webhookPages serve the webhook endpoints for admins (the router puts
// requireRole(admin) in front of every route): the list, the form, one
// endpoint with its deliveries and attempts, and the controls. They use the
// same service as the /v1/webhooks API.
type webhookPages struct {
	*dashboard
	hooks webhookManager
}

func newWebhookPages(dash *dashboard, d Deps) *webhookPages {
	return &webhookPages{dashboard: dash, hooks: d.Webhooks}
}

// deliveriesShown is how many of an endpoint's newest deliveries its page
// lists.
const deliveriesShown = 50

func (h *webhookPages) list(c echo.Context) error {
	eps, err := h.hooks.Endpoints(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.Webhooks(h.pageFor(c, "Webhooks", "admin"),
		views.WebhooksView{Endpoints: eps, Now: time.Now()}))
}

func (h *webhookPages) newForm(c echo.Context) error {
	return render(c, http.StatusOK, views.WebhookNew(h.pageFor(c, "New webhook endpoint", "admin"),
		views.WebhookForm{Events: []string{string(record.EventTimedOut)}, Format: webhooks.FormatStandard}))
}

// webhookForm reads the endpoint form, as typed and as service input.
func webhookForm(c echo.Context) (views.WebhookForm, webhooks.EndpointInput, error) {
	params, err := c.FormParams()
	if err != nil {
		return views.WebhookForm{}, webhooks.EndpointInput{}, services.Errorf(services.CodeInvalid, "unreadable form: %v", err)
	}
	f := views.WebhookForm{URL: strings.TrimSpace(params.Get("url")), Events: params["event_types"],
		Namespaces: params.Get("namespaces"), Format: params.Get("format"), Description: strings.TrimSpace(params.Get("description"))}
	events := make([]record.EventType, len(f.Events))
	for i, e := range f.Events {
		events[i] = record.EventType(e)
	}
	namespaces := strings.FieldsFunc(f.Namespaces, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' })
	if namespaces == nil {
		namespaces = []string{}
	}
	in := webhooks.EndpointInput{URL: &f.URL, EventTypes: &events, Namespaces: &namespaces, Format: &f.Format, Description: &f.Description}
	return f, in, nil
}

// create answers with the endpoint's page itself, not a redirect: the secret
// exists only in this response, so it must never be cached or put in a
// cookie.
func (h *webhookPages) create(c echo.Context) error {
	f, in, err := webhookForm(c)
	if err != nil {
		return err
	}
	if len(*in.EventTypes) == 0 {
		f.Error = "Pick at least one event."
		return render(c, http.StatusBadRequest, views.WebhookNew(h.pageFor(c, "New webhook endpoint", "admin"), f))
	}
	ep, err := h.hooks.CreateEndpoint(c.Request().Context(), principal(c), in)
	if err != nil {
		return refused(c, err, func(status int, msg string) error {
			f.Error = msg
			return render(c, status, views.WebhookNew(h.pageFor(c, "New webhook endpoint", "admin"), f))
		})
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return h.showEndpoint(c, http.StatusCreated, ep, func(v *views.WebhookView) { v.Secret, v.Created = ep.Secret, true })
}

func (h *webhookPages) show(c echo.Context) error {
	ep, err := h.hooks.Endpoint(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	return h.showEndpoint(c, http.StatusOK, ep, nil)
}

// showEndpoint renders an endpoint's page with its deliveries; tune adds
// what this answer alone shows (a secret, a refused form).
func (h *webhookPages) showEndpoint(c echo.Context, status int, ep *webhooks.Endpoint, tune func(*views.WebhookView)) error {
	ds, err := h.hooks.EndpointDeliveries(c.Request().Context(), principal(c), ep.ID, deliveriesShown)
	if err != nil {
		return err
	}
	p := h.pageFor(c, "Webhook "+ep.URL, "admin")
	v := views.WebhookView{Endpoint: ep, Deliveries: ds, Form: views.WebhookFormFor(ep), Now: time.Now(), CSRF: p.CSRF}
	if tune != nil {
		tune(&v)
	}
	return render(c, status, views.Webhook(p, v))
}

// deliveries is the deliveries section alone, for htmx; without it, the
// endpoint's page.
func (h *webhookPages) deliveries(c echo.Context) error {
	id := c.Param("id")
	if !isHTMX(c) {
		return c.Redirect(http.StatusSeeOther, "/admin/webhooks/"+url.PathEscape(id)+"#deliveries")
	}
	return h.deliveriesFragment(c, id, "")
}

func (h *webhookPages) deliveriesFragment(c echo.Context, endpointID, notice string) error {
	ds, err := h.hooks.EndpointDeliveries(c.Request().Context(), principal(c), endpointID, deliveriesShown)
	if err != nil {
		return err
	}
	s, _ := currentSession(c)
	return render(c, http.StatusOK, views.WebhookDeliveries(views.WebhookDeliveriesView{
		EndpointID: endpointID, Deliveries: ds, Now: time.Now(), CSRF: s.CSRF, Notice: notice}))
}

// update saves the edit form (edit=settings: every setting it carries) or
// switches the endpoint on or off (enabled alone).
func (h *webhookPages) update(c echo.Context) error {
	ctx, id := c.Request().Context(), c.Param("id")
	var (
		in   webhooks.EndpointInput
		form views.WebhookForm
	)
	settings := c.FormValue("edit") == "settings"
	if settings {
		var err error
		if form, in, err = webhookForm(c); err != nil {
			return err
		}
	}
	switch c.FormValue("enabled") {
	case "true":
		in.Enabled = new(true)
	case "false":
		in.Enabled = new(false)
	}
	refuse := func(msg string, status int) error {
		ep, err := h.hooks.Endpoint(ctx, principal(c), id)
		if err != nil {
			return err
		}
		return h.showEndpoint(c, status, ep, func(v *views.WebhookView) {
			if settings {
				v.Form = form
			}
			v.Form.Error = msg
		})
	}
	if settings && len(*in.EventTypes) == 0 {
		return refuse("Pick at least one event.", http.StatusBadRequest)
	}
	ep, err := h.hooks.UpdateEndpoint(ctx, principal(c), id, in)
	if err != nil {
		return refused(c, err, func(status int, msg string) error { return refuse(msg, status) })
	}
	switch {
	case settings:
		h.cookies.flash(c, "Saved the endpoint's settings.")
	case in.Enabled != nil && *in.Enabled:
		h.cookies.flash(c, "Enabled the endpoint: waiting deliveries are sent now.")
	case in.Enabled != nil:
		h.cookies.flash(c, "Disabled the endpoint: nothing is sent to it until it is enabled again.")
	}
	return c.Redirect(http.StatusSeeOther, "/admin/webhooks/"+url.PathEscape(ep.ID))
}

// rotate answers with the page itself, showing the new secret once.
func (h *webhookPages) rotate(c echo.Context) error {
	ep, err := h.hooks.RotateSecret(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return h.showEndpoint(c, http.StatusOK, ep, func(v *views.WebhookView) { v.Secret = ep.Secret })
}

func (h *webhookPages) test(c echo.Context) error {
	id := c.Param("id")
	if _, err := h.hooks.SendTest(c.Request().Context(), principal(c), id); err != nil {
		return err
	}
	const notice = "Queued a webhook.test message; its delivery shows below within seconds."
	if isHTMX(c) {
		return h.deliveriesFragment(c, id, notice)
	}
	h.cookies.flash(c, notice)
	return c.Redirect(http.StatusSeeOther, "/admin/webhooks/"+url.PathEscape(id)+"#deliveries")
}

// delete asks first: without confirm=yes it answers the confirmation page.
func (h *webhookPages) delete(c echo.Context) error {
	ctx, id := c.Request().Context(), c.Param("id")
	ep, err := h.hooks.Endpoint(ctx, principal(c), id)
	if err != nil {
		return err
	}
	if c.FormValue("confirm") != "yes" {
		return render(c, http.StatusOK, views.WebhookDelete(h.pageFor(c, "Delete webhook endpoint", "admin"), ep))
	}
	if err := h.hooks.DeleteEndpoint(ctx, principal(c), id); err != nil {
		return err
	}
	h.cookies.flash(c, "Deleted the endpoint "+ep.URL+" with its deliveries.")
	return c.Redirect(http.StatusSeeOther, "/admin/webhooks")
}

func (h *webhookPages) redeliver(c echo.Context) error {
	d, err := h.hooks.Redeliver(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	notice := "Queued a redelivery of " + d.WebhookID + " (same webhook-id)."
	if isHTMX(c) {
		return h.deliveriesFragment(c, d.EndpointID, notice)
	}
	h.cookies.flash(c, notice)
	return c.Redirect(http.StatusSeeOther, "/admin/webhooks/"+url.PathEscape(d.EndpointID)+"#deliveries")
}
