package services

import (
	"context"
	"slices"

	"github.com/arbiter-ledger/arbiter/services/driver"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// TimelineWindow is a page of a timeline read newest first and shown
// oldest first, as the dashboard pages back through it.
type TimelineWindow struct {
	Entries []*record.Entry // oldest first
	// Older is the before to read the previous page with; 0 when Entries
	// starts at the first entry.
	Older int
}

// ActionWithTimeline returns an action and the newest page of its timeline
// (at most limit entries and about MaxPageBytes) as one consistent picture:
// entries appended after the action was read are left out, so the newest
// entry shown is the one that produced the action's current state. An
// operator who decides on that picture names it by (version, newest seq), and
// anything after it can be shown to them as "changed since you opened it".
// With before set, the page is the one of the entries older than that seq.
func (l *Ledger) ActionWithTimeline(ctx context.Context, p Principal, id string, before, limit int) (*record.Action, *TimelineWindow, error) {
	a, err := l.Action(ctx, p, id)
	if err != nil {
		return nil, nil, err
	}
	if err := l.markReview(ctx, a); err != nil { // the panel offers acknowledge
		return nil, nil, err
	}
	if limit < 1 || limit > MaxTimelineLimit {
		limit = MaxTimelineLimit
	}
	// Every change bumps entry_seq, entry-only ones too, so it is the seq of
	// the newest entry as of the read.
	upto := a.EntrySeq + 1
	if before > 0 && before < upto {
		upto = before
	}
	es, err := l.st.ex.EntryList(ctx, &driver.EntryListParams{ActionID: id, BeforeSeq: upto, Newest: true,
		Limit: limit + 1, MaxBytes: MaxPageBytes})
	if err != nil {
		return nil, nil, DBError("ledger: read entries", err)
	}
	w := &TimelineWindow{Entries: es}
	switch {
	case len(es) > limit:
		w.Entries = es[:limit]
		w.Older = w.Entries[limit-1].Seq
	case budgetSpent(es, driver.EntryBytes):
		w.Older = es[len(es)-1].Seq
	}
	slices.Reverse(w.Entries)
	return a, w, nil
}

// StoredFingerprint is the fingerprint of the action's own tool and params,
// to set beside the fingerprint a reused key offered.
func StoredFingerprint(a *record.Action) string {
	if a.Fingerprint != "" {
		return a.Fingerprint
	}
	params := []byte(a.Params)
	if len(params) == 0 {
		params = []byte("{}")
	}
	return Fingerprint(a.Tool, params)
}
