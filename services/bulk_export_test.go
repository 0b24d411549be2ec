package services

import (
	"context"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// DecideManyAsOf applies a bulk decision to the actions as the caller read
// them, without reading them again: an action that changed since its
// snapshot reaches the writer the way one does that changed between the
// bulk decision's read and its write.
func (l *Ledger) DecideManyAsOf(ctx context.Context, p Principal, acts []*record.Action, d DecisionInput) (*BulkResult, error) {
	return l.writeMany(ctx, l.planMany(p, acts, d, true))
}
