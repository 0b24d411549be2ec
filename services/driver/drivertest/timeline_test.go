package drivertest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

func seqs(es []*record.Entry) []int {
	out := make([]int, len(es))
	for i, e := range es {
		out[i] = e.Seq
	}
	return out
}

// TestEntryListReadsPartsOfATimeline pages a timeline by seq in both
// directions and stops at a byte budget.
func TestEntryListReadsPartsOfATimeline(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx, d := setup(t, st)
		ex := d.Executor()
		a := newAction(opts{key: "long"})
		insert(t, ctx, ex, a)
		prev := a.Next
		big := json.RawMessage(`{"message":"` + strings.Repeat("x", 2000) + `"}`)
		for i := 2; i <= 10; i++ {
			ch := update(prev, record.StatusInProgress, t0.Add(time.Duration(i)*time.Second))
			ch.Entry.Type, ch.Entry.Payload = record.TypeNote, big
			written, err := ex.ActionUpdateMany(ctx, []*driver.Change{ch})
			require.NoError(t, err)
			require.Equal(t, []bool{true}, written)
			prev = ch.Next
		}

		all, err := ex.EntryList(ctx, &driver.EntryListParams{ActionID: a.Next.ID})
		require.NoError(t, err)
		require.Equal(t, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, seqs(all))

		page, err := ex.EntryList(ctx, &driver.EntryListParams{ActionID: a.Next.ID, AfterSeq: 3, Limit: 4})
		require.NoError(t, err)
		require.Equal(t, []int{4, 5, 6, 7}, seqs(page))

		older, err := ex.EntryList(ctx, &driver.EntryListParams{ActionID: a.Next.ID, BeforeSeq: 8, Newest: true, Limit: 3})
		require.NoError(t, err)
		require.Equal(t, []int{7, 6, 5}, seqs(older))

		between, err := ex.EntryList(ctx, &driver.EntryListParams{ActionID: a.Next.ID, AfterSeq: 8, BeforeSeq: 10})
		require.NoError(t, err)
		require.Equal(t, []int{9}, seqs(between))

		// The budget is reached by the third entry: reading stops there,
		// the limit notwithstanding.
		budget := driver.EntryBytes(all[0]) + driver.EntryBytes(all[1]) + driver.EntryBytes(all[2])
		cut, err := ex.EntryList(ctx, &driver.EntryListParams{ActionID: a.Next.ID, Limit: 10, MaxBytes: budget})
		require.NoError(t, err)
		require.Equal(t, []int{1, 2, 3}, seqs(cut))
		cut, err = ex.EntryList(ctx, &driver.EntryListParams{ActionID: a.Next.ID, Limit: 10, MaxBytes: budget - 1})
		require.NoError(t, err)
		require.Equal(t, []int{1, 2, 3}, seqs(cut), "the entry that crosses the budget is the last one read")
	})
}

// TestActionListStopsAtItsByteBudget reads a list of large actions under a
// byte budget.
func TestActionListStopsAtItsByteBudget(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx, d := setup(t, st)
		ex := d.Executor()
		for _, k := range []string{"a", "b", "c", "d"} {
			ch := newAction(opts{key: k})
			ch.Next.Params = json.RawMessage(`{"blob":"` + strings.Repeat("p", 3000) + `"}`)
			insert(t, ctx, ex, ch)
		}
		all, err := ex.ActionList(ctx, &driver.ActionListParams{Limit: 10})
		require.NoError(t, err)
		require.Len(t, all, 4)
		two := driver.ActionBytes(all[0]) + driver.ActionBytes(all[1])
		cut, err := ex.ActionList(ctx, &driver.ActionListParams{Limit: 10, MaxBytes: two})
		require.NoError(t, err)
		require.Equal(t, keys(all[:2]), keys(cut))
	})
}
