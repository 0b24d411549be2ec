package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// teamsEnv has one timed-out refund in each of team-a and team-b, and an
// operator of each team who is a member of their own namespace only.
type teamsEnv struct {
	*env
	agents, ids map[string]string // by namespace
	operators   map[string]*browser
}

func newTeamsEnv(t *testing.T, st *services.Store) *teamsEnv {
	e := newEnv(t, st)
	te := &teamsEnv{env: e, agents: map[string]string{}, ids: map[string]string{}, operators: map[string]*browser{}}
	for _, ns := range []string{"team-a", "team-b"} {
		te.agents[ns] = e.key(ns, "refund-bot", services.RoleAgent)
		status, m := e.do("POST", "/v1/entries", te.agents[ns],
			`{"key":"refund:1","type":"intent","tool":"payments.refund","effect":"keyed","params":{"n":1},"timeout":1}`)
		require.Equal(t, http.StatusCreated, status, "%v", m)
		te.ids[ns] = m["action"].(map[string]any)["id"].(string)
	}
	time.Sleep(1100 * time.Millisecond)
	n, err := services.NewLedger(st, services.LedgerConfig{}).Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2, n)
	for _, ns := range []string{"team-a", "team-b"} {
		email := "oncall@" + ns + ".example.com"
		pw := "correct horse battery " + ns
		_, err := accounts.New(st).CreateMember(context.Background(), email, services.RoleOperator, []string{ns}, pw)
		require.NoError(t, err)
		b := e.browser()
		b.signIn(email, pw)
		te.operators[ns] = b
	}
	return te
}

func (te *teamsEnv) status(id string) string {
	te.t.Helper()
	status, m := te.do("GET", "/v1/actions/"+id, te.key("", "admin", services.RoleAdmin), "")
	require.Equal(te.t, http.StatusOK, status)
	return m["status"].(string)
}

// Acceptance (issue 15): two dashboard operators with memberships in
// different namespaces each see and decide only their own; a forged form
// post for the other namespace is 404.
func TestOperatorsSeeAndDecideOnlyTheirNamespace(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		te := newTeamsEnv(t, st)
		for own, other := range map[string]string{"team-a": "team-b", "team-b": "team-a"} {
			b := te.operators[own]
			// Triage: rows and counts of their namespace only.
			p := b.get("/")
			require.Equal(t, http.StatusOK, p.status)
			require.Equal(t, []string{te.ids[own]}, rowAttrs(p.testid("triage-row"), "data-action-id"), own)
			require.Equal(t, "1", countOf(p, "timed_out"), own)
			require.Equal(t, "1", countOf(p, "total"), own)
			p = b.get("/triage/items")
			require.Equal(t, []string{te.ids[own]}, rowAttrs(p.testid("triage-row"), "data-action-id"), own)
			// The action list, even when asked for the other namespace.
			p = b.get("/actions")
			require.Equal(t, []string{te.ids[own]}, rowAttrs(p.testid("action-row"), "data-action-id"), own)
			p = b.get("/actions?namespace=" + other)
			require.Equal(t, 0, p.testid("action-row").Length(), own)
			// The other namespace's action does not exist for them.
			require.Equal(t, http.StatusNotFound, b.get("/actions/"+te.ids[other]).status, own)
			require.Equal(t, http.StatusNotFound, b.get("/actions/"+te.ids[other]+"/timeline").status, own)

			// A decision form of their own action, posted at the other one.
			p = b.get("/actions/" + te.ids[own])
			require.Equal(t, http.StatusOK, p.status)
			forged := detailForm(t, p, "abandon")
			forged.Set("reason", "forged")
			p = b.post("/actions/"+te.ids[other]+"/decisions", forged)
			require.Equal(t, http.StatusNotFound, p.status, own)
			require.Equal(t, "timed_out", te.status(te.ids[other]), "the forged post decided nothing")
			// A bulk decision naming the other namespace, or its action.
			bulk := url.Values{"decision": {"abandon"}, "reason": {"forged"}, "scope": {"all"}, "f_namespace": {other},
				"max_count": {"1"}}
			require.Equal(t, http.StatusNotFound, b.post("/decisions", bulk).status, own)
			p = b.post("/decisions", url.Values{"decision": {"abandon"}, "reason": {"forged"}, "ids": {te.ids[other]}, "max_count": {"1"}})
			require.Equal(t, http.StatusOK, p.status, p.body)
			require.Equal(t, "0", p.testid("bulk-applied").Text(), own)
			require.Equal(t, "timed_out", te.status(te.ids[other]))
		}
		// Each decides their own.
		for _, ns := range []string{"team-a", "team-b"} {
			b := te.operators[ns]
			p := detailDecide(t, b, te.ids[ns], "abandon", url.Values{"reason": {"ours, and it never went out"}})
			require.Equal(t, http.StatusSeeOther, p.status, p.body)
			require.Equal(t, "abandoned", te.status(te.ids[ns]))
		}
	})
}

// A viewer of a namespace sees its actions and is offered no decision;
// deciding anyway is refused. A membership given later applies at the next
// request; one taken away hides the namespace again.
func TestViewerMembershipAndChanges(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		te := newTeamsEnv(t, st)
		accts := accounts.New(st)
		alice := te.operators["team-a"]
		aliceID := userID(t, st, "oncall@team-a.example.com")
		require.NoError(t, accts.Grant(context.Background(), aliceID, "team-b", services.RoleViewer))

		p := alice.get("/actions/" + te.ids["team-b"])
		require.Equal(t, http.StatusOK, p.status)
		require.Equal(t, 0, p.testid("decision-form-abandon").Length(), "a viewer is offered no decision")
		p = alice.post("/actions/"+te.ids["team-b"]+"/decisions", url.Values{"decision": {"abandon"}, "reason": {"x"}})
		require.Equal(t, http.StatusForbidden, p.status)
		require.Equal(t, "timed_out", te.status(te.ids["team-b"]))
		p = alice.get("/")
		require.ElementsMatch(t, []string{te.ids["team-a"], te.ids["team-b"]}, rowAttrs(p.testid("triage-row"), "data-action-id"))
		require.Contains(t, p.testid("current-user").Parent().Text(), "operator in team-a; viewer in team-b")

		require.NoError(t, accts.Revoke(context.Background(), aliceID, "team-b"))
		require.Equal(t, http.StatusNotFound, alice.get("/actions/"+te.ids["team-b"]).status)
		// A member of no namespace sees an empty queue.
		require.NoError(t, accts.Revoke(context.Background(), aliceID, "team-a"))
		p = alice.get("/")
		require.Equal(t, http.StatusOK, p.status)
		require.Equal(t, 0, p.testid("triage-row").Length())
		require.Equal(t, 1, p.testid("triage-empty").Length())
		require.Equal(t, 0, alice.get("/actions").testid("action-row").Length())
	})
}

// The admin users page gives and takes memberships, and creates a user in
// one namespace.
func TestAdminEditsMemberships(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		te := newTeamsEnv(t, st)
		admin := te.admin("root@example.com")
		id := userID(t, st, "oncall@team-a.example.com")
		p := admin.post(fmt.Sprintf("/admin/users/%s/memberships", id), url.Values{"namespace": {"team-b"}, "role": {"operator"}})
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		p = admin.get("/admin/users")
		row := p.doc.Find(`[data-testid="user-row"][data-id="` + id + `"]`)
		require.Equal(t, []string{"team-a", "team-b"}, rowAttrs(row.Find(`[data-testid="membership"]`), "data-namespace"))
		require.Equal(t, []string{"operator", "operator"}, rowAttrs(row.Find(`[data-testid="membership"]`), "data-role"))
		require.Equal(t, "operator in team-a, team-b", row.Find(`[data-testid="user-where"]`).Text())
		p = admin.post(fmt.Sprintf("/admin/users/%s/memberships", id), url.Values{"namespace": {"no-such"}, "role": {"operator"}})
		require.Equal(t, http.StatusNotFound, p.status)
		p = admin.post(fmt.Sprintf("/admin/users/%s/memberships/revoke", id), url.Values{"namespace": {"team-a"}})
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		ms, err := accounts.New(st).Memberships(context.Background(), id)
		require.NoError(t, err)
		require.Len(t, ms, 1)
		require.Equal(t, "team-b", ms[0].Namespace)

		admin.get("/admin/users")
		p = admin.post("/admin/users", url.Values{"email": {"carol@example.com"}, "role": {"viewer"}, "namespace": {"team-b"},
			"password": {"a long enough password"}})
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		carol := te.browser()
		carol.signIn("carol@example.com", "a long enough password")
		require.Equal(t, []string{te.ids["team-b"]}, rowAttrs(carol.get("/").testid("triage-row"), "data-action-id"))
	})
}
