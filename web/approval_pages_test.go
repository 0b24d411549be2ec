package web_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestApprovalsDesk: an action awaiting approval comes first on triage with
// what it still needs; its page shows the approval, and an operator
// approves it from the decision panel, without a reason.
func TestApprovalsDesk(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		d := newDetailEnv(t, st)
		late := d.start("email:late", "unkeyed", 1, `{}`)
		d.timeOut()
		m := d.entry(`{"key":"refund:order-9001","type":"intent","tool":"payments.refund","params":{"amount":250000},"require_approval":true}`)
		require.Equal(t, "pending_approval", m["outcome"])
		id := m["action"].(map[string]any)["id"].(string)

		p := d.op.get("/")
		rows := p.testid("triage-row")
		require.Equal(t, []string{id, late}, rowAttrs(rows, "data-action-id"), "the approval first, though newer")
		require.Regexp(t, `^0 of 1 approval · expires in 2\d h · the intent asked for approval \(require_approval\)$`,
			flatText(rows.First().Find(`[data-testid="triage-approval"]`)))

		p = d.op.get("/actions/" + id)
		require.Equal(t, "0 of 1 approval", flatText(p.testid("approval-count")))
		require.Equal(t, []string{"approve", "reject"}, offeredDecisions(p))
		require.Equal(t, 0, p.testid("approval-votes").Length())
		require.NotContains(t, p.testid("decision-form-approve").Find("textarea").Nodes[0].Attr, "required")

		p = detailDecide(t, d.op, id, "approve", url.Values{"reason": {""}})
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		p = d.op.get("/actions/" + id)
		require.Equal(t, "Approved — the agent's next intent with this key runs attempt 1.", flatText(p.testid("flash")))
		require.Equal(t, "approved", flatText(p.testid("action-status")))
		require.Equal(t, "1 of 1 approval", flatText(p.testid("approval-count")))
		require.Regexp(t, `^ops@example.com approved `, flatText(p.testid("approval-vote")))
		require.Equal(t, []string{"reject"}, offeredDecisions(p))
	})
}
