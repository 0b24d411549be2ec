package views

import (
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/arbiter-ledger/arbiter/services/webhooks"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// WebhooksView is the list of webhook endpoints.
type WebhooksView struct {
	Endpoints []*webhooks.Endpoint
	Now       time.Time
}

// WebhookForm is the endpoint form as shown or as submitted, kept when it is
// refused.
type WebhookForm struct {
	URL         string
	Events      []string
	Namespaces  string // as typed: names separated by commas or spaces
	Format      string
	Description string
	Error       string
}

// WebhookFormFor fills the form with an endpoint's settings.
func WebhookFormFor(ep *webhooks.Endpoint) WebhookForm {
	return WebhookForm{URL: ep.URL, Events: eventNames(ep.EventTypes), Namespaces: strings.Join(ep.Namespaces, ", "),
		Format: ep.Format, Description: ep.Description}
}

// WebhookView is one endpoint's page: its settings, the edit form and its
// deliveries.
type WebhookView struct {
	Endpoint   *webhooks.Endpoint
	Deliveries []*webhooks.Delivery
	Form       WebhookForm
	Now        time.Time
	CSRF       string
	// Secret is set only on the answer to creation or rotation: it is never
	// shown again.
	Secret string
	// Created tells a new endpoint's secret from a rotated one.
	Created bool
}

// WebhookDeliveriesView is the deliveries section, also sent alone to htmx.
type WebhookDeliveriesView struct {
	EndpointID string
	Deliveries []*webhooks.Delivery
	Now        time.Time
	CSRF       string
	// Notice confirms what htmx just did (a test sent, a redelivery queued).
	Notice string
}

// DeliveriesView is the page's deliveries section.
func (v WebhookView) DeliveriesView() WebhookDeliveriesView {
	return WebhookDeliveriesView{EndpointID: v.Endpoint.ID, Deliveries: v.Deliveries, Now: v.Now, CSRF: v.CSRF}
}

// pending reports whether any delivery is still on its way, so the section
// refreshes itself.
func (v WebhookDeliveriesView) pending() bool {
	return slices.ContainsFunc(v.Deliveries, func(d *webhooks.Delivery) bool { return d.State == webhooks.DeliveryPending })
}

// webhookEvents are the events an endpoint can subscribe to, with when each
// is sent. webhook.test is not among them: a test goes to any endpoint on
// request.
var webhookEvents = []struct {
	Value record.EventType
	Label string
}{
	{record.EventTimedOut, "an attempt or a compensation timed out: outcome unknown"},
	{record.EventDecided, "an operator decided"},
	{record.EventFailed, "an attempt failed and may not be retried"},
	{record.EventLateResult, "an outcome arrived after its lease"},
	{record.EventStaleOutcome, "an outcome arrived for an old attempt"},
	{record.EventKeyReused, "a key was reused with other tool or params"},
	{record.EventCompensated, "an effect was undone"},
	{record.EventApprovalRequested, "an intent is held for approval"},
	{record.EventApproved, "the last approval needed was given"},
	{record.EventApprovalEscalated, "an approval waited past its escalation time"},
	{record.EventApprovalExpired, "an approval expired: the action is denied"},
	{record.EventReconciled, "a lookup answered for a timed-out action"},
	{record.EventLimitExceeded, "a limit held or denied an intent"},
	{record.EventFreezeStarted, "a freeze started: by an operator, or by a breaker that tripped"},
	{record.EventFreezeLifted, "a freeze was lifted"},
	{record.EventAuditCheckpoint, "the evidence log signed a checkpoint (keep copies elsewhere)"},
	{record.EventAuditMismatch, "the self-check found entries changed after they were logged"},
}

func webhookPath(id string, what ...string) string {
	p := "/admin/webhooks/" + url.PathEscape(id)
	for _, w := range what {
		p += "/" + w
	}
	return p
}

func redeliverPath(id string) string { return "/admin/deliveries/" + url.PathEscape(id) + "/redeliver" }

func webhookActionPath(id string) string { return "/actions/" + url.PathEscape(id) }

func namespacesText(ns []string) string {
	if len(ns) == 0 {
		return "every namespace"
	}
	return strings.Join(ns, ", ")
}

func optionalCode(n *int) string {
	if n == nil {
		return "—"
	}
	return strconv.Itoa(*n)
}

func eventNames(evs []record.EventType) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = string(e)
	}
	return out
}

// urlInText finds the URLs in a delivery's error (Go's HTTP client names the
// endpoint's whole URL: `Post "https://…": …`).
var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)

// redactURLs keeps only the scheme and host of every URL in s: an
// endpoint's path and query may be its secret (a Slack incoming webhook, a
// token), and the action page is read by people who may not manage
// endpoints.
func redactURLs(s string) string {
	return urlInText.ReplaceAllStringFunc(s, func(raw string) string {
		if u, err := url.Parse(raw); err == nil && u.Scheme != "" && u.Host != "" {
			return u.Scheme + "://" + u.Host
		}
		scheme, rest, _ := strings.Cut(raw, "://")
		host, _, _ := strings.Cut(rest, "/")
		host, _, _ = strings.Cut(host, "?")
		host, _, _ = strings.Cut(host, "#")
		if _, h, ok := strings.Cut(host, "@"); ok {
			host = h
		}
		return scheme + "://" + host
	})
}

// shortID is the first eight characters of an id, enough to tell endpoints
// apart in a table.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
