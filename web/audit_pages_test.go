package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/evidence"
)

// sequence runs the evidence log's sequencer until it took want entries,
// signing a checkpoint on each pass that grew the tree.
func (e *env) sequence(want int) {
	e.t.Helper()
	seq := evidence.NewSequencer(e.st.Driver(), evidence.SequencerConfig{Key: e.logKey})
	total := 0
	for deadline := time.Now().Add(30 * time.Second); total < want && time.Now().Before(deadline); {
		n, err := seq.Pass(context.Background())
		require.NoError(e.t, err)
		if total += n; total < want {
			time.Sleep(50 * time.Millisecond)
		}
	}
	require.Equal(e.t, want, total, "entries the log took")
}

// sequenceAll runs the sequencer until the log has taken every entry
// committed, and reports how many it took.
func (e *env) sequenceAll() int {
	e.t.Helper()
	seq := evidence.NewSequencer(e.st.Driver(), evidence.SequencerConfig{Key: e.logKey})
	total := 0
	for {
		n, err := seq.Pass(context.Background())
		require.NoError(e.t, err)
		if n == 0 {
			return total
		}
		total += n
	}
}

// logMarks reads the action page's evidence marks: state by entry seq.
func logMarks(t *testing.T, p page) map[string]string {
	t.Helper()
	require.Equal(t, http.StatusOK, p.status, p.body)
	marks := map[string]string{}
	p.testid("timeline-entry").Each(func(_ int, s *goquery.Selection) {
		seq, _ := s.Attr("data-seq")
		state, _ := s.Find(`[data-testid="entry-log"]`).Attr("data-state")
		marks[seq] = state + " " + strings.Join(strings.Fields(s.Find(`[data-testid="entry-log"]`).Text()), " ")
	})
	return marks
}

// TestActionPageAndAuditPageShowTheLog: the action page shows each
// entry's log index and a "verified" mark from its inclusion proof, and
// no mark once the row was edited; the Audit page shows the verifier key,
// the newest checkpoint and the self-check, which names the edit.
func TestActionPageAndAuditPageShowTheLog(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		d := newDetailEnv(t, st)
		pw := d.user("admin@example.com", services.RoleAdmin)
		adm := d.browser()
		adm.signIn("admin@example.com", pw)

		p := adm.get("/admin/audit")
		require.Equal(t, http.StatusOK, p.status)
		require.Equal(t, d.logKey.Verifier, strings.TrimSpace(p.testid("audit-verifier-key").Text()))
		require.Equal(t, 1, p.testid("audit-no-checkpoint").Length(), "no checkpoint before the first entry")
		require.Equal(t, 1, p.testid("audit-check-none").Length())

		id := d.start("refund:order-1", "keyed", 300, `{"amount":1999}`)
		d.entry(`{"key":"refund:order-1","type":"succeeded","attempt":1,"result":{"refund":"re_1"}}`)
		require.Equal(t, map[string]string{"1": "pending log joins within 2 s", "2": "pending log joins within 2 s"},
			logMarks(t, d.op.get("/actions/"+id)))

		d.sequence(2)
		require.Equal(t, map[string]string{"1": "verified log #0 ✓ verified", "2": "verified log #1 ✓ verified"},
			logMarks(t, d.op.get("/actions/"+id)))
		require.Equal(t, map[string]string{"1": "verified log #0 ✓ verified", "2": "verified log #1 ✓ verified"},
			logMarks(t, d.op.get("/actions/"+id+"/timeline")), "the timeline alone shows the same marks")

		p = adm.get("/admin/audit")
		require.Contains(t, p.testid("audit-checkpoint-size").Text(), "Tree size 2")
		require.True(t, strings.HasPrefix(p.testid("audit-checkpoint").Text(), evidence.DefaultOrigin+"\n2\n"), p.testid("audit-checkpoint").Text())
		require.Equal(t, http.StatusSeeOther, adm.post("/admin/audit/check", nil).status)
		p = adm.get("/admin/audit")
		require.Contains(t, p.body, "Self-check: 2 entries checked, intact.")
		require.Contains(t, strings.Join(strings.Fields(p.testid("audit-check-ok").Text()), " "), "Checked 2 entries")

		// Someone with database access edits the outcome.
		db := st.GormWriter()
		require.NoError(t, db.Exec(`UPDATE entries SET payload = '{"result":{"refund":"re_2"}}' WHERE action_id = ? AND seq = 2`, id).Error)
		require.Equal(t, map[string]string{"1": "verified log #0 ✓ verified",
			"2": "changed log #1 does not verify: changed since it was logged"}, logMarks(t, d.op.get("/actions/"+id)))

		require.Equal(t, http.StatusSeeOther, adm.post("/admin/audit/check", nil).status)
		p = adm.get("/admin/audit")
		require.Contains(t, p.body, "Self-check: 1 changes found; audit.mismatch sent.")
		require.Equal(t, 1, p.testid("audit-check-mismatch").Length())
		rows := p.testid("audit-problem")
		require.Equal(t, 1, rows.Length())
		kind, _ := rows.Attr("data-kind")
		require.Equal(t, "edited", kind)
		require.Contains(t, rows.Text(), "payments / refund:order-1 #2")

		// Operators see the marks, not the Audit page.
		require.Equal(t, http.StatusForbidden, d.op.get("/admin/audit").status)
	})
}
