package services_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/driver"
)

// TestSearchByPrefixAndWildcards: q matches a key or a reference exactly,
// or by prefix when it ends in *; tool and agent take * wildcards; the
// characters LIKE and GLOB would read as patterns are taken literally.
func TestSearchByPrefixAndWildcards(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		f := newFixture(t, st, FixtureOpts{})
		for _, a := range []struct{ key, tool, agent, ref string }{
			{"refund:order-740", "payments.refund", "refund-bot-1", "ZD-1"},
			{"refund:order-741", "payments.refund", "refund-bot-2", "ZD-2"},
			{"refund:order-7499", "payments.refund_v2", "refund-bot-1", "ZD-3"},
			{"refund:order-75", "payments.charge", "charge_bot", "ZD-74x"},
			{"refund:order_740", "payments[1].refund", "charge%bot", "ZD-5"},
			{"Refund:order-742", "PAYMENTS.refund", "refund-bot-?", "ZD-6"},
		} {
			submit(t, f.l, f.agent, fmt.Sprintf(`{"key":%q,"type":"intent","tool":%q,"effect":"keyed","agent":%q,"reference":%q,"params":{}}`,
				a.key, a.tool, a.agent, a.ref))
		}
		keys := func(flt services.ActionFilter) []string {
			t.Helper()
			page, err := f.l.List(ctx, f.operator, flt)
			require.NoError(t, err, "%+v", flt)
			var out []string
			for _, a := range page.Actions {
				out = append(out, a.Key)
			}
			return out
		}
		require.Equal(t, []string{"refund:order-740"}, keys(services.ActionFilter{Search: "refund:order-740"}), "exact")
		require.Equal(t, []string{"refund:order-7499", "refund:order-741", "refund:order-740"},
			keys(services.ActionFilter{Search: "refund:order-74*"}), "a prefix, newest first")
		require.Equal(t, []string{"refund:order-75"}, keys(services.ActionFilter{Search: "ZD-74*"}), "a reference's prefix")
		require.Equal(t, []string{"refund:order_740"}, keys(services.ActionFilter{Search: "refund:order_*"}), "_ is not a wildcard")
		require.Empty(t, keys(services.ActionFilter{Search: "refund:order-74"}), "no * is exact")
		require.Equal(t, []string{"Refund:order-742"}, keys(services.ActionFilter{Search: "R*"}), "case counts")
		_, err := f.l.List(ctx, f.operator, services.ActionFilter{Search: "*"})
		require.ErrorIs(t, err, services.ErrInvalid, "* alone matches everything")

		require.Equal(t, []string{"refund:order-7499", "refund:order-741", "refund:order-740"},
			keys(services.ActionFilter{Tool: "payments.refund*"}), "[ is literal, case counts")
		require.Equal(t, []string{"refund:order-7499"}, keys(services.ActionFilter{Tool: "*_v2"}))
		require.Equal(t, []string{"refund:order_740"}, keys(services.ActionFilter{Tool: "payments[1].*"}))
		require.Equal(t, []string{"refund:order-741"}, keys(services.ActionFilter{Tool: "payments.refund", Agent: "*-2"}))
		require.Equal(t, []string{"Refund:order-742"}, keys(services.ActionFilter{Agent: "refund-bot-?"}), "? is literal")
		require.Equal(t, []string{"refund:order_740"}, keys(services.ActionFilter{Agent: "charge%*"}), "% is literal")
		require.Equal(t, []string{"refund:order-75"}, keys(services.ActionFilter{Agent: "charge_bot"}))
	})
}

func TestPrefixEnd(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"refund:order-74": "refund:order-75",
		"a\U0010FFFF":     "b",
		"\U0010FFFF":      "",
		"x\uD7FF":         "x\uE000",
		"é":               "ê",
	} {
		require.Equal(t, want, driver.PrefixEnd(in), "%q", in)
	}
}
