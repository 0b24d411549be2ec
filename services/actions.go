package services

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Action returns the action with the given id if p may see it; an action of
// another namespace is ErrNotFound, so existence does not leak.
func (l *Ledger) Action(ctx context.Context, p Principal, id string) (*Action, error) {
	if _, err := uuid.Parse(id); err != nil {
		return nil, Errorf(CodeNotFound, "no action has id %q", id)
	}
	q := `SELECT ` + actionColumns + ` FROM actions WHERE id = $1`
	a, err := scanAction(l.st.rsq.QueryRowContext(ctx, l.st.rebind(q), id))
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !p.Sees(a.Namespace)) {
		return nil, Errorf(CodeNotFound, "no action has id %q", id)
	}
	if err != nil {
		return nil, dbError("ledger: read action", err)
	}
	return a, nil
}

// ActionByKey returns the action for key in namespace ns (p's own namespace
// when ns is empty).
func (l *Ledger) ActionByKey(ctx context.Context, p Principal, ns, key string) (*Action, error) {
	if ns == "" {
		ns = p.Namespace
	}
	if ns == "" {
		return nil, Errorf(CodeInvalid, "this principal sees every namespace: add namespace=… to look up a key")
	}
	if !p.Sees(ns) {
		return nil, Errorf(CodeNotFound, "no action has key %q", key)
	}
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	a, err := l.actionByKey(ctx, l.st.rsq, ns, key)
	if errors.Is(err, ErrNotFound) {
		return nil, Errorf(CodeNotFound, "no action has key %q in namespace %q", key, ns)
	}
	return a, err
}

// ActionFilter selects actions for a list. Zero fields match everything.
type ActionFilter struct {
	Namespace string
	Statuses  []Status
	Tool      string
	Agent     string
	Since     *time.Time // created at or after
	Until     *time.Time // created before
	Search    string     // key or reference, exact
	Limit     int
	Cursor    string
}

// MaxListLimit bounds one page of a list.
const MaxListLimit = 500

// ActionPage is one page of a list, newest first.
type ActionPage struct {
	Actions    []*Action `json:"actions"`
	NextCursor *string   `json:"next_cursor"`
}

// List returns actions matching f that p may see, newest first, with keyset
// pagination: ids are UUIDv7, so id order is creation order.
func (l *Ledger) List(ctx context.Context, p Principal, f ActionFilter) (*ActionPage, error) {
	if f.Limit == 0 {
		f.Limit = 50
	}
	if f.Limit < 1 || f.Limit > MaxListLimit {
		return nil, Errorf(CodeInvalid, "limit must be between 1 and %d", MaxListLimit)
	}
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", fmt.Sprintf("$%d", len(args))))
	}
	switch {
	case !p.Global() && f.Namespace != "" && f.Namespace != p.Namespace:
		return &ActionPage{Actions: []*Action{}}, nil
	case !p.Global():
		add("namespace = ?", p.Namespace)
	case f.Namespace != "":
		add("namespace = ?", f.Namespace)
	}
	if len(f.Statuses) > 0 {
		ph := make([]string, len(f.Statuses))
		for i, s := range f.Statuses {
			if !validStatus(s) {
				return nil, Errorf(CodeInvalid, "unknown status %q", s)
			}
			args = append(args, string(s))
			ph[i] = fmt.Sprintf("$%d", len(args))
		}
		where = append(where, "status IN ("+strings.Join(ph, ", ")+")")
	}
	if f.Tool != "" {
		add("tool = ?", f.Tool)
	}
	if f.Agent != "" {
		add("agent = ?", f.Agent)
	}
	if f.Since != nil {
		add("created_at >= ?", f.Since.UTC())
	}
	if f.Until != nil {
		add("created_at < ?", f.Until.UTC())
	}
	if f.Search != "" {
		args = append(args, f.Search)
		n := len(args)
		where = append(where, fmt.Sprintf("(key = $%d OR reference = $%d)", n, n))
	}
	if f.Cursor != "" {
		id, err := decodeCursor(f.Cursor)
		if err != nil {
			return nil, err
		}
		add("id < ?", id)
	}
	q := `SELECT ` + actionColumns + ` FROM actions`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += fmt.Sprintf(` ORDER BY id DESC LIMIT %d`, f.Limit+1)
	rows, err := l.st.rsq.QueryContext(ctx, l.st.rebind(q), args...)
	if err != nil {
		return nil, dbError("ledger: list actions", err)
	}
	defer rows.Close()
	page := &ActionPage{Actions: make([]*Action, 0, f.Limit)}
	for rows.Next() {
		a, err := scanAction(rows)
		if err != nil {
			return nil, dbError("ledger: list actions", err)
		}
		page.Actions = append(page.Actions, a)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError("ledger: list actions", err)
	}
	if len(page.Actions) > f.Limit {
		page.Actions = page.Actions[:f.Limit]
		c := encodeCursor(page.Actions[f.Limit-1].ID)
		page.NextCursor = &c
	}
	return page, nil
}

func validStatus(s Status) bool {
	for _, x := range Statuses {
		if x == s {
			return true
		}
	}
	return false
}

func encodeCursor(id string) string { return base64.RawURLEncoding.EncodeToString([]byte(id)) }

func decodeCursor(c string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		if _, err = uuid.Parse(string(b)); err == nil {
			return string(b), nil
		}
	}
	return "", Errorf(CodeInvalid, "cursor %q is not one this server issued", c)
}

// Entries returns the timeline of an action, oldest first.
func (l *Ledger) Entries(ctx context.Context, p Principal, actionID string) ([]*Entry, error) {
	if _, err := l.Action(ctx, p, actionID); err != nil {
		return nil, err
	}
	q := l.st.rebind(`SELECT id, seq, type, actor_kind, actor_name, attempt, payload, occurred_at,
		recorded_at FROM entries WHERE action_id = $1 ORDER BY seq`)
	rows, err := l.st.rsq.QueryContext(ctx, q, actionID)
	if err != nil {
		return nil, dbError("ledger: read entries", err)
	}
	defer rows.Close()
	out := []*Entry{}
	for rows.Next() {
		var e Entry
		var occurred sql.NullTime
		var payload []byte
		if err := rows.Scan(&e.ID, &e.Seq, &e.Type, &e.Actor.Kind, &e.Actor.Name, &e.Attempt, &payload,
			&occurred, &e.RecordedAt); err != nil {
			return nil, dbError("ledger: read entries", err)
		}
		e.Payload = payload
		if occurred.Valid {
			t := occurred.Time.UTC()
			e.OccurredAt = &t
		}
		e.RecordedAt = e.RecordedAt.UTC()
		out = append(out, &e)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError("ledger: read entries", err)
	}
	return out, nil
}

// CountByStatus counts actions per status, over every namespace.
func (l *Ledger) CountByStatus(ctx context.Context) (map[string]int64, error) {
	rows, err := l.st.rsq.QueryContext(ctx, `SELECT status, count(*) FROM actions GROUP BY status`)
	if err != nil {
		return nil, dbError("ledger: count actions", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for _, s := range Statuses {
		out[string(s)] = 0
	}
	for rows.Next() {
		var s string
		var n int64
		if err := rows.Scan(&s, &n); err != nil {
			return nil, dbError("ledger: count actions", err)
		}
		out[s] = n
	}
	return out, dbErrorOrNil("ledger: count actions", rows.Err())
}

// CountEntries counts entries of one type over every namespace.
func (l *Ledger) CountEntries(ctx context.Context, typ string) (int, error) {
	var n int
	err := l.st.rsq.QueryRowContext(ctx, l.st.rebind(`SELECT count(*) FROM entries WHERE type = $1`), typ).Scan(&n)
	return n, dbErrorOrNil("ledger: count entries", err)
}
