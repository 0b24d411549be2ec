package web_test

import (
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

func namespaceChoices(p page) []string {
	var out []string
	p.testid("filter-namespace").Find("option").Each(func(_ int, s *goquery.Selection) {
		if v := s.AttrOr("value", ""); v != "" {
			out = append(out, v)
		}
	})
	return out
}

// TestNamespaceMenuListsOnlyWhatTheUserSees: the action list's namespace
// menu offers a member only the namespaces they may see; an admin sees
// every one.
func TestNamespaceMenuListsOnlyWhatTheUserSees(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		te := newTeamsEnv(t, st)
		require.Equal(t, []string{"team-a"}, namespaceChoices(te.operators["team-a"].get("/actions")))
		require.Equal(t, []string{"team-b"}, namespaceChoices(te.operators["team-b"].get("/actions")))
		// A namespace named in the URL is still shown as chosen, but only
		// because the user typed it: nothing is listed from the database.
		p := te.operators["team-a"].get("/actions?namespace=team-b")
		require.Equal(t, 0, p.testid("action-row").Length())

		pw := te.user("root@example.com", services.RoleAdmin)
		admin := te.browser()
		admin.signIn("root@example.com", pw)
		require.Equal(t, []string{"team-a", "team-b"}, namespaceChoices(admin.get("/actions")))
	})
}
