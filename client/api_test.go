package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/client"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

func TestEntriesRoundTrip(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		c := e.agent("payments")
		ctx := context.Background()

		intent := client.Entry{Key: "refund:order-1", Type: client.TypeIntent, Tool: client.Ptr("payments.refund"),
			Effect: client.Ptr(client.EffectKeyed), Params: json.RawMessage(`{"order":"1","amount":1999}`),
			Timeout: client.Ptr(60.0), Reference: client.Ptr("order 1"), RunID: client.Ptr("run-7")}
		res, err := c.Submit(ctx, intent)
		require.NoError(t, err)
		assert.Equal(t, client.OutcomeProceed, res.Outcome)
		assert.Equal(t, 1, res.AttemptNumber())
		require.NotNil(t, res.LeaseUntil)
		assert.WithinDuration(t, time.Now().Add(time.Minute), *res.LeaseUntil, 10*time.Second)
		a := res.Action
		require.NotNil(t, a)
		assert.Equal(t, "payments", a.Namespace)
		assert.Equal(t, "refund:order-1", a.Key)
		assert.Equal(t, "payments.refund", a.Tool)
		assert.Equal(t, client.EffectKeyed, a.Effect)
		assert.Equal(t, client.StatusInProgress, a.Status)
		assert.Equal(t, 1, a.Attempt)
		assert.Equal(t, 1, a.Version)
		assert.Equal(t, "order 1", *a.Reference)
		assert.Equal(t, "agent-payments", *a.Agent)
		assert.JSONEq(t, `{"order":"1","amount":1999}`, string(a.Params))
		assert.Nil(t, res.Err())

		// in_progress is answered 409 but is an outcome, not an error.
		res, err = c.Submit(ctx, intent)
		require.NoError(t, err)
		assert.Equal(t, client.OutcomeInProgress, res.Outcome)

		res, err = c.Submit(ctx, client.Entry{Key: "refund:order-1", Type: client.TypeHeartbeat, Attempt: client.Ptr(1)})
		require.NoError(t, err)
		assert.Equal(t, client.OutcomeRecorded, res.Outcome)

		done := client.Entry{Key: "refund:order-1", Type: client.TypeSucceeded, Attempt: client.Ptr(1),
			Result: json.RawMessage(`{"refund":"re_1"}`), ExternalRef: client.Ptr("re_1")}
		res, err = c.Submit(ctx, done)
		require.NoError(t, err)
		assert.Equal(t, client.OutcomeRecorded, res.Outcome)
		assert.Equal(t, client.StatusSucceeded, res.Action.Status)
		res, err = c.Submit(ctx, done)
		require.NoError(t, err)
		assert.Equal(t, client.OutcomeDuplicate, res.Outcome)

		res, err = c.Submit(ctx, intent)
		require.NoError(t, err)
		assert.Equal(t, client.OutcomeReplay, res.Outcome)
		assert.JSONEq(t, `{"refund":"re_1"}`, string(res.Action.Result))
		assert.Equal(t, "re_1", *res.Action.ExternalRef)

		// A rejected entry is an *Error with the code and the status, and
		// the result still shows the stored action.
		other := intent
		other.Params = json.RawMessage(`{"order":"1","amount":5000}`)
		res, err = c.Submit(ctx, other)
		var apiErr *client.Error
		require.ErrorAs(t, err, &apiErr)
		assert.Equal(t, "key_reused", apiErr.Code)
		assert.Equal(t, http.StatusUnprocessableEntity, apiErr.StatusCode)
		assert.NotEmpty(t, apiErr.Message)
		assert.True(t, client.IsCode(err, "key_reused"))
		assert.False(t, client.IsUnavailable(err))
		require.NotNil(t, res)
		assert.Equal(t, client.OutcomeRejected, res.Outcome)
		assert.JSONEq(t, `{"order":"1","amount":1999}`, string(res.Action.Params))

		_, err = c.Submit(ctx, client.Entry{Key: "never-seen", Type: client.TypeSucceeded, Attempt: client.Ptr(1)})
		assert.True(t, client.IsCode(err, "not_found"), "%v", err)

		// A batch answers each entry on its own; a rejected one is not an
		// error of the request.
		results, err := c.SubmitBatch(ctx, []client.Entry{
			{Key: "email:1", Type: client.TypeIntent, Tool: client.Ptr("email.send")},
			{Key: "email:1", Type: "shout"},
			{Key: "email:1", Type: client.TypeNote, Message: client.Ptr("queued")},
		})
		require.NoError(t, err)
		require.Len(t, results, 3)
		assert.Equal(t, client.OutcomeProceed, results[0].Outcome)
		assert.Equal(t, client.OutcomeRejected, results[1].Outcome)
		assert.True(t, client.IsCode(results[1].Err(), "invalid"))
		assert.Equal(t, 0, results[1].Error.StatusCode)
		assert.Equal(t, client.OutcomeRecorded, results[2].Outcome)

		// A request that fails as a whole is an error, not a result.
		reader := e.client(e.key("payments", "auditor", services.RoleReader))
		_, err = reader.Submit(ctx, intent)
		require.ErrorAs(t, err, &apiErr)
		assert.Equal(t, "forbidden", apiErr.Code)
		assert.Equal(t, http.StatusForbidden, apiErr.StatusCode)
		_, err = reader.SubmitBatch(ctx, []client.Entry{intent})
		assert.True(t, client.IsCode(err, "forbidden"), "%v", err)
		_, err = e.client("ak_not_a_key").Submit(ctx, intent)
		require.ErrorAs(t, err, &apiErr)
		assert.Equal(t, "unauthorized", apiErr.Code)
		assert.Equal(t, http.StatusUnauthorized, apiErr.StatusCode)
	})
}

func TestActionsAndDecisionsRoundTrip(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		ctx := context.Background()
		agent := e.agent("payments")
		op := e.operator("payments")
		admin := e.client(e.key("", "root", services.RoleAdmin))
		foreign := e.agent("support")

		start := time.Now().Add(-time.Second)
		for _, k := range []string{"a", "b", "c"} {
			_, err := agent.Submit(ctx, client.Entry{Key: "refund:" + k, Type: client.TypeIntent, Tool: client.Ptr("payments.refund"), Reference: client.Ptr("ref-" + k)})
			require.NoError(t, err)
		}
		_, err := agent.Submit(ctx, client.Entry{Key: "email:a", Type: client.TypeIntent, Tool: client.Ptr("email.send"), Agent: client.Ptr("mailer")})
		require.NoError(t, err)
		_, err = foreign.Submit(ctx, client.Entry{Key: "refund:a", Type: client.TypeIntent, Tool: client.Ptr("support.ticket")})
		require.NoError(t, err)

		a, err := agent.ActionByKey(ctx, "refund:b")
		require.NoError(t, err)
		assert.Equal(t, "refund:b", a.Key)
		got, err := op.Action(ctx, a.ID)
		require.NoError(t, err)
		assert.Equal(t, a.ID, got.ID)
		assert.Equal(t, a.CreatedAt, got.CreatedAt)

		byAdmin, err := admin.ActionByKeyIn(ctx, "support", "refund:a")
		require.NoError(t, err)
		assert.Equal(t, "support.ticket", byAdmin.Tool)
		_, err = admin.ActionByKey(ctx, "refund:a")
		assert.True(t, client.IsCode(err, "invalid"), "an admin must name the namespace: %v", err)
		_, err = foreign.Action(ctx, a.ID)
		var apiErr *client.Error
		require.ErrorAs(t, err, &apiErr)
		assert.Equal(t, "not_found", apiErr.Code)
		assert.Equal(t, http.StatusNotFound, apiErr.StatusCode)

		// Lists: filters and keyset pagination.
		page, err := agent.ListActions(ctx, client.ListOptions{Tool: "payments.refund", Limit: 2})
		require.NoError(t, err)
		require.Len(t, page.Actions, 2)
		assert.Equal(t, "refund:c", page.Actions[0].Key, "newest first")
		require.NotEmpty(t, page.NextCursor)
		page, err = agent.ListActions(ctx, client.ListOptions{Tool: "payments.refund", Limit: 2, Cursor: page.NextCursor})
		require.NoError(t, err)
		require.Len(t, page.Actions, 1)
		assert.Equal(t, "refund:a", page.Actions[0].Key)
		assert.Empty(t, page.NextCursor)

		page, err = agent.ListActions(ctx, client.ListOptions{Agent: "mailer"})
		require.NoError(t, err)
		require.Len(t, page.Actions, 1)
		assert.Equal(t, "email:a", page.Actions[0].Key)
		page, err = agent.ListActions(ctx, client.ListOptions{Q: "ref-b"})
		require.NoError(t, err)
		require.Len(t, page.Actions, 1)
		assert.Equal(t, "refund:b", page.Actions[0].Key)
		page, err = agent.ListActions(ctx, client.ListOptions{Status: []client.Status{client.StatusInProgress, client.StatusTimedOut},
			Since: start, Until: time.Now().Add(time.Minute)})
		require.NoError(t, err)
		assert.Len(t, page.Actions, 4, "the agent sees its own namespace only")
		page, err = agent.ListActions(ctx, client.ListOptions{Until: start})
		require.NoError(t, err)
		assert.Empty(t, page.Actions)
		page, err = admin.ListActions(ctx, client.ListOptions{Namespace: "support"})
		require.NoError(t, err)
		require.Len(t, page.Actions, 1)
		assert.Equal(t, "support", page.Actions[0].Namespace)
		_, err = agent.ListActions(ctx, client.ListOptions{Status: []client.Status{"lost"}})
		assert.True(t, client.IsCode(err, "invalid"), "%v", err)

		// Decisions.
		res, err := op.Decide(ctx, a.ID, client.Decision{Decision: client.DecisionConfirm, Reason: "seen in the PSP dashboard",
			ExpectedVersion: client.Ptr(a.Version), ExternalRef: client.Ptr("re_9"), Result: json.RawMessage(`{"refund":"re_9"}`)})
		require.NoError(t, err)
		assert.Equal(t, client.StatusConfirmed, res.Action.Status)
		assert.Equal(t, "re_9", *res.Action.ExternalRef)
		assert.Equal(t, "decision", res.Entry.Type)
		assert.Equal(t, client.Actor{Kind: "operator", Name: "oncall-payments@example.com", Via: "api_key:oncall-payments"}, res.Entry.Actor)
		assert.JSONEq(t, `{"decision":"confirm","reason":"seen in the PSP dashboard","expected_version":1,"external_ref":"re_9","result":{"refund":"re_9"},"via":"api_key:oncall-payments"}`, string(res.Entry.Payload))

		_, err = op.Decide(ctx, a.ID, client.Decision{Decision: client.DecisionAbandon, Reason: "late", ExpectedVersion: client.Ptr(a.Version)})
		require.ErrorAs(t, err, &apiErr)
		assert.Equal(t, "version_conflict", apiErr.Code)
		assert.Equal(t, http.StatusConflict, apiErr.StatusCode)
		_, err = op.Decide(ctx, a.ID, client.Decision{Decision: client.DecisionRetry, Reason: "again"})
		assert.True(t, client.IsCode(err, "invalid_transition"), "%v", err)
		_, err = agent.Decide(ctx, a.ID, client.Decision{Decision: client.DecisionAbandon, Reason: "agents do not decide"})
		assert.True(t, client.IsCode(err, "forbidden"), "%v", err)
		_, err = op.Decide(ctx, "", client.Decision{Decision: client.DecisionAbandon, Reason: "no id"})
		assert.True(t, client.IsCode(err, "invalid"), "%v", err)

		entries, err := op.Entries(ctx, a.ID)
		require.NoError(t, err)
		require.Len(t, entries, 2)
		assert.Equal(t, "intent", entries[0].Type)
		assert.Equal(t, 1, entries[0].Seq)
		assert.Equal(t, client.Actor{Kind: "agent", Name: "agent-payments"}, entries[0].Actor)
		require.NotNil(t, entries[0].Attempt)
		assert.Equal(t, 1, *entries[0].Attempt)
		assert.Equal(t, "decision", entries[1].Type)
		assert.False(t, entries[1].RecordedAt.IsZero())
		_, err = foreign.Entries(ctx, a.ID)
		assert.True(t, client.IsCode(err, "not_found"), "%v", err)
	})
}

func TestWebhooksRoundTrip(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		ctx := context.Background()
		admin := e.client(e.key("", "root", services.RoleAdmin))

		created, err := admin.CreateWebhook(ctx, client.WebhookInput{URL: "http://127.0.0.1:9/hook",
			EventTypes: []string{"action.timed_out", "action.decided"}, Namespaces: &[]string{"payments"},
			Description: client.Ptr("on-call")})
		require.NoError(t, err)
		assert.NotEmpty(t, created.ID)
		assert.Regexp(t, `^whsec_`, created.Secret)
		assert.Equal(t, []string{"action.decided", "action.timed_out"}, created.EventTypes)
		assert.Equal(t, []string{"payments"}, created.Namespaces)
		assert.Equal(t, "standard", created.Format)
		assert.Equal(t, "on-call", created.Description)
		assert.True(t, created.Enabled)

		list, err := admin.Webhooks(ctx)
		require.NoError(t, err)
		require.Len(t, list, 1)
		assert.Equal(t, created.ID, list[0].ID)
		assert.Empty(t, list[0].Secret, "the secret is shown at creation only")

		got, err := admin.Webhook(ctx, created.ID)
		require.NoError(t, err)
		assert.Equal(t, "http://127.0.0.1:9/hook", got.URL)

		updated, err := admin.UpdateWebhook(ctx, created.ID, client.WebhookInput{Description: client.Ptr(""),
			Namespaces: &[]string{}, Enabled: client.Ptr(false), Format: "slack"})
		require.NoError(t, err)
		assert.Empty(t, updated.Description)
		assert.Empty(t, updated.Namespaces)
		assert.False(t, updated.Enabled)
		assert.NotNil(t, updated.DisabledReason)
		assert.Equal(t, "slack", updated.Format)
		assert.Equal(t, []string{"action.decided", "action.timed_out"}, updated.EventTypes, "fields not sent stay")

		rotated, err := admin.RotateWebhookSecret(ctx, created.ID)
		require.NoError(t, err)
		assert.Regexp(t, `^whsec_`, rotated.Secret)
		assert.NotEqual(t, created.Secret, rotated.Secret)

		d, err := admin.TestWebhook(ctx, created.ID)
		require.NoError(t, err)
		assert.Equal(t, "webhook.test", d.EventType)
		assert.Equal(t, created.ID, d.EndpointID)
		assert.Equal(t, "msg_"+d.MessageID, d.WebhookID)
		assert.Nil(t, d.ActionID)

		again, err := admin.Redeliver(ctx, d.ID)
		require.NoError(t, err)
		assert.NotEqual(t, d.ID, again.ID)
		assert.Equal(t, d.WebhookID, again.WebhookID, "a redelivery keeps the webhook-id")

		ds, err := admin.WebhookDeliveries(ctx, created.ID, 0)
		require.NoError(t, err)
		require.Len(t, ds, 2)
		ds, err = admin.WebhookDeliveries(ctx, created.ID, 1)
		require.NoError(t, err)
		require.Len(t, ds, 1)
		_, err = admin.WebhookDeliveries(ctx, created.ID, 1000)
		assert.True(t, client.IsCode(err, "invalid"), "%v", err)

		_, err = admin.CreateWebhook(ctx, client.WebhookInput{URL: "ftp://example.com", EventTypes: []string{"action.decided"}})
		assert.True(t, client.IsCode(err, "invalid"), "%v", err)
		_, err = e.operator("payments").Webhooks(ctx)
		assert.True(t, client.IsCode(err, "forbidden"), "%v", err)

		require.NoError(t, admin.DeleteWebhook(ctx, created.ID))
		_, err = admin.Webhook(ctx, created.ID)
		assert.True(t, client.IsCode(err, "not_found"), "%v", err)
		assert.True(t, client.IsCode(admin.DeleteWebhook(ctx, created.ID), "not_found"))
	})
}

func TestHealthReadyMetricsOpenAPI(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		ctx := context.Background()
		c := client.New(e.URL(), "")
		require.NoError(t, c.Health(ctx))
		require.NoError(t, c.Ready(ctx))
		m, err := c.Metrics(ctx)
		require.NoError(t, err)
		assert.Contains(t, string(m), "# HELP")
		doc, err := c.OpenAPI(ctx)
		require.NoError(t, err)
		var d struct {
			OpenAPI string `json:"openapi"`
		}
		require.NoError(t, json.Unmarshal(doc, &d))
		assert.Regexp(t, `^3\.1`, d.OpenAPI)
	})
}

func TestErrorsTellUnavailableFromRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// Nothing listens: a network error.
	dead := client.New("http://127.0.0.1:1", "ak_x")
	_, err := dead.Action(ctx, "0193f1a2-7c4e-7b1a-9d2e-5f6a7b8c9d0e")
	var ne *client.NetworkError
	require.ErrorAs(t, err, &ne)
	assert.True(t, client.IsUnavailable(err))
	assert.Equal(t, "/v1/actions/0193f1a2-7c4e-7b1a-9d2e-5f6a7b8c9d0e", ne.Path)

	// The caller's own cancellation is not Arbiter being unavailable.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = dead.Action(cancelled, "x")
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, client.IsUnavailable(err))

	// 503 with Arbiter's body, and a proxy's 502 without it.
	srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"unavailable","message":"the database is unavailable"}}`))
			return
		}
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte(`<html>bad gateway</html>`))
	})
	c := client.New(srv, "ak_x")
	err = c.Ready(ctx)
	var apiErr *client.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, client.Error{StatusCode: 503, Code: "unavailable", Message: "the database is unavailable"}, *apiErr)
	assert.True(t, client.IsUnavailable(err))
	_, err = c.Submit(ctx, client.Entry{Key: "k", Type: client.TypeNote, Message: client.Ptr("m")})
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, 502, apiErr.StatusCode)
	assert.Equal(t, "unavailable", apiErr.Code)
	assert.Contains(t, apiErr.Message, "bad gateway")
	assert.True(t, client.IsUnavailable(err))
	assert.False(t, client.IsUnavailable(errors.New("other")))
}
