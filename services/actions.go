package services

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// Action returns the action with the given id if p may see it; an action of
// another namespace is ErrNotFound, so existence does not leak.
func (l *Ledger) Action(ctx context.Context, p Principal, id string) (*record.Action, error) {
	if _, err := uuid.Parse(id); err != nil {
		return nil, Errorf(CodeNotFound, "no action has id %q", id)
	}
	a, err := l.st.ex.ActionGetByID(ctx, id)
	if errors.Is(err, driver.ErrNotFound) || (err == nil && !p.Sees(a.Namespace)) {
		return nil, Errorf(CodeNotFound, "no action has id %q", id)
	}
	if err != nil {
		return nil, DBError("ledger: read action", err)
	}
	return a, nil
}

// ActionByKey returns the action for key in namespace ns (p's own namespace
// when ns is empty).
func (l *Ledger) ActionByKey(ctx context.Context, p Principal, ns, key string) (*record.Action, error) {
	if err := CheckFilterText("namespace", ns); err != nil {
		return nil, err
	}
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
	a, err := l.st.ex.ActionGetByKey(ctx, ns, key)
	if errors.Is(err, driver.ErrNotFound) {
		return nil, Errorf(CodeNotFound, "no action has key %q in namespace %q", key, ns)
	}
	if err != nil {
		return nil, DBError(fmt.Sprintf("ledger: read action %q", key), err)
	}
	return a, nil
}

// ActionFilter selects actions for a list. Zero fields match everything.
type ActionFilter struct {
	Namespace string
	Statuses  []record.Status
	Tool      string
	Agent     string
	Since     *time.Time // created at or after
	Until     *time.Time // created before
	Search    string     // key or reference, exact, or by prefix when it ends in *
	Limit     int
	Cursor    string
}

// MaxListLimit bounds one page of a list.
const MaxListLimit = 500

// MaxPageBytes bounds what one page of a list or a timeline holds: at 64
// KiB of params and as much of result, 500 actions would be a 60 MB answer,
// built whole in memory. A page stops at the item that reaches it and its
// next_cursor continues from there.
const MaxPageBytes = 4 << 20

// MaxFilterValues bounds the values one filter criterion may list (the
// statuses of a list or of a bulk decision): each is a bound variable of
// the SQL, and SQLite refuses a statement with tens of thousands of them.
const MaxFilterValues = 100

// ActionPage is one page of a list, newest first.
type ActionPage struct {
	Actions    []*record.Action `json:"actions"`
	NextCursor *string          `json:"next_cursor"`
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
	for _, t := range [...]struct{ name, v string }{{"tool", f.Tool}, {"agent", f.Agent}, {"q", f.Search}, {"namespace", f.Namespace}} {
		if err := CheckFilterText(t.name, t.v); err != nil {
			return nil, err
		}
	}
	if err := checkSearch(f.Search); err != nil {
		return nil, err
	}
	q := &driver.ActionListParams{Tool: f.Tool, Agent: f.Agent, Since: f.Since, Until: f.Until, Search: f.Search,
		Limit: f.Limit + 1, MaxBytes: MaxPageBytes}
	if len(f.Statuses) > MaxFilterValues {
		return nil, Errorf(CodeInvalid, "status names %d values; the limit is %d", len(f.Statuses), MaxFilterValues)
	}
	for _, s := range f.Statuses {
		if !s.Valid() {
			return nil, Errorf(CodeInvalid, "unknown status %q", s)
		}
		if !slices.Contains(q.Statuses, s) {
			q.Statuses = append(q.Statuses, s)
		}
	}
	if f.Cursor != "" {
		id, err := decodeCursor(f.Cursor)
		if err != nil {
			return nil, err
		}
		q.BeforeID = id
	}
	// Every filter is checked before the scope, which may answer nothing:
	// a bad filter is refused whoever asks.
	var none bool
	if q.Namespace, q.Namespaces, none = p.Scope(f.Namespace); none {
		return &ActionPage{Actions: []*record.Action{}}, nil
	}
	actions, err := l.st.ex.ActionList(ctx, q)
	if err != nil {
		return nil, DBError("ledger: list actions", err)
	}
	page := &ActionPage{Actions: make([]*record.Action, 0, f.Limit)}
	page.Actions = append(page.Actions, actions...)
	switch {
	case len(page.Actions) > f.Limit:
		page.Actions = page.Actions[:f.Limit]
	case !budgetSpent(page.Actions, driver.ActionBytes):
		return page, nil
	}
	c := encodeCursor(page.Actions[len(page.Actions)-1].ID)
	page.NextCursor = &c
	return page, nil
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

// CountByStatus counts actions per status, over every namespace. It is the
// store's, not the ledger's, so the metrics that read it can be built
// before the ledger that reports to them.
func (s *Store) CountByStatus(ctx context.Context) (map[string]int64, error) {
	counts, err := s.ex.ActionCountByStatus(ctx)
	if err != nil {
		return nil, DBError("store: count actions", err)
	}
	out := map[string]int64{}
	for _, status := range record.Statuses {
		out[string(status)] = counts[status]
	}
	return out, nil
}

// CountEntries counts entries of one type over every namespace.
func (l *Ledger) CountEntries(ctx context.Context, typ record.EntryType) (int, error) {
	n, err := l.st.ex.EntryCountByType(ctx, typ)
	return n, DBErrorOrNil("ledger: count entries", err)
}

// checkSearch refuses a q that is a prefix of everything ("*").
func checkSearch(q string) error {
	if prefix, ok := driver.SearchPrefix(q); ok && driver.PrefixEnd(prefix) == "" {
		return Errorf(CodeInvalid, "q: give the start of a key or reference before the * (refund:order-74*)")
	}
	return nil
}

// CheckFilterText refuses a filter value that no stored text can equal and
// that PostgreSQL refuses to compare (invalid UTF-8, a NUL), so that both
// databases answer it 400 rather than PostgreSQL failing the query.
func CheckFilterText(name, v string) error {
	if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
		return Errorf(CodeInvalid, "%s must be valid UTF-8 without NUL characters", name)
	}
	return nil
}
