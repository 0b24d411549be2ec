package services_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/models"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// Approvals count people, not credentials (SPEC "Approval before
// execution"): a key counts as its owner, a dashboard user as themselves,
// and a key without an owner may not approve.

// user returns the user with email, creating them with role if missing.
func user(t *testing.T, st *services.Store, email string, role services.Role) models.User {
	t.Helper()
	ctx := context.Background()
	a := accounts.New(st)
	if u, err := a.UserByEmail(ctx, email); err == nil {
		return u
	}
	u, err := a.CreateUser(ctx, email, role, "correct horse battery staple")
	require.NoError(t, err)
	return u
}

// signedIn is the principal of a user deciding in the dashboard.
func signedIn(t *testing.T, st *services.Store, u models.User) services.Principal {
	t.Helper()
	ms, err := accounts.New(st).Memberships(context.Background(), u.ID)
	require.NoError(t, err)
	return accounts.UserPrincipal(u, ms)
}

func TestApprovalsCountOwnersNotKeys(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		f := newFixture(t, st, FixtureOpts{})
		f.l.WithRules(requireTwo)
		send(intentApproval)(t, f)

		// Two keys of one owner are one person, whatever they are called.
		carolA := principal(t, st, PrincipalOpts{Namespace: f.ns, Name: "on-call", Role: services.RoleOperator, Owner: "carol@example.com"})
		carolB := principal(t, st, PrincipalOpts{Namespace: f.ns, Name: "on-call-2", Role: services.RoleOperator, Owner: "carol@example.com"})
		a, err := approveAs(t, f, carolA, "")
		require.NoError(t, err)
		require.Equal(t, record.StatusAwaitingApproval, a.Status)
		before := len(f.entries(t, a.ID))
		_, err = approveAs(t, f, carolB, "")
		require.ErrorIs(t, err, &services.Error{Code: services.CodeAlreadyApproved})
		require.Len(t, f.entries(t, a.ID), before, "a second key of the same owner writes nothing")
		require.Len(t, f.action(t, "k").Approval.Approvals, 1)

		// Two keys of one name with different owners are two people.
		dave := principal(t, st, PrincipalOpts{Namespace: f.ns, Name: "on-call", Role: services.RoleOperator, Owner: "dave@example.com"})
		a, err = approveAs(t, f, dave, "second pair of eyes")
		require.NoError(t, err)
		require.Equal(t, record.StatusApproved, a.Status)
		require.Equal(t, []record.Actor{
			{Kind: record.ActorOperator, Name: "carol@example.com", Via: "api_key:on-call"},
			{Kind: record.ActorOperator, Name: "dave@example.com", Via: "api_key:on-call"},
		}, []record.Actor{a.Approval.Approvals[0].By, a.Approval.Approvals[1].By})
		es := f.entries(t, a.ID)
		require.Equal(t, record.Actor{Kind: record.ActorOperator, Name: "dave@example.com", Via: "api_key:on-call"},
			es[len(es)-1].Actor, "the decision entry names the person and the key")
	})
}

func TestApprovalInDashboardAndByOwnKeyCountsOnce(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		f := newFixture(t, st, FixtureOpts{})
		f.l.WithRules(requireTwo)
		send(intentApproval)(t, f)
		carol := user(t, st, "carol@example.com", services.RoleAdmin)
		// A key carol named after someone else, to pass as a second person.
		bobKey := principal(t, st, PrincipalOpts{Name: "bob@example.com", Role: services.RoleAdmin, Owner: "carol@example.com"})

		a, err := approveAs(t, f, signedIn(t, st, carol), "")
		require.NoError(t, err)
		require.Equal(t, record.Actor{Kind: record.ActorOperator, Name: "carol@example.com", Via: "dashboard"}, a.Approval.Approvals[0].By)
		before := len(f.entries(t, a.ID))
		_, err = approveAs(t, f, bobKey, "")
		require.ErrorIs(t, err, &services.Error{Code: services.CodeAlreadyApproved})
		require.Len(t, f.entries(t, a.ID), before)

		// And the other way round on a second action: the key first.
		send(`{"key":"k2","type":"intent","tool":"payments.refund","effect":"keyed","params":{"order":"1"},"require_approval":true}`)(t, f)
		id := f.action(t, "k2").ID
		a, _, err = f.l.Decide(context.Background(), bobKey, id, services.DecisionInput{Decision: record.DecisionApprove})
		require.NoError(t, err)
		_, _, err = f.l.Decide(context.Background(), signedIn(t, st, carol), id, services.DecisionInput{Decision: record.DecisionApprove})
		require.ErrorIs(t, err, &services.Error{Code: services.CodeAlreadyApproved})
		for _, k := range []string{"k", "k2"} {
			for _, v := range f.action(t, k).Approval.Approvals {
				require.Equal(t, "carol@example.com", v.By.Name, "never bob@, who approved nothing")
			}
			for _, e := range f.entries(t, f.action(t, k).ID) {
				require.NotEqual(t, "bob@example.com", e.Actor.Name)
			}
		}
		require.Equal(t, "api_key:bob@example.com", a.Approval.Approvals[0].By.Via)
	})
}

func TestOwnerlessKeyMayNotApprove(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		f := newFixture(t, st, FixtureOpts{})
		send(intentApproval)(t, f)
		a := f.action(t, "k")
		nobody := principal(t, st, PrincipalOpts{Namespace: f.ns, Name: "on-call", Role: services.RoleOperator})
		root := principal(t, st, PrincipalOpts{Name: "root", Role: services.RoleAdmin})
		before := len(f.entries(t, a.ID))
		for _, p := range []services.Principal{nobody, root} {
			_, _, err := f.l.Decide(ctx, p, a.ID, services.DecisionInput{Decision: record.DecisionApprove})
			require.ErrorIs(t, err, &services.Error{Code: services.CodeApproverUnknown})
			require.Contains(t, err.Error(), "--owner")
			_, err = f.l.DecideMany(ctx, p, services.BulkInput{Filter: &services.BulkFilter{IDs: []string{a.ID}},
				Decision: record.DecisionApprove, DryRun: true})
			require.ErrorIs(t, err, &services.Error{Code: services.CodeApproverUnknown})
		}
		require.Len(t, f.entries(t, a.ID), before, "nothing written")
		require.Empty(t, f.action(t, "k").Approval.Approvals)

		// Every other decision it may take, and the record says it was a key.
		got, entry, err := f.l.Decide(ctx, nobody, a.ID, services.DecisionInput{Decision: record.DecisionReject, Reason: "not this one"})
		require.NoError(t, err)
		require.Equal(t, record.StatusDenied, got.Status)
		want := record.Actor{Kind: record.ActorOperator, Name: "on-call", Via: "api_key:on-call"}
		require.Equal(t, want, entry.Actor)
		require.Equal(t, want, got.Approval.Rejection.By)
	})
}

// actorOf is the actor a decision by API key p is recorded with: its
// owner, or the key itself when it has none, and the key it came through.
func actorOf(p services.Principal) record.Actor {
	name := p.Name
	if p.OwnerEmail != "" {
		name = p.OwnerEmail
	}
	return record.Actor{Kind: record.ActorOperator, Name: name, Via: "api_key:" + p.Name}
}

// sansVia is a decision's payload without the via it keeps for the actor.
func sansVia(t *testing.T, payload []byte) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(payload, &m))
	delete(m, "via")
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return string(b)
}
