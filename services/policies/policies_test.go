package policies_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/policies"
	"github.com/arbiter-ledger/arbiter/services/record"
)

var admin = services.Principal{Kind: "api_key", ID: "admin", Name: "root", Role: services.RoleAdmin}

var seq atomic.Int64

type env struct {
	st     *services.Store
	pol    *policies.Service
	l      *services.Ledger
	ns     string
	agent  services.Principal
	reader services.Principal
}

func newEnv(t *testing.T, st *services.Store) *env {
	t.Helper()
	ctx := context.Background()
	pol := policies.New(st)
	e := &env{st: st, pol: pol, l: services.NewLedger(st, services.LedgerConfig{Approver: pol}), ns: fmt.Sprintf("pol-%d", seq.Add(1))}
	keys := accounts.NewKeys(st)
	for _, k := range []struct {
		role services.Role
		p    *services.Principal
	}{{services.RoleAgent, &e.agent}, {services.RoleReader, &e.reader}} {
		_, secret, err := keys.CreateKey(ctx, accounts.CreateKeyRequest{Namespace: e.ns, Name: string(k.role) + "-bot", Role: k.role})
		require.NoError(t, err)
		*k.p, err = keys.Authenticate(ctx, secret)
		require.NoError(t, err)
	}
	return e
}

func ptr[T any](v T) *T { return &v }

func (e *env) create(t *testing.T, in policies.Input) *policies.Policy {
	t.Helper()
	in.Namespace = &e.ns
	p, err := e.pol.Create(context.Background(), admin, in)
	require.NoError(t, err)
	return p
}

func (e *env) intent(t *testing.T, key, tool, params string) services.EntryResult {
	t.Helper()
	res, err := e.l.Submit(context.Background(), e.agent, [][]byte{[]byte(fmt.Sprintf(
		`{"key":%q,"type":"intent","tool":%q,"effect":"keyed","params":%s}`, key, tool, params))})
	require.NoError(t, err)
	return res[0]
}

func TestPoliciesHoldWhatTheyCatch(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		large := e.create(t, policies.Input{Name: ptr("large refunds"), Tools: &[]string{"payments.*"},
			Condition: ptr(`params.amount > 100000`), ApprovalsRequired: ptr(2), ExpiresAfter: ptr(3600), EscalateAfter: ptr(600)})
		require.Equal(t, 1, large.Version)
		require.True(t, large.Enabled)
		e.create(t, policies.Input{Name: ptr("every deletion"), Tools: &[]string{"*.delete"}})

		// Tools that match no pattern, and conditions that are false, run.
		require.Equal(t, record.OutcomeProceed, e.intent(t, "small", "payments.refund", `{"amount":500}`).Outcome)
		require.Equal(t, record.OutcomeProceed, e.intent(t, "mail", "email.send", `{"amount":900000}`).Outcome)

		res := e.intent(t, "big", "payments.refund", `{"amount":250000}`)
		require.Equal(t, record.OutcomePendingApproval, res.Outcome)
		ap := res.Action.Approval
		require.Equal(t, 2, ap.Required)
		require.Equal(t, []record.PolicyRef{{ID: large.ID, Name: "large refunds", Version: 1}}, ap.Policies)
		require.NotNil(t, ap.EscalateAt)
		require.Equal(t, 10*time.Minute, ap.EscalateAt.Sub(res.Action.CreatedAt))
		require.Equal(t, time.Hour, ap.ExpiresAt.Sub(res.Action.CreatedAt))

		// An empty condition catches every intent of its tools.
		del := e.intent(t, "del", "crm.delete", `{}`)
		require.Equal(t, record.OutcomePendingApproval, del.Outcome)
		require.Equal(t, 1, del.Action.Approval.Required)
		require.Equal(t, 24*time.Hour, del.Action.Approval.ExpiresAt.Sub(del.Action.CreatedAt))

		// A condition that fails at run time (no "amount") holds: fail closed,
		// with the error in the intent's entry.
		res = e.intent(t, "odd", "payments.charge", `{"currency":"EUR"}`)
		require.Equal(t, record.OutcomePendingApproval, res.Outcome)
		es, err := e.l.Entries(context.Background(), e.agent, res.Action.ID)
		require.NoError(t, err)
		p, err := record.DecodePayload(es[0])
		require.NoError(t, err)
		require.Contains(t, p.(*record.IntentPayload).Approval.Error, "large refunds")

		// Editing the policy does not change the requirement of an action
		// already waiting; new first intents get the new version.
		edited, err := e.pol.Update(context.Background(), admin, large.ID, policies.Input{ApprovalsRequired: ptr(3)})
		require.NoError(t, err)
		require.Equal(t, 2, edited.Version)
		waiting, err := e.l.ActionByKey(context.Background(), e.agent, "", "big")
		require.NoError(t, err)
		require.Equal(t, 2, waiting.Approval.Required)
		require.Equal(t, 1, waiting.Approval.Policies[0].Version)
		res = e.intent(t, "bigger", "payments.refund", `{"amount":300000}`)
		require.Equal(t, 3, res.Action.Approval.Required)
		require.Equal(t, 2, res.Action.Approval.Policies[0].Version)

		// Disabled, then deleted: no longer applies; versions stay readable.
		_, err = e.pol.Update(context.Background(), admin, large.ID, policies.Input{Enabled: ptr(false)})
		require.NoError(t, err)
		require.Equal(t, record.OutcomeProceed, e.intent(t, "after-disable", "payments.refund", `{"amount":300000}`).Outcome)
		require.NoError(t, e.pol.Delete(context.Background(), admin, large.ID))
		_, err = e.pol.Get(context.Background(), admin, large.ID)
		require.ErrorIs(t, err, services.ErrNotFound)
		vs, err := e.pol.Versions(context.Background(), e.reader, large.ID)
		require.NoError(t, err)
		require.Len(t, vs, 3)
		require.Equal(t, 2, vs[0].ApprovalsRequired)
		require.Equal(t, 3, vs[1].ApprovalsRequired)
		require.False(t, vs[2].Enabled)

		// Readers see their namespace's policies; only admins change them.
		list, err := e.pol.List(context.Background(), e.reader, "")
		require.NoError(t, err)
		require.Len(t, list, 1)
		_, err = e.pol.Create(context.Background(), e.reader, policies.Input{Name: ptr("x"), Namespace: &e.ns, Tools: &[]string{"*"}})
		require.ErrorIs(t, err, services.ErrForbidden)

		// What a rule would have caught among recent first intents.
		_, err = e.pol.Test(context.Background(), e.reader, policies.TestInput{Namespace: e.ns, Tools: []string{"*"}})
		require.ErrorIs(t, err, services.ErrForbidden, "only admins test policies")
		tr, err := e.pol.Test(context.Background(), admin, policies.TestInput{Namespace: e.ns,
			Tools: []string{"payments.*"}, Condition: `params.amount > 100000`})
		require.NoError(t, err)
		require.Equal(t, 7, tr.Examined)
		require.Equal(t, 4, tr.Matched, "big, bigger, after-disable, and odd (fails: counted)")
		require.Equal(t, 1, tr.Errors)
	})
}

func TestPolicyBadInput(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, services.SQLite)
	e := newEnv(t, st)
	ctx := context.Background()
	ok := func() policies.Input {
		return policies.Input{Name: ptr("p"), Namespace: &e.ns, Tools: &[]string{"payments.*"}}
	}
	for _, c := range []struct {
		name string
		mod  func(*policies.Input)
		code string
	}{
		{"invalid CEL", func(in *policies.Input) { in.Condition = ptr(`params.amount >`) }, services.CodeInvalidPolicy},
		{"not a bool", func(in *policies.Input) { in.Condition = ptr(`params.amount + 1`) }, services.CodeInvalidPolicy},
		{"unknown variable", func(in *policies.Input) { in.Condition = ptr(`amount > 1`) }, services.CodeInvalidPolicy},
		{"no tools", func(in *policies.Input) { in.Tools = &[]string{} }, services.CodeInvalid},
		{"21 tools", func(in *policies.Input) {
			ts := make([]string, 21)
			for i := range ts {
				ts[i] = fmt.Sprint("t", i)
			}
			in.Tools = &ts
		}, services.CodeInvalid},
		{"no name", func(in *policies.Input) { in.Name = nil }, services.CodeInvalid},
		{"0 approvals", func(in *policies.Input) { in.ApprovalsRequired = ptr(0) }, services.CodeInvalid},
		{"6 approvals", func(in *policies.Input) { in.ApprovalsRequired = ptr(6) }, services.CodeInvalid},
		{"expires too soon", func(in *policies.Input) { in.ExpiresAfter = ptr(59) }, services.CodeInvalid},
		{"expires too late", func(in *policies.Input) { in.ExpiresAfter = ptr(604801) }, services.CodeInvalid},
		{"escalates too soon", func(in *policies.Input) { in.EscalateAfter = ptr(9) }, services.CodeInvalid},
		{"escalates after expiry", func(in *policies.Input) { in.ExpiresAfter, in.EscalateAfter = ptr(600), ptr(600) }, services.CodeInvalid},
		{"unknown namespace", func(in *policies.Input) { in.Namespace = ptr("nowhere") }, services.CodeNotFound},
	} {
		in := ok()
		c.mod(&in)
		_, err := e.pol.Create(ctx, admin, in)
		e, isErr := services.AsError(err)
		require.True(t, isErr, "%s: %v", c.name, err)
		require.Equal(t, c.code, e.Code, "%s: %s", c.name, e.Message)
	}
	list, err := e.pol.List(ctx, admin, "")
	require.NoError(t, err)
	require.Empty(t, list, "nothing written")
}
