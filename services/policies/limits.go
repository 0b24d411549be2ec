package policies

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/interpreter"
	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/arbiter-ledger/arbiter/models"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// Limits across actions (SPEC "Limits across actions"): which first intents
// a limit charges (tools and condition, as for policies), how much (amount)
// and in which business group (group_by), each CEL checked when saved and
// compiled once per version. The ledger asks Limits about every possible
// first intent and counts the charges itself (services/limits.go).

// Bounds of a limit.
const (
	MaxExprBytes  = 4096
	MaxWindow     = 2592000 // 30 days, in seconds
	MaxGroupBytes = 256
	// UsageGroups is how many groups a usage answer lists.
	UsageGroups = 100
)

// Limit is a limit as the API shows it.
type Limit struct {
	ID                string    `json:"id"`
	Namespace         string    `json:"namespace"`
	Name              string    `json:"name"`
	Tools             []string  `json:"tools"`
	Condition         string    `json:"condition"`
	Amount            string    `json:"amount"`
	GroupBy           string    `json:"group_by"`
	Window            int       `json:"window"`
	Max               float64   `json:"max"`
	Over              string    `json:"over"`
	ApprovalsRequired int       `json:"approvals_required"`
	Mode              string    `json:"mode"`
	Enabled           bool      `json:"enabled"`
	Version           int       `json:"version"`
	CreatedAt         time.Time `json:"created_at"`
	UpdatedAt         time.Time `json:"updated_at"`
}

// LimitInput creates a limit, or (fields left nil) changes some of its
// fields.
type LimitInput struct {
	Name              *string   `json:"name,omitempty"`
	Namespace         *string   `json:"namespace,omitempty"`
	Tools             *[]string `json:"tools,omitempty"`
	Condition         *string   `json:"condition,omitempty"`
	Amount            *string   `json:"amount,omitempty"`
	GroupBy           *string   `json:"group_by,omitempty"`
	Window            *int      `json:"window,omitempty"`
	Max               *float64  `json:"max,omitempty"`
	Over              *string   `json:"over,omitempty"`
	ApprovalsRequired *int      `json:"approvals_required,omitempty"`
	Mode              *string   `json:"mode,omitempty"`
	Enabled           *bool     `json:"enabled,omitempty"`
}

// Usage is a limit's counted use now: its window and max, and the groups
// with the most use.
type Usage struct {
	Window int          `json:"window"`
	Max    float64      `json:"max"`
	Groups []GroupUsage `json:"groups"`
}

// GroupUsage is one group's counted use.
type GroupUsage struct {
	Group    string    `json:"group"`
	Used     float64   `json:"used"`
	Actions  int       `json:"actions"`
	OldestAt time.Time `json:"oldest_at"`
}

// Limits manages limits and finds those a first intent is charged to: the
// ledger's services.Limiter.
type Limits struct {
	st  *services.Store
	now func() time.Time

	*rules[models.Limit, models.LimitVersion, Limit, *limitPrograms]
}

// limitPrograms are a limit version's compiled condition, amount and group.
type limitPrograms struct {
	cond, amount, group *program
	err                 error
}

// NewLimits returns the limit service on st.
func NewLimits(st *services.Store) *Limits {
	return &Limits{st: st, now: services.Now, rules: &rules[models.Limit, models.LimitVersion, Limit, *limitPrograms]{
		st: st, noun: "limits", one: "limit", versionOf: "limit_id", toRule: toLimit, notFound: limitNotFound,
		scope: func(l *Limit) (string, progKey) { return l.Namespace, progKey{l.ID, l.Version} },
		def:   func(v *models.LimitVersion) string { return v.LimitDef },
		compile: func(l *Limit) *limitPrograms {
			c, err := compileLimit(l)
			if err != nil {
				c = &limitPrograms{err: err}
			}
			return c
		},
		canRead: readLimits, canManage: manageLimits, toModel: toLimitModel, row: limitVersion,
		next: func(l *Limit, at time.Time) int {
			l.Version, l.UpdatedAt = l.Version+1, at
			return l.Version - 1
		},
		cache: map[string]cachedRules[Limit]{}, progs: map[progKey]*limitPrograms{}}}
}

// compileLimit compiles a limit's three expressions; the error names the
// field and carries the compiler's message.
func compileLimit(l *Limit) (*limitPrograms, error) {
	cond, err := compile(l.Condition)
	if err != nil {
		return nil, services.Errorf(services.CodeInvalidLimit, "field \"condition\": %v", err)
	}
	// params' values are dyn: their type is learnt when the limit runs.
	amount, err := compileAs(l.Amount, "the amount", "an int or a double", types.IntType, types.UintType,
		types.DoubleType, types.DynType)
	if err != nil {
		return nil, services.Errorf(services.CodeInvalidLimit, "field \"amount\": %v", err)
	}
	group, err := compileAs(l.GroupBy, "group_by", "a string", types.StringType, types.DynType)
	if err != nil {
		return nil, services.Errorf(services.CodeInvalidLimit, "field \"group_by\": %v", err)
	}
	return &limitPrograms{cond: cond, amount: amount, group: group}, nil
}

func validateExpr(field, expr string) error {
	if len(expr) > MaxExprBytes || !utf8.ValidString(expr) || strings.ContainsRune(expr, 0) {
		return invalid("field %q must be valid UTF-8 of at most %d bytes, without NUL characters", field, MaxExprBytes)
	}
	return nil
}

// validateLimit checks a limit as it will be stored.
func validateLimit(l *Limit) error {
	switch {
	case strings.TrimSpace(l.Name) == "" || len(l.Name) > MaxNameBytes || !services.Printable(l.Name):
		return invalid("field \"name\" must be 1 to %d printable bytes", MaxNameBytes)
	case l.Window < 1 || l.Window > MaxWindow:
		return invalid("field \"window\" must be 1 to %d seconds", MaxWindow)
	case l.Max < 0 || math.IsNaN(l.Max) || math.IsInf(l.Max, 0):
		return invalid("field \"max\" must be a number of at least 0")
	case l.Over != record.LimitHold && l.Over != record.LimitDeny:
		return invalid("field \"over\" must be \"hold\" or \"deny\"")
	case l.ApprovalsRequired < 1 || l.ApprovalsRequired > MaxApprovals:
		return invalid("field \"approvals_required\" must be 1 to %d distinct people", MaxApprovals)
	case l.Mode != record.LimitEnforce && l.Mode != record.LimitShadow:
		return invalid("field \"mode\" must be \"enforce\" or \"shadow\"")
	}
	if err := checkTools(l.Tools); err != nil {
		return err
	}
	for _, f := range [][2]string{{"condition", l.Condition}, {"amount", l.Amount}, {"group_by", l.GroupBy}} {
		if err := validateExpr(f[0], f[1]); err != nil {
			return err
		}
	}
	_, err := compileLimit(l)
	return err
}

func limitNotFound(id string) error {
	return services.Errorf(services.CodeNotFound, "no limit has id %q", id)
}

func manageLimits(p services.Principal) error {
	if p.Role != services.RoleAdmin {
		return services.Errorf(services.CodeForbidden, "only admins manage limits")
	}
	return nil
}

// readLimits checks that p may read limits: agent keys may not, as for
// policies.
func readLimits(p services.Principal) error { return readRules(p, "limits") }

// readRules checks that p may read rules of the kind named what: agent keys
// may not.
func readRules(p services.Principal, what string) error {
	if p.Role == services.RoleAgent {
		return services.Errorf(services.CodeForbidden, "agent keys may not read %s; use a reader, operator or admin key", what)
	}
	return nil
}

func toLimit(m *models.Limit) *Limit {
	l := &Limit{ID: m.ID, Namespace: m.Namespace, Name: m.Name, Condition: m.Condition, Amount: m.Amount,
		GroupBy: m.GroupBy, Window: m.WindowSeconds, Max: m.MaxAmount, Over: m.OverAction,
		ApprovalsRequired: m.ApprovalsRequired, Mode: m.Mode, Enabled: m.Enabled, Version: m.Version,
		CreatedAt: m.CreatedAt.UTC(), UpdatedAt: m.UpdatedAt.UTC()}
	_ = json.Unmarshal([]byte(m.Tools), &l.Tools)
	if l.Tools == nil {
		l.Tools = []string{}
	}
	return l
}

func toLimitModel(l *Limit, m *models.Limit) {
	tools, _ := json.Marshal(l.Tools)
	m.Namespace, m.Name, m.Tools, m.Condition, m.Amount, m.GroupBy = l.Namespace, l.Name, string(tools), l.Condition, l.Amount, l.GroupBy
	m.WindowSeconds, m.MaxAmount, m.OverAction, m.ApprovalsRequired = l.Window, l.Max, l.Over, l.ApprovalsRequired
	m.Mode, m.Enabled, m.Version, m.CreatedAt, m.UpdatedAt = l.Mode, l.Enabled, l.Version, l.CreatedAt, l.UpdatedAt
}

// applyLimit writes the fields of in that are set onto l.
func applyLimit(l *Limit, in LimitInput) {
	if in.Name != nil {
		l.Name = strings.TrimSpace(*in.Name)
	}
	if in.Tools != nil {
		l.Tools = append([]string{}, *in.Tools...)
	}
	for _, f := range []struct {
		from *string
		to   *string
	}{{in.Condition, &l.Condition}, {in.Amount, &l.Amount}, {in.GroupBy, &l.GroupBy}, {in.Over, &l.Over}, {in.Mode, &l.Mode}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
	if in.Window != nil {
		l.Window = *in.Window
	}
	if in.Max != nil {
		l.Max = *in.Max
	}
	if in.ApprovalsRequired != nil {
		l.ApprovalsRequired = *in.ApprovalsRequired
	}
	if in.Enabled != nil {
		l.Enabled = *in.Enabled
	}
}

func limitVersion(l *Limit) *models.LimitVersion {
	b, _ := json.Marshal(l)
	return &models.LimitVersion{LimitID: l.ID, Version: l.Version, LimitDef: string(b), CreatedAt: l.UpdatedAt}
}

// Create adds a limit at version 1.
func (s *Limits) Create(ctx context.Context, pr services.Principal, in LimitInput) (*Limit, error) {
	if err := manageLimits(pr); err != nil {
		return nil, err
	}
	if in.Namespace == nil || *in.Namespace == "" {
		return nil, invalid("field \"namespace\" is required")
	}
	if err := services.ValidateNamespace(*in.Namespace); err != nil {
		return nil, err
	}
	var n int64
	if err := s.st.Gorm().WithContext(ctx).Model(&models.Namespace{}).Where("name = ?", *in.Namespace).Count(&n).Error; err != nil {
		return nil, services.DBError("limits: find namespace", err)
	}
	if n == 0 {
		return nil, services.Errorf(services.CodeNotFound, "no namespace is named %q", *in.Namespace)
	}
	switch {
	case in.Name == nil:
		return nil, invalid("field \"name\" is required")
	case in.Tools == nil:
		return nil, invalid("field \"tools\" is required: 1 to %d patterns", MaxTools)
	case in.Window == nil:
		return nil, invalid("field \"window\" is required: 1 to %d seconds", MaxWindow)
	case in.Max == nil:
		return nil, invalid("field \"max\" is required: a number of at least 0")
	}
	now := s.now()
	l := &Limit{ID: uuid.Must(uuid.NewV7()).String(), Namespace: *in.Namespace, Tools: []string{}, Over: record.LimitHold,
		ApprovalsRequired: DefaultApprovals, Mode: record.LimitEnforce, Enabled: true, Version: 1, CreatedAt: now, UpdatedAt: now}
	applyLimit(l, in)
	if err := validateLimit(l); err != nil {
		return nil, err
	}
	var m models.Limit
	m.ID = l.ID
	toLimitModel(l, &m)
	err := s.st.GormWriter().WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&m).Error; err != nil {
			return err
		}
		return tx.Create(limitVersion(l)).Error
	})
	if err != nil {
		return nil, services.DBError("limits: create", err)
	}
	s.forget(l.Namespace)
	return l, nil
}

// Get returns a limit p may see.
func (s *Limits) Get(ctx context.Context, pr services.Principal, id string) (*Limit, error) {
	return s.get(ctx, pr, id)
}

// List returns the limits p may see, of namespace ns if set, oldest first.
func (s *Limits) List(ctx context.Context, pr services.Principal, ns string) ([]*Limit, error) {
	return s.list(ctx, pr, ns)
}

// Update changes a limit and writes its next version; it applies to first
// intents from now on. Charges already made keep counting as they were
// made, at the amounts and in the groups of their version.
func (s *Limits) Update(ctx context.Context, pr services.Principal, id string, in LimitInput) (*Limit, error) {
	return s.change(ctx, pr, id, s.now(), func(l *Limit) error {
		if in.Namespace != nil {
			return invalid("field \"namespace\" cannot change: create a limit in the other namespace")
		}
		applyLimit(l, in)
		return validateLimit(l)
	})
}

// Delete stops a limit from charging; its versions stay readable.
func (s *Limits) Delete(ctx context.Context, pr services.Principal, id string) error {
	return s.remove(ctx, pr, id, s.now())
}

// Versions returns every version of a limit p may see, oldest first, also
// after it was deleted.
func (s *Limits) Versions(ctx context.Context, pr services.Principal, id string) ([]*Limit, error) {
	return s.versions(ctx, pr, id)
}

// Usage answers a limit's counted use now: the UsageGroups groups with the
// most use, or only group when it is set.
func (s *Limits) Usage(ctx context.Context, pr services.Principal, id, group string) (*Usage, error) {
	if err := services.CheckFilterText("group", group); err != nil {
		return nil, err
	}
	l, err := s.get(ctx, pr, id)
	if err != nil {
		return nil, err
	}
	gs, err := s.st.Executor().LimitUsage(ctx, &driver.LimitUsageParams{LimitID: l.ID, Group: group,
		Since: s.now().Add(-time.Duration(l.Window) * time.Second), Limit: UsageGroups})
	if err != nil {
		return nil, services.DBError("limits: usage", err)
	}
	u := &Usage{Window: l.Window, Max: l.Max, Groups: make([]GroupUsage, 0, len(gs))}
	for _, g := range gs {
		u.Groups = append(u.Groups, GroupUsage{Group: g.Group, Used: g.Used, Actions: g.Actions, OldestAt: g.OldestAt})
	}
	return u, nil
}

// GroupCharges is the group's charges within the limit's window, newest
// first and at most GroupChargeRows, each with its action and whether it
// counts now: the actions behind the group's use.
func (s *Limits) GroupCharges(ctx context.Context, pr services.Principal, id, group string) ([]GroupCharge, error) {
	if err := services.CheckFilterText("group", group); err != nil {
		return nil, err
	}
	l, err := s.get(ctx, pr, id)
	if err != nil {
		return nil, err
	}
	cs, err := s.st.Executor().LimitGroupCharges(ctx, &driver.LimitUsageParams{LimitID: l.ID, Group: group,
		Since: s.now().Add(-time.Duration(l.Window) * time.Second), Limit: GroupChargeRows})
	if err != nil {
		return nil, services.DBError("limits: group charges", err)
	}
	out := make([]GroupCharge, len(cs))
	for i, c := range cs {
		out[i] = GroupCharge{ActionID: c.ActionID, Key: c.Key, Tool: c.Tool, Status: c.Status, Amount: c.Amount,
			ChargedAt: c.ChargedAt, Held: c.Held, Counts: driver.ChargeCounts(c.Status, c.Held)}
	}
	return out, nil
}

// GroupChargeRows is how many of a group's charges GroupCharges reads.
const GroupChargeRows = 200

// GroupCharge is one charge of a group: its action, and whether it counts
// now (Held: it waits for people because it exceeded this limit).
type GroupCharge struct {
	ActionID, Key, Tool string
	Status              record.Status
	Amount              float64
	ChargedAt           time.Time
	Held, Counts        bool
}

// Limits says which enabled limits of its namespace a first intent is
// charged to, with its amount and group. Tools are matched first; the
// expressions run once each, only for the limits whose tools match. A
// condition that fails matches, and an amount or a group that fails (or
// gives a negative, infinite or too large value) is kept as the match's
// error: the intent then exceeds the limit (fail closed).
func (s *Limits) Limits(ctx context.Context, q services.ApprovalQuery) ([]services.LimitMatch, error) {
	ls, err := s.enabled(ctx, q.Namespace)
	if err != nil || len(ls) == 0 {
		return nil, err
	}
	var out []services.LimitMatch
	var act interpreter.Activation
	for _, l := range ls {
		if !toolMatches(l.Tools, q.Tool) {
			continue
		}
		if act == nil {
			act = queryActivation(q)
		}
		m := services.LimitMatch{ID: l.ID, Name: l.Name, Version: l.Version, Amount: 1, Max: l.Max,
			Window: time.Duration(l.Window) * time.Second, Over: l.Over, Mode: l.Mode, Approvals: l.ApprovalsRequired}
		prg := s.programs(l)
		if prg.err != nil {
			m.Error = prg.err.Error()
			out = append(out, m)
			continue
		}
		matched, err := evalIn(ctx, prg.cond, act)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("limits: evaluate %q: %w", l.Name, context.Cause(ctx))
			}
			matched, m.Error = true, "condition: "+err.Error()
		}
		if !matched {
			continue
		}
		if m.Error == "" {
			if m.Amount, err = evalAmount(ctx, prg.amount, act); err != nil {
				m.Error = "amount: " + err.Error()
			}
		}
		if m.Error == "" {
			if m.Group, err = evalGroup(ctx, prg.group, act); err != nil {
				m.Error = "group_by: " + err.Error()
			}
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("limits: evaluate %q: %w", l.Name, context.Cause(ctx))
		}
		out = append(out, m)
	}
	return out, nil
}

// maxAmount bounds one intent's amount, so that sums stay exact in a double.
const maxAmount = 1 << 50

func evalAmount(ctx context.Context, prg *program, act interpreter.Activation) (float64, error) {
	if prg == nil {
		return 1, nil
	}
	v, err := evalValue(ctx, prg, act)
	if err != nil {
		return 0, err
	}
	var n float64
	switch x := v.Value().(type) {
	case int64:
		n = float64(x)
	case uint64:
		n = float64(x)
	case float64:
		n = x
	default:
		return 0, fmt.Errorf("gave %v, not a number", v.Value())
	}
	if math.IsNaN(n) || n < 0 || n > maxAmount {
		return 0, fmt.Errorf("gave %v; an amount must be a number from 0 to %d", n, int64(maxAmount))
	}
	return n, nil
}

func evalGroup(ctx context.Context, prg *program, act interpreter.Activation) (string, error) {
	if prg == nil {
		return "", nil
	}
	v, err := evalValue(ctx, prg, act)
	if err != nil {
		return "", err
	}
	g, ok := v.Value().(string)
	switch {
	case !ok:
		return "", fmt.Errorf("gave %v, not a string", v.Value())
	case len(g) > MaxGroupBytes || !utf8.ValidString(g) || strings.ContainsRune(g, 0):
		return "", fmt.Errorf("gave a group that is not valid UTF-8 of at most %d bytes without NUL characters", MaxGroupBytes)
	}
	return g, nil
}
