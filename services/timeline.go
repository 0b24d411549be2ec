package services

import (
	"context"
	"encoding/base64"
	"strconv"

	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// MaxTimelineLimit bounds one page of a timeline, and is its default.
const MaxTimelineLimit = 1000

// TimelineQuery selects one page of a timeline, oldest first.
type TimelineQuery struct {
	Limit  int    // 1–MaxTimelineLimit; 0 is MaxTimelineLimit
	Cursor string // EntryPage.NextCursor of the previous page
}

// EntryPage is one page of a timeline, oldest first.
type EntryPage struct {
	Entries    []*record.Entry `json:"entries"`
	NextCursor *string         `json:"next_cursor"`
}

// Timeline returns a page of an action's timeline, oldest first, with keyset
// pagination on seq: at most q.Limit entries and about MaxPageBytes, so no
// answer grows with the timeline. NextCursor is nil on the last page (a
// page cut by its bytes may be followed by an empty last one).
func (l *Ledger) Timeline(ctx context.Context, p Principal, actionID string, q TimelineQuery) (*EntryPage, error) {
	if q.Limit == 0 {
		q.Limit = MaxTimelineLimit
	}
	if q.Limit < 1 || q.Limit > MaxTimelineLimit {
		return nil, Errorf(CodeInvalid, "limit must be an integer between 1 and %d", MaxTimelineLimit)
	}
	after := 0
	if q.Cursor != "" {
		var err error
		if after, err = decodeSeqCursor(q.Cursor); err != nil {
			return nil, err
		}
	}
	if _, err := l.Action(ctx, p, actionID); err != nil {
		return nil, err
	}
	es, err := l.st.ex.EntryList(ctx, &driver.EntryListParams{ActionID: actionID, AfterSeq: after,
		Limit: q.Limit + 1, MaxBytes: MaxPageBytes})
	if err != nil {
		return nil, DBError("ledger: read entries", err)
	}
	page := &EntryPage{Entries: es}
	switch {
	case len(es) > q.Limit:
		page.Entries = es[:q.Limit]
	case !budgetSpent(es, driver.EntryBytes):
		return page, nil
	}
	c := encodeSeqCursor(page.Entries[len(page.Entries)-1].Seq)
	page.NextCursor = &c
	return page, nil
}

// Entries returns the whole timeline of an action, oldest first, for
// callers inside the process; answers to clients go through Timeline.
func (l *Ledger) Entries(ctx context.Context, p Principal, actionID string) ([]*record.Entry, error) {
	if _, err := l.Action(ctx, p, actionID); err != nil {
		return nil, err
	}
	es, err := l.st.ex.EntryList(ctx, &driver.EntryListParams{ActionID: actionID})
	return es, DBErrorOrNil("ledger: read entries", err)
}

// budgetSpent reports whether a page read under MaxPageBytes stopped for
// its bytes.
func budgetSpent[T any](items []T, size func(T) int) bool {
	n := 0
	for _, it := range items {
		n += size(it)
	}
	return len(items) > 0 && n >= MaxPageBytes
}

// A timeline cursor is the seq of the last entry of the page, opaque to
// clients as a list's cursor is.
const seqCursorPrefix = "seq:"

func encodeSeqCursor(seq int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(seqCursorPrefix + strconv.Itoa(seq)))
}

func decodeSeqCursor(c string) (int, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil && len(b) > len(seqCursorPrefix) && string(b[:len(seqCursorPrefix)]) == seqCursorPrefix {
		if n, err := strconv.Atoi(string(b[len(seqCursorPrefix):])); err == nil && n > 0 {
			return n, nil
		}
	}
	return 0, Errorf(CodeInvalid, "cursor %q is not one this server issued", c)
}
