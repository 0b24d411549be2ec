package services

import (
	"context"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// ActionWithTimeline returns an action and its timeline as one consistent
// picture: entries appended after the action was read are left out, so the
// newest entry shown is the one that produced the action's current state. An
// operator who decides on that picture names it by (version, newest seq), and
// anything after it can be shown to them as "changed since you opened it".
func (l *Ledger) ActionWithTimeline(ctx context.Context, p Principal, id string) (*record.Action, []*record.Entry, error) {
	a, err := l.Action(ctx, p, id)
	if err != nil {
		return nil, nil, err
	}
	es, err := l.Entries(ctx, p, id)
	if err != nil {
		return nil, nil, err
	}
	// Every change bumps entry_seq, entry-only ones too, so it is the seq of
	// the newest entry as of the read.
	n := len(es)
	for n > 0 && es[n-1].Seq > a.EntrySeq {
		n--
	}
	return a, es[:n], nil
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
