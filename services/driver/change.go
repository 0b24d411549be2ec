package driver

import (
	"cmp"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// NewID returns a new id: a UUIDv7, so id order is creation order.
func NewID() string { return uuid.Must(uuid.NewV7()).String() }

// FirstPerKey returns the indexes of the first change for each (namespace,
// key) of new actions, in (namespace, key) order: the order in which every
// writer locks keys, so that concurrent writers cannot deadlock on them.
func FirstPerKey(chs []*Change) []int {
	order := make([]int, len(chs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		x, y := chs[a].Next, chs[b].Next
		return cmp.Or(strings.Compare(x.Namespace, y.Namespace), strings.Compare(x.Key, y.Key))
	})
	return slices.CompactFunc(order, func(a, b int) bool {
		return chs[a].Next.Namespace == chs[b].Next.Namespace && chs[a].Next.Key == chs[b].Next.Key
	})
}

// ScanClaimed reads claimed deliveries (id, message id, endpoint id, event
// type, payload, url, format, secret, previous secret and its deadline,
// attempts, failing since) and closes rows.
func ScanClaimed(rows *sql.Rows, err error) ([]*ClaimedDelivery, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*ClaimedDelivery
	for rows.Next() {
		var c ClaimedDelivery
		if err := rows.Scan(&c.ID, &c.MessageID, &c.EndpointID, &c.EventType, &c.Payload, &c.URL, &c.Format,
			&c.Secret, &c.PreviousSecret, &c.PreviousSecretUntil, &c.Attempts, &c.FailingSince); err != nil {
			return nil, err
		}
		out = append(out, &c)
	}
	return out, rows.Err()
}

// IDAt is the smallest UUIDv7 of time t's millisecond: every id made at t
// or later sorts at or above it.
func IDAt(t time.Time) string {
	ms := uint64(max(t.UnixMilli(), 0))
	return fmt.Sprintf("%08x-%04x-7000-8000-000000000000", ms>>16, ms&0xffff)
}
