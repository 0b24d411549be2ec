package client_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/client"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestTimelinePages: EntriesPage reads one page of a timeline and follows
// its cursor; Entries and AllEntries read every page, oldest first.
func TestTimelinePages(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		c := e.agent("payments")
		ctx := context.Background()
		res, err := c.Submit(ctx, client.Entry{Key: "long", Type: client.TypeIntent, Tool: client.Ptr("t.x")})
		require.NoError(t, err)
		id := res.Action.ID
		batch := make([]client.Entry, 120)
		for i := range batch {
			batch[i] = client.Entry{Key: "long", Type: client.TypeNote, Message: client.Ptr(fmt.Sprintf("note %d", i))}
		}
		_, err = c.SubmitBatch(ctx, batch)
		require.NoError(t, err)

		first, err := c.EntriesPage(ctx, id, client.EntriesOptions{Limit: 100})
		require.NoError(t, err)
		require.Len(t, first.Entries, 100)
		require.Equal(t, 1, first.Entries[0].Seq)
		require.NotEmpty(t, first.NextCursor)
		second, err := c.EntriesPage(ctx, id, client.EntriesOptions{Limit: 100, Cursor: first.NextCursor})
		require.NoError(t, err)
		require.Len(t, second.Entries, 21)
		require.Equal(t, 101, second.Entries[0].Seq)
		require.Empty(t, second.NextCursor)

		whole, err := c.EntriesPage(ctx, id, client.EntriesOptions{})
		require.NoError(t, err)
		require.Len(t, whole.Entries, 121, "the default page is 1,000")
		require.Empty(t, whole.NextCursor)

		all, err := c.Entries(ctx, id)
		require.NoError(t, err)
		require.Len(t, all, 121)
		var seqs []int
		for en, err := range c.AllEntries(ctx, id, client.EntriesOptions{Limit: 7}) {
			require.NoError(t, err)
			seqs = append(seqs, en.Seq)
		}
		require.Len(t, seqs, 121)
		for i, s := range seqs {
			require.Equal(t, i+1, s, "every entry once, oldest first, across 18 pages")
		}
		n := 0
		for en, err := range c.AllEntries(ctx, id, client.EntriesOptions{Limit: 7, Cursor: first.NextCursor}) {
			require.NoError(t, err)
			require.Equal(t, 101+n, en.Seq)
			if n++; n == 10 {
				break
			}
		}
		require.Equal(t, 10, n)

		_, err = c.EntriesPage(ctx, id, client.EntriesOptions{Limit: 1001})
		require.True(t, client.IsCode(err, "invalid"), "%v", err)
		_, err = c.EntriesPage(ctx, id, client.EntriesOptions{Cursor: "not-ours"})
		require.True(t, client.IsCode(err, "invalid"), "%v", err)
	})
}
