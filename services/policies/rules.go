package policies

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/arbiter-ledger/arbiter/services"
)

// Policies and limits are both rules: rows of one namespace, changed only
// by writing their next version (kept as JSON beside them), deleted softly,
// read by the ledger on every first intent from a per-namespace cache with
// their expressions compiled once per version. rules holds what they share;
// M is the row's model, V its version's model, R the rule as the API shows
// it, C its compiled expressions.
type rules[M, V, R, C any] struct {
	st   *services.Store
	noun string // "policies", "limits": the start of database errors
	one  string // "policy", "limit"
	// versionOf is the column of V that holds the rule's id.
	versionOf string
	toRule    func(*M) *R
	// scope gives a rule's namespace and the key of its version.
	scope func(*R) (namespace string, version progKey)
	// def is the JSON of a version.
	def      func(*V) string
	notFound func(id string) error
	compile  func(*R) C
	// canRead and canManage say whether a principal may read the rules and
	// change them.
	canRead, canManage func(services.Principal) error
	// toModel writes a rule onto its row, row the version to keep of it,
	// and next moves it to its next version at a time, answering the
	// version it had.
	toModel func(*R, *M)
	row     func(*R) *V
	next    func(*R, time.Time) (prev int)

	mu    sync.Mutex
	cache map[string]cachedRules[R] // by namespace
	progs map[progKey]C
}

type cachedRules[R any] struct {
	read  time.Time
	rules []*R
}

type progKey struct {
	id      string
	version int
}

// get returns the rule with id when pr may read it.
func (t *rules[M, V, R, C]) get(ctx context.Context, pr services.Principal, id string) (*R, error) {
	if err := t.canRead(pr); err != nil {
		return nil, err
	}
	_, r, err := t.find(ctx, pr, id)
	return r, err
}

// find returns the live row with id, when pr may see its namespace.
func (t *rules[M, V, R, C]) find(ctx context.Context, pr services.Principal, id string) (*M, *R, error) {
	if _, err := uuid.Parse(id); err != nil {
		return nil, nil, t.notFound(id)
	}
	var ms []M
	err := t.st.Gorm().WithContext(ctx).Where("id = ? AND deleted_at IS NULL", id).Limit(1).Find(&ms).Error
	if err != nil {
		return nil, nil, services.DBError(t.noun+": read", err)
	}
	if len(ms) == 0 {
		return nil, nil, t.notFound(id)
	}
	r := t.toRule(&ms[0])
	if ns, _ := t.scope(r); !pr.Sees(ns) {
		return nil, nil, t.notFound(id)
	}
	return &ms[0], r, nil
}

// list returns the live rules pr may see, of namespace ns if set, oldest
// first.
func (t *rules[M, V, R, C]) list(ctx context.Context, pr services.Principal, ns string) ([]*R, error) {
	if err := t.canRead(pr); err != nil {
		return nil, err
	}
	if err := services.CheckFilterText("namespace", ns); err != nil {
		return nil, err
	}
	q := t.st.Gorm().WithContext(ctx).Where("deleted_at IS NULL")
	one, among, none := pr.Scope(ns)
	switch {
	case none:
		return []*R{}, nil
	case one != "":
		q = q.Where("namespace = ?", one)
	case len(among) > 0:
		q = q.Where("namespace IN ?", among)
	}
	return t.read(q, "list")
}

func (t *rules[M, V, R, C]) read(q *gorm.DB, what string) ([]*R, error) {
	var ms []M
	if err := q.Order("created_at, id").Find(&ms).Error; err != nil {
		return nil, services.DBError(t.noun+": "+what, err)
	}
	out := make([]*R, 0, len(ms))
	for i := range ms {
		out = append(out, t.toRule(&ms[i]))
	}
	return out, nil
}

var errConflict = errors.New("policies: changed concurrently")

// change edits the rule with id and writes its next version at now; the
// edit applies the input and checks the result. Two changes of one version
// race: the second is a version_conflict.
func (t *rules[M, V, R, C]) change(ctx context.Context, pr services.Principal, id string, now time.Time,
	edit func(*R) error) (*R, error) {
	if err := t.canManage(pr); err != nil {
		return nil, err
	}
	m, r, err := t.find(ctx, pr, id)
	if err != nil {
		return nil, err
	}
	if err := edit(r); err != nil {
		return nil, err
	}
	prev := t.next(r, now)
	t.toModel(r, m)
	err = t.st.GormWriter().WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(new(M)).Where("id = ? AND version = ? AND deleted_at IS NULL", id, prev).
			Select("*").Omit("id", "created_at", "deleted_at").Updates(m)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return errConflict
		}
		return tx.Create(t.row(r)).Error
	})
	if errors.Is(err, errConflict) {
		return nil, services.Errorf(services.CodeVersionConflict, "%s %s changed meanwhile; read it again",
			t.one, id)
	}
	if err != nil {
		return nil, services.DBError(t.noun+": update", err)
	}
	ns, _ := t.scope(r)
	t.forget(ns)
	return r, nil
}

// remove deletes the rule with id that pr may see; its versions stay.
func (t *rules[M, V, R, C]) remove(ctx context.Context, pr services.Principal, id string, now time.Time) error {
	if err := t.canManage(pr); err != nil {
		return err
	}
	_, r, err := t.find(ctx, pr, id)
	if err != nil {
		return err
	}
	if err := t.st.GormWriter().WithContext(ctx).Model(new(M)).Where("id = ?", id).
		Updates(map[string]any{"deleted_at": now, "updated_at": now}).Error; err != nil {
		return services.DBError(t.noun+": delete", err)
	}
	ns, _ := t.scope(r)
	t.forget(ns)
	return nil
}

// versions returns every version of the rule with id, oldest first, also
// after it was deleted, when pr may see its namespace.
func (t *rules[M, V, R, C]) versions(ctx context.Context, pr services.Principal, id string) ([]*R, error) {
	if err := t.canRead(pr); err != nil {
		return nil, err
	}
	if _, err := uuid.Parse(id); err != nil {
		return nil, t.notFound(id)
	}
	var vs []V
	if err := t.st.Gorm().WithContext(ctx).Where(t.versionOf+" = ?", id).Order("version").Find(&vs).Error; err != nil {
		return nil, services.DBError(t.noun+": versions", err)
	}
	out := make([]*R, 0, len(vs))
	for i := range vs {
		r := new(R)
		if err := json.Unmarshal([]byte(t.def(&vs[i])), r); err != nil {
			return nil, services.DBError(t.noun+": read a version", err)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, t.notFound(id)
	}
	if ns, _ := t.scope(out[0]); !pr.Sees(ns) {
		return nil, t.notFound(id)
	}
	return out, nil
}

// forget drops the cached rules of a namespace after a change.
func (t *rules[M, V, R, C]) forget(ns string) {
	t.mu.Lock()
	delete(t.cache, ns)
	t.mu.Unlock()
}

// enabled returns the enabled rules of namespace ns, read again when one
// changes through this process and otherwise at most policyCacheFreshness
// after they were read (a change through another replica applies within
// that time).
func (t *rules[M, V, R, C]) enabled(ctx context.Context, ns string) ([]*R, error) {
	now := time.Now()
	t.mu.Lock()
	c, ok := t.cache[ns]
	t.mu.Unlock()
	if ok && now.Sub(c.read) < policyCacheFreshness {
		return c.rules, nil
	}
	rs, err := t.read(t.st.Gorm().WithContext(ctx).Where("namespace = ? AND enabled AND deleted_at IS NULL", ns),
		"read enabled rules")
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.cache[ns] = cachedRules[R]{read: now, rules: rs}
	t.mu.Unlock()
	return rs, nil
}

// programs returns the compiled expressions of a rule's version, compiling
// them on first use.
func (t *rules[M, V, R, C]) programs(r *R) C {
	_, k := t.scope(r)
	t.mu.Lock()
	c, ok := t.progs[k]
	t.mu.Unlock()
	if !ok {
		c = t.compile(r)
		t.mu.Lock()
		t.progs[k] = c
		t.mu.Unlock()
	}
	return c
}
