package web_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestApproverSeesTheirYesCounted: after approving 1 of 2 in the dashboard,
// the person reads "You approved · waiting for 1 more" and is not offered
// Approve again; Reject stays.
func TestApproverSeesTheirYesCounted(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		d := newDetailEnv(t, st)
		admin := d.key("", "root", services.RoleAdmin)
		status, m := d.do("POST", "/v1/policies", admin, `{"name":"large refunds","namespace":"payments",`+
			`"tools":["payments.refund"],"condition":"has(params.amount) && params.amount > 100000","approvals_required":2,"expires_after":3600}`)
		require.Equal(t, http.StatusCreated, status, "%v", m)
		m = d.entry(`{"key":"refund:order-9001","type":"intent","tool":"payments.refund","params":{"amount":250000}}`)
		require.Equal(t, "pending_approval", m["outcome"])
		id := m["action"].(map[string]any)["id"].(string)

		p := detailDecide(t, d.op, id, "approve", url.Values{"reason": {""}})
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		p = d.op.get("/actions/" + id)
		require.Equal(t, "1 of 2 approvals", flatText(p.testid("approval-count")))
		require.Equal(t, "You approved · waiting for 1 more", flatText(p.testid("decision-approved-by-you")))
		require.Equal(t, []string{"reject"}, offeredDecisions(p))
	})
}
