package services_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// person is a dashboard user who is a member of the given namespaces.
func person(ms map[string]services.Role) services.Principal {
	return services.Principal{Kind: "user", ID: "u", Name: "u@example.com", Role: services.RoleOperator, Memberships: ms}
}

func TestPrincipalMemberships(t *testing.T) {
	t.Parallel()
	p := person(map[string]services.Role{"a": services.RoleOperator, "b": services.RoleViewer})
	require.True(t, p.Sees("a"))
	require.True(t, p.Sees("b"))
	require.False(t, p.Sees("c"))
	require.True(t, p.DecidesIn("a"))
	require.False(t, p.DecidesIn("b"))
	require.False(t, p.Global())
	require.True(t, p.CanDecide())
	one, among, none := p.Scope("")
	require.Equal(t, "", one)
	require.Equal(t, []string{"a", "b"}, among)
	require.False(t, none)
	_, among, _ = p.DecisionScope("")
	require.Equal(t, []string{"a"}, among)
	_, _, none = p.DecisionScope("b")
	require.True(t, none)
	_, _, none = p.Scope("c")
	require.True(t, none)

	every := person(map[string]services.Role{services.Everywhere: services.RoleViewer, "a": services.RoleOperator})
	require.True(t, every.Global())
	require.True(t, every.Sees("z"))
	require.False(t, every.DecidesIn("z"))
	require.True(t, every.DecidesIn("a"))

	nobody := person(nil)
	require.False(t, nobody.Sees("a"))
	require.False(t, nobody.CanDecide())
	_, _, none = nobody.Scope("")
	require.True(t, none)

	admin := services.Principal{Kind: "user", Role: services.RoleAdmin}
	require.True(t, admin.Global())
	require.True(t, admin.DecidesIn("a"))
}

// Lists, triage and bulk decisions of a person cover their namespaces only.
func TestMembershipScopesReadsAndDecisions(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		a := newFixture(t, st, FixtureOpts{})
		b := newFixture(t, st, FixtureOpts{Clock: a.clock, Ledger: a.l})
		for _, f := range []*fixture{a, b} {
			submit(t, f.l, f.agent, intent(IntentOpts{Key: "k", Timeout: 1}))
		}
		a.clock.Advance(2e9)
		_, err := a.l.Sweep(ctx)
		require.NoError(t, err)

		p := person(map[string]services.Role{a.ns: services.RoleOperator, b.ns: services.RoleViewer})
		page, err := a.l.List(ctx, p, services.ActionFilter{})
		require.NoError(t, err)
		var nss []string
		for _, x := range page.Actions {
			nss = append(nss, x.Namespace)
		}
		require.ElementsMatch(t, []string{a.ns, b.ns}, nss)
		tr, err := a.l.Triage(ctx, person(map[string]services.Role{a.ns: services.RoleOperator}), 0)
		require.NoError(t, err)
		require.Equal(t, int64(1), tr.Counts[string(record.StatusTimedOut)])
		require.Len(t, tr.Items, 1)
		require.Equal(t, a.ns, tr.Items[0].Action.Namespace)

		// Deciding in bulk: only where they are an operator.
		in := services.BulkInput{Filter: &services.BulkFilter{Status: []record.Status{record.StatusTimedOut}},
			Decision: record.DecisionAbandon, Reason: "outage", MaxCount: new(10)}
		ans, err := a.l.DecideMany(ctx, p, in)
		require.NoError(t, err)
		require.Equal(t, 1, ans.Result.Applied)
		require.Equal(t, record.StatusAbandoned, a.action(t, "k").Status)
		require.Equal(t, record.StatusTimedOut, b.action(t, "k").Status)
		in.Filter.Namespace = b.ns
		_, err = a.l.DecideMany(ctx, p, in)
		require.ErrorIs(t, err, services.ErrNotFound)
		_, _, err = a.l.Decide(ctx, p, b.action(t, "k").ID, services.DecisionInput{Decision: record.DecisionAbandon, Reason: "x"})
		require.ErrorIs(t, err, services.ErrForbidden, "a viewer there")
		stranger := person(map[string]services.Role{"elsewhere": services.RoleOperator})
		_, _, err = a.l.Decide(ctx, stranger, b.action(t, "k").ID, services.DecisionInput{Decision: record.DecisionAbandon, Reason: "x"})
		require.ErrorIs(t, err, services.ErrNotFound)
	})
}
