package policies

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/arbiter-ledger/arbiter/models"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// Limits of a policy (SPEC "Approval before execution").
const (
	MaxTools             = 20
	MaxToolPattern       = 128
	MaxNameBytes         = 128
	MaxConditionBytes    = 4096
	DefaultApprovals     = 1
	MaxApprovals         = 5
	DefaultExpiresAfter  = 86400
	MinExpiresAfter      = 60
	MaxExpiresAfter      = 604800
	MinEscalateAfter     = 10
	DefaultTestLimit     = 1000
	MaxTestLimit         = 10000
	testSample           = 5
	policyCacheFreshness = time.Second
	// DefaultTestBudget bounds the time of one policy test in all; each
	// evaluation has its own bound besides (cel.go).
	DefaultTestBudget = 5 * time.Second
)

// Policy is a policy as the API shows it.
type Policy struct {
	ID                string   `json:"id"`
	Namespace         string   `json:"namespace"`
	Name              string   `json:"name"`
	Tools             []string `json:"tools"`
	Condition         string   `json:"condition"`
	ApprovalsRequired int      `json:"approvals_required"`
	ExpiresAfter      int      `json:"expires_after"`
	EscalateAfter     *int     `json:"escalate_after"`
	// Mode is enforce, or shadow: a shadow policy's matches are recorded on
	// the intent's entry, and nothing is held.
	Mode      string    `json:"mode"`
	Enabled   bool      `json:"enabled"`
	Version   int       `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Input creates a policy, or (fields left nil) changes some of its fields.
// EscalateAfter set to 0 on a change removes the escalation.
type Input struct {
	Name              *string   `json:"name,omitempty"`
	Namespace         *string   `json:"namespace,omitempty"`
	Tools             *[]string `json:"tools,omitempty"`
	Condition         *string   `json:"condition,omitempty"`
	ApprovalsRequired *int      `json:"approvals_required,omitempty"`
	ExpiresAfter      *int      `json:"expires_after,omitempty"`
	EscalateAfter     *int      `json:"escalate_after,omitempty"`
	Mode              *string   `json:"mode,omitempty"`
	Enabled           *bool     `json:"enabled,omitempty"`
}

// TestInput asks what a rule would have caught.
type TestInput struct {
	Namespace string   `json:"namespace"`
	Tools     []string `json:"tools"`
	Condition string   `json:"condition"`
	// Limit is how many first intents to examine; nil for the default. An
	// explicit 0 is refused rather than read as the default.
	Limit *int `json:"limit,omitempty"`
}

// TestResult says how many of the namespace's latest first intents the rule
// would have caught, with a few of them.
type TestResult struct {
	Examined int              `json:"examined"`
	Matched  int              `json:"matched"`
	Sample   []*record.Action `json:"sample"`
	// Errors counts intents the condition failed on (they count as
	// matched: fail closed).
	Errors int `json:"errors"`
	// Partial says the test ran out of its time budget before it examined
	// every intent it read; Examined counts those it did.
	Partial bool `json:"partial"`
}

// Service manages policies and matches first intents against them.
type Service struct {
	st  *services.Store
	now func() time.Time
	// testBudget bounds one Test (DefaultTestBudget).
	testBudget time.Duration

	*rules[models.Policy, models.PolicyVersion, Policy, *compiled]
}

// New returns the policy service on st.
func New(st *services.Store) *Service {
	return &Service{st: st, now: services.Now, testBudget: DefaultTestBudget,
		rules: &rules[models.Policy, models.PolicyVersion, Policy, *compiled]{
			st: st, noun: "policies", one: "policy", versionOf: "policy_id", toRule: toPolicy, notFound: notFound,
			scope: func(p *Policy) (string, progKey) { return p.Namespace, progKey{p.ID, p.Version} },
			def:   func(v *models.PolicyVersion) string { return v.Policy },
			compile: func(p *Policy) *compiled {
				prg, err := compile(p.Condition)
				return &compiled{prg: prg, err: err}
			},
			canRead: read, canManage: manage, toModel: toModel, row: version,
			next: func(p *Policy, at time.Time) int {
				p.Version, p.UpdatedAt = p.Version+1, at
				return p.Version - 1
			},
			cache: map[string]cachedRules[Policy]{}, progs: map[progKey]*compiled{}}}
}

func invalid(format string, args ...any) error {
	return services.Errorf(services.CodeInvalid, format, args...)
}

// validate checks a policy as it will be stored.
func validate(p *Policy) error {
	switch {
	case strings.TrimSpace(p.Name) == "" || len(p.Name) > MaxNameBytes || !services.Printable(p.Name):
		return invalid("field \"name\" must be 1 to %d printable bytes", MaxNameBytes)
	case p.ApprovalsRequired < 1 || p.ApprovalsRequired > MaxApprovals:
		return invalid("field \"approvals_required\" must be 1 to %d distinct people", MaxApprovals)
	case p.ExpiresAfter < MinExpiresAfter || p.ExpiresAfter > MaxExpiresAfter:
		return invalid("field \"expires_after\" must be %d to %d seconds", MinExpiresAfter, MaxExpiresAfter)
	case p.EscalateAfter != nil && (*p.EscalateAfter < MinEscalateAfter || *p.EscalateAfter >= p.ExpiresAfter):
		return invalid("field \"escalate_after\" must be at least %d seconds and less than expires_after (%d)",
			MinEscalateAfter, p.ExpiresAfter)
	case len(p.Condition) > MaxConditionBytes || !utf8.ValidString(p.Condition) || strings.ContainsRune(p.Condition, 0):
		// A NUL would compile inside a CEL string literal, but PostgreSQL
		// cannot store it.
		return invalid("field \"condition\" must be valid UTF-8 of at most %d bytes, without NUL characters", MaxConditionBytes)
	case p.Mode != record.LimitEnforce && p.Mode != record.LimitShadow:
		return invalid("field \"mode\" must be \"enforce\" or \"shadow\"")
	}
	if err := checkTools(p.Tools); err != nil {
		return err
	}
	if _, err := compile(p.Condition); err != nil {
		return services.Errorf(services.CodeInvalidPolicy, "the condition does not compile: %v", err)
	}
	return nil
}

// manage checks that p may change policies of namespace ns.
func manage(p services.Principal) error {
	if p.Role != services.RoleAdmin {
		return services.Errorf(services.CodeForbidden, "only admins manage policies")
	}
	return nil
}

// read checks that p may read policies: agent keys may not (they would
// learn how to word an intent that escapes a rule).
func read(p services.Principal) error {
	if p.Role == services.RoleAgent {
		return services.Errorf(services.CodeForbidden, "agent keys may not read policies; use a reader, operator or admin key")
	}
	return nil
}

func notFound(id string) error {
	return services.Errorf(services.CodeNotFound, "no policy has id %q", id)
}

func toPolicy(m *models.Policy) *Policy {
	p := &Policy{ID: m.ID, Namespace: m.Namespace, Name: m.Name, Condition: m.Condition,
		ApprovalsRequired: m.ApprovalsRequired, ExpiresAfter: m.ExpiresAfter, EscalateAfter: m.EscalateAfter,
		Mode: m.Mode, Enabled: m.Enabled, Version: m.Version, CreatedAt: m.CreatedAt.UTC(), UpdatedAt: m.UpdatedAt.UTC()}
	_ = json.Unmarshal([]byte(m.Tools), &p.Tools)
	if p.Tools == nil {
		p.Tools = []string{}
	}
	return p
}

func toModel(p *Policy, m *models.Policy) {
	tools, _ := json.Marshal(p.Tools)
	m.Namespace, m.Name, m.Tools, m.Condition = p.Namespace, p.Name, string(tools), p.Condition
	m.ApprovalsRequired, m.ExpiresAfter, m.EscalateAfter, m.Enabled = p.ApprovalsRequired, p.ExpiresAfter, p.EscalateAfter, p.Enabled
	m.Mode = p.Mode
	m.Version, m.CreatedAt, m.UpdatedAt = p.Version, p.CreatedAt, p.UpdatedAt
}

// apply writes the fields of in that are set onto p.
func apply(p *Policy, in Input) {
	if in.Name != nil {
		p.Name = strings.TrimSpace(*in.Name)
	}
	if in.Tools != nil {
		p.Tools = append([]string{}, *in.Tools...)
	}
	if in.Condition != nil {
		p.Condition = *in.Condition
	}
	if in.ApprovalsRequired != nil {
		p.ApprovalsRequired = *in.ApprovalsRequired
	}
	if in.ExpiresAfter != nil {
		p.ExpiresAfter = *in.ExpiresAfter
	}
	if in.EscalateAfter != nil {
		p.EscalateAfter = in.EscalateAfter
		if *in.EscalateAfter == 0 {
			p.EscalateAfter = nil
		}
	}
	if in.Mode != nil {
		p.Mode = *in.Mode
	}
	if in.Enabled != nil {
		p.Enabled = *in.Enabled
	}
}

// Create adds a policy at version 1.
func (s *Service) Create(ctx context.Context, pr services.Principal, in Input) (*Policy, error) {
	if err := manage(pr); err != nil {
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
		return nil, services.DBError("policies: find namespace", err)
	}
	if n == 0 {
		return nil, services.Errorf(services.CodeNotFound, "no namespace is named %q", *in.Namespace)
	}
	now := s.now()
	p := &Policy{ID: uuid.Must(uuid.NewV7()).String(), Namespace: *in.Namespace, Tools: []string{}, Enabled: true,
		Mode:              record.LimitEnforce,
		ApprovalsRequired: DefaultApprovals, ExpiresAfter: DefaultExpiresAfter, Version: 1, CreatedAt: now, UpdatedAt: now}
	if in.Name == nil {
		return nil, invalid("field \"name\" is required")
	}
	if in.Tools == nil {
		return nil, invalid("field \"tools\" is required: 1 to %d patterns", MaxTools)
	}
	apply(p, in)
	if in.EscalateAfter != nil && *in.EscalateAfter == 0 {
		return nil, invalid("field \"escalate_after\" must be at least %d seconds", MinEscalateAfter)
	}
	if err := validate(p); err != nil {
		return nil, err
	}
	var m models.Policy
	m.ID = p.ID
	toModel(p, &m)
	err := s.st.GormWriter().WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&m).Error; err != nil {
			return err
		}
		return tx.Create(version(p)).Error
	})
	if err != nil {
		return nil, services.DBError("policies: create", err)
	}
	s.forget(p.Namespace)
	return p, nil
}

func version(p *Policy) *models.PolicyVersion {
	b, _ := json.Marshal(p)
	return &models.PolicyVersion{PolicyID: p.ID, Version: p.Version, Policy: string(b), CreatedAt: p.UpdatedAt}
}

// Get returns a policy p may see.
func (s *Service) Get(ctx context.Context, pr services.Principal, id string) (*Policy, error) {
	return s.get(ctx, pr, id)
}

// List returns the policies p may see, of namespace ns if set, oldest
// first.
func (s *Service) List(ctx context.Context, pr services.Principal, ns string) ([]*Policy, error) {
	return s.list(ctx, pr, ns)
}

// Update changes a policy and writes its next version; the change applies
// to first intents from now on, never to actions already waiting.
func (s *Service) Update(ctx context.Context, pr services.Principal, id string, in Input) (*Policy, error) {
	return s.change(ctx, pr, id, s.now(), func(p *Policy) error {
		if in.Namespace != nil {
			return invalid("field \"namespace\" cannot change: create a policy in the other namespace")
		}
		apply(p, in)
		return validate(p)
	})
}

// Delete stops a policy from applying; its versions stay readable.
func (s *Service) Delete(ctx context.Context, pr services.Principal, id string) error {
	return s.remove(ctx, pr, id, s.now())
}

// Versions returns every version of a policy p may see, oldest first, also
// after it was deleted.
func (s *Service) Versions(ctx context.Context, pr services.Principal, id string) ([]*Policy, error) {
	return s.versions(ctx, pr, id)
}

// Test evaluates a rule, without saving it, on the namespace's latest first
// intents (its actions, newest first). Nothing is written. It stops when
// ctx ends (the client left), and answers what it examined when its time
// budget runs out.
func (s *Service) Test(ctx context.Context, pr services.Principal, in TestInput) (*TestResult, error) {
	// Admins only: it runs a condition of the caller's choosing over the
	// ledger.
	if pr.Role != services.RoleAdmin {
		return nil, services.Errorf(services.CodeForbidden, "only admins may test policies")
	}
	limit := DefaultTestLimit
	if in.Limit != nil {
		limit = *in.Limit
	}
	if limit < 1 || limit > MaxTestLimit {
		return nil, invalid("field \"limit\" must be 1 to %d", MaxTestLimit)
	}
	if in.Namespace == "" {
		return nil, invalid("field \"namespace\" is required")
	}
	if !pr.Sees(in.Namespace) {
		return nil, services.Errorf(services.CodeNotFound, "no namespace is named %q", in.Namespace)
	}
	rule := &Policy{Name: "test", Namespace: in.Namespace, Tools: in.Tools, Condition: in.Condition,
		ApprovalsRequired: 1, ExpiresAfter: DefaultExpiresAfter, Mode: record.LimitEnforce}
	if err := validate(rule); err != nil {
		return nil, err
	}
	prg, _ := compile(in.Condition)
	actions, err := s.st.Executor().ActionList(ctx, &driver.ActionListParams{Namespace: in.Namespace, Limit: limit})
	if err != nil {
		return nil, services.DBError("policies: read recent intents", err)
	}
	res := &TestResult{Sample: []*record.Action{}}
	budget, cancel := context.WithTimeout(ctx, s.testBudget)
	defer cancel()
	for _, a := range actions {
		if err := context.Cause(ctx); err != nil {
			return nil, fmt.Errorf("policies: test stopped: %w", err)
		}
		if budget.Err() != nil {
			res.Partial = true
			break
		}
		if !toolMatches(rule.Tools, a.Tool) {
			res.Examined++
			continue
		}
		ok, err := evalIn(budget, prg, factsOf(a).activation())
		if err != nil && budget.Err() != nil {
			continue // stopped by the budget (or the caller), not examined
		}
		res.Examined++
		if err != nil {
			res.Errors++
			ok = true
		}
		if ok {
			res.Matched++
			if len(res.Sample) < testSample {
				res.Sample = append(res.Sample, a)
			}
		}
	}
	return res, nil
}

func toolMatches(patterns []string, tool string) bool {
	for _, p := range patterns {
		if matchTool(p, tool) {
			return true
		}
	}
	return false
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func factsOf(a *record.Action) Facts {
	f := Facts{Tool: a.Tool, Effect: string(a.Effect), Agent: deref(a.Agent), Namespace: a.Namespace,
		Reference: deref(a.Reference), RunID: deref(a.RunID)}
	_ = json.Unmarshal(a.Params, &f.Params)
	return f
}
