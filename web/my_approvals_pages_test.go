package web_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestTriageApprovalsWaitingForMe: triage counts the approvals the
// signed-in person may still give, and ?view=my-approvals lists only
// those: once Alice has given her yes to a refund that needs two, it
// waits for Bob and not for her; a viewer is offered no such view.
func TestTriageApprovalsWaitingForMe(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		d := newDetailEnv(t, st) // ops@example.com, operator in payments
		admin := d.key("", "root", services.RoleAdmin)
		status, m := d.do("POST", "/v1/policies", admin, `{"name":"large refunds","namespace":"payments",`+
			`"tools":["payments.refund"],"condition":"has(params.amount) && params.amount > 100000","approvals_required":2}`)
		require.Equal(t, http.StatusCreated, status, "%v", m)
		big := d.entry(`{"key":"refund:order-9001","type":"intent","tool":"payments.refund","params":{"amount":250000}}`)["action"].(map[string]any)["id"].(string)
		small := d.entry(`{"key":"refund:order-9002","type":"intent","tool":"payments.refund","params":{"amount":1},"require_approval":true}`)["action"].(map[string]any)["id"].(string)
		late := d.start("email:late", "unkeyed", 1, `{}`)
		d.timeOut()
		bob := d.browser()
		bob.signIn("bob@example.com", d.user("bob@example.com", services.RoleOperator))

		forMe := func(b *browser) (string, []string) {
			t.Helper()
			p := b.get("/")
			require.Equal(t, http.StatusOK, p.status)
			n := flatText(p.testid("count-for-me").Find(".n"))
			p = b.get("/?view=my-approvals")
			require.Equal(t, http.StatusOK, p.status)
			require.Equal(t, "/triage/items?view=my-approvals", p.testid("triage-live").AttrOr("hx-get", ""), "live updates keep the view")
			return n, rowAttrs(p.testid("triage-row"), "data-action-id")
		}
		n, rows := forMe(d.op)
		require.Equal(t, "2", n)
		require.ElementsMatch(t, []string{big, small}, rows, "approvals only, not the timed-out email")
		require.NotContains(t, rows, late)

		detailDecide(t, d.op, big, "approve", nil)
		n, rows = forMe(d.op)
		require.Equal(t, "1", n, "her yes is given")
		require.Equal(t, []string{small}, rows)
		n, rows = forMe(bob)
		require.Equal(t, "2", n, "it still waits for Bob")
		require.ElementsMatch(t, []string{big, small}, rows)
		p := bob.get("/?view=my-approvals")
		require.Equal(t, "(2) My approvals · Arbiter", p.doc.Find("title").Text())

		detailDecide(t, d.op, small, "approve", nil)
		_, rows = forMe(d.op)
		require.Empty(t, rows)
		require.Contains(t, flatText(d.op.get("/?view=my-approvals").testid("triage-empty")), "No approval is waiting for you")

		viewer := d.browser()
		viewer.signIn("viewer@example.com", d.user("viewer@example.com", services.RoleViewer))
		require.Zero(t, viewer.get("/").testid("count-for-me").Length(), "a viewer approves nothing")
	})
}
