package policies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/arbiter-ledger/arbiter/models"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// Breakers (SPEC "Limits across actions"): among a tool's actions of the
// last window that have an outcome or lost it, once there are at least
// min_actions, a share of timed-out ones above max_unknown_ratio, or of
// failed ones above max_failure_ratio, starts a freeze of its tools by the
// system. Ratios, not consecutive failures: a tool that fails every other
// call trips it. A breaker does not trip again while its freeze is active
// (the database keeps one per breaker), and after a person lifts it the
// breaker counts only what came after the lift.
type Breakers struct {
	*rules[models.Breaker, models.BreakerVersion, Breaker, struct{}]
	st      *services.Store
	now     func() time.Time
	freezes *Freezes
}

// Breaker bounds and defaults.
const (
	MaxBreakerWindow     = 86400 // one day, in seconds
	DefaultBreakerWindow = 300
	MaxMinActions        = 100000
	DefaultMinActions    = 10
)

// Breaker is a breaker as the API shows it. State is what it counts now,
// in the answers of GET.
type Breaker struct {
	ID              string        `json:"id"`
	Namespace       string        `json:"namespace"`
	Name            string        `json:"name"`
	Tools           []string      `json:"tools"`
	Window          int           `json:"window"`
	MinActions      int           `json:"min_actions"`
	MaxUnknownRatio *float64      `json:"max_unknown_ratio"`
	MaxFailureRatio *float64      `json:"max_failure_ratio"`
	Enabled         bool          `json:"enabled"`
	Version         int           `json:"version"`
	CreatedAt       time.Time     `json:"created_at"`
	UpdatedAt       time.Time     `json:"updated_at"`
	State           *BreakerState `json:"state,omitempty"`
}

// BreakerState is what a breaker counts now: its tools' actions since
// Since (the window's start, or the lift of its last freeze if later), and
// the freeze it started if that is still active.
type BreakerState struct {
	Since    time.Time      `json:"since"`
	Actions  int            `json:"actions"`
	TimedOut int            `json:"timed_out"`
	Failed   int            `json:"failed"`
	Freeze   *record.Freeze `json:"freeze"`
}

// BreakerInput is the body of POST and PATCH /v1/breakers; PATCH leaves
// absent fields as they are.
type BreakerInput struct {
	Name            *string   `json:"name"`
	Namespace       *string   `json:"namespace"`
	Tools           *[]string `json:"tools"`
	Window          *int      `json:"window"`
	MinActions      *int      `json:"min_actions"`
	MaxUnknownRatio *float64  `json:"max_unknown_ratio"`
	MaxFailureRatio *float64  `json:"max_failure_ratio"`
	Enabled         *bool     `json:"enabled"`
}

// NewBreakers returns the breaker service on st; it trips freezes through
// freezes.
func NewBreakers(st *services.Store, freezes *Freezes) *Breakers {
	return &Breakers{st: st, now: services.Now, freezes: freezes,
		rules: &rules[models.Breaker, models.BreakerVersion, Breaker, struct{}]{
			st: st, noun: "breakers", one: "breaker", versionOf: "breaker_id", toRule: toBreaker, notFound: breakerNotFound,
			scope:   func(b *Breaker) (string, progKey) { return b.Namespace, progKey{b.ID, b.Version} },
			def:     func(v *models.BreakerVersion) string { return v.BreakerDef },
			compile: func(*Breaker) struct{} { return struct{}{} },
			canRead: func(p services.Principal) error { return readRules(p, "breakers") }, canManage: manageBreakers, toModel: toBreakerModel, row: breakerVersion,
			next: func(b *Breaker, at time.Time) int {
				b.Version, b.UpdatedAt = b.Version+1, at
				return b.Version - 1
			},
			cache: map[string]cachedRules[Breaker]{}, progs: map[progKey]struct{}{}}}
}

func breakerNotFound(id string) error {
	return services.Errorf(services.CodeNotFound, "no breaker has id %q", id)
}

func manageBreakers(p services.Principal) error {
	if p.Role != services.RoleAdmin {
		return services.Errorf(services.CodeForbidden, "only admins manage breakers")
	}
	return nil
}

func invalidBreaker(format string, args ...any) error {
	return services.Errorf(services.CodeInvalidBreaker, format, args...)
}

func toBreaker(m *models.Breaker) *Breaker {
	b := &Breaker{ID: m.ID, Namespace: m.Namespace, Name: m.Name, Window: m.WindowSeconds, MinActions: m.MinActions,
		MaxUnknownRatio: m.MaxUnknownRatio, MaxFailureRatio: m.MaxFailureRatio, Enabled: m.Enabled, Version: m.Version,
		CreatedAt: m.CreatedAt.UTC(), UpdatedAt: m.UpdatedAt.UTC()}
	_ = json.Unmarshal([]byte(m.Tools), &b.Tools)
	if b.Tools == nil {
		b.Tools = []string{}
	}
	return b
}

func toBreakerModel(b *Breaker, m *models.Breaker) {
	tools, _ := json.Marshal(b.Tools)
	m.Namespace, m.Name, m.Tools, m.WindowSeconds, m.MinActions = b.Namespace, b.Name, string(tools), b.Window, b.MinActions
	m.MaxUnknownRatio, m.MaxFailureRatio, m.Enabled = b.MaxUnknownRatio, b.MaxFailureRatio, b.Enabled
	m.Version, m.CreatedAt, m.UpdatedAt = b.Version, b.CreatedAt, b.UpdatedAt
}

func breakerVersion(b *Breaker) *models.BreakerVersion {
	c := *b
	c.State = nil
	j, _ := json.Marshal(c)
	return &models.BreakerVersion{BreakerID: b.ID, Version: b.Version, BreakerDef: string(j), CreatedAt: b.UpdatedAt}
}

// applyBreaker writes the fields of in that are set onto b.
func applyBreaker(b *Breaker, in BreakerInput) {
	if in.Name != nil {
		b.Name = strings.TrimSpace(*in.Name)
	}
	if in.Tools != nil {
		b.Tools = append([]string{}, *in.Tools...)
	}
	if in.Window != nil {
		b.Window = *in.Window
	}
	if in.MinActions != nil {
		b.MinActions = *in.MinActions
	}
	if in.MaxUnknownRatio != nil {
		b.MaxUnknownRatio = in.MaxUnknownRatio
	}
	if in.MaxFailureRatio != nil {
		b.MaxFailureRatio = in.MaxFailureRatio
	}
	if in.Enabled != nil {
		b.Enabled = *in.Enabled
	}
}

func validRatio(r *float64) bool {
	return r == nil || (*r >= 0 && *r <= 1 && !math.IsNaN(*r))
}

// validateBreaker checks a breaker as it will be stored.
func validateBreaker(b *Breaker) error {
	switch {
	case strings.TrimSpace(b.Name) == "" || len(b.Name) > MaxNameBytes || !services.Printable(b.Name):
		return invalid("field \"name\" must be 1 to %d printable bytes", MaxNameBytes)
	case b.Window < 1 || b.Window > MaxBreakerWindow:
		return invalidBreaker("field \"window\" must be 1 to %d seconds", MaxBreakerWindow)
	case b.MinActions < 1 || b.MinActions > MaxMinActions:
		return invalidBreaker("field \"min_actions\" must be 1 to %d", MaxMinActions)
	case !validRatio(b.MaxUnknownRatio):
		return invalidBreaker("field \"max_unknown_ratio\" must be a share from 0 to 1")
	case !validRatio(b.MaxFailureRatio):
		return invalidBreaker("field \"max_failure_ratio\" must be a share from 0 to 1")
	case b.MaxUnknownRatio == nil && b.MaxFailureRatio == nil:
		return invalidBreaker("give \"max_unknown_ratio\", \"max_failure_ratio\" or both: a breaker needs a share to trip at")
	}
	return checkTools(b.Tools)
}

// Create adds a breaker.
func (s *Breakers) Create(ctx context.Context, pr services.Principal, in BreakerInput) (*Breaker, error) {
	if err := manageBreakers(pr); err != nil {
		return nil, err
	}
	if in.Namespace == nil || *in.Namespace == "" {
		return nil, invalid("field \"namespace\" is required")
	}
	switch {
	case in.Name == nil:
		return nil, invalid("field \"name\" is required")
	case in.Tools == nil:
		return nil, invalid("field \"tools\" is required: 1 to %d patterns", MaxTools)
	}
	now := s.now()
	b := &Breaker{ID: uuid.Must(uuid.NewV7()).String(), Namespace: *in.Namespace, Window: DefaultBreakerWindow,
		MinActions: DefaultMinActions, Enabled: true, Version: 1, CreatedAt: now, UpdatedAt: now}
	applyBreaker(b, in)
	if err := validateBreaker(b); err != nil {
		return nil, err
	}
	if err := namespaceExists(ctx, s.st, b.Namespace, "breakers"); err != nil {
		return nil, err
	}
	var m models.Breaker
	m.ID = b.ID
	toBreakerModel(b, &m)
	err := s.st.GormWriter().WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&m).Error; err != nil {
			return err
		}
		return tx.Create(breakerVersion(b)).Error
	})
	if err != nil {
		return nil, services.DBError("breakers: create", err)
	}
	return b, nil
}

// Get returns a breaker p may see, with what it counts now.
func (s *Breakers) Get(ctx context.Context, pr services.Principal, id string) (*Breaker, error) {
	b, err := s.get(ctx, pr, id)
	if err != nil {
		return nil, err
	}
	if b.State, err = s.state(ctx, b); err != nil {
		return nil, err
	}
	return b, nil
}

// List returns the breakers p may see, of namespace ns if set, oldest
// first, each with what it counts now.
func (s *Breakers) List(ctx context.Context, pr services.Principal, ns string) ([]*Breaker, error) {
	bs, err := s.list(ctx, pr, ns)
	if err != nil {
		return nil, err
	}
	for _, b := range bs {
		if b.State, err = s.state(ctx, b); err != nil {
			return nil, err
		}
	}
	return bs, nil
}

// Update changes a breaker and writes its next version.
func (s *Breakers) Update(ctx context.Context, pr services.Principal, id string, in BreakerInput) (*Breaker, error) {
	return s.change(ctx, pr, id, s.now(), func(b *Breaker) error {
		if in.Namespace != nil {
			return invalid("field \"namespace\" cannot change: create a breaker in the other namespace")
		}
		applyBreaker(b, in)
		return validateBreaker(b)
	})
}

// Delete stops a breaker; a freeze it started stays until lifted.
func (s *Breakers) Delete(ctx context.Context, pr services.Principal, id string) error {
	return s.remove(ctx, pr, id, s.now())
}

// Versions returns every version of a breaker p may see, oldest first.
func (s *Breakers) Versions(ctx context.Context, pr services.Principal, id string) ([]*Breaker, error) {
	return s.versions(ctx, pr, id)
}

// state counts what breaker b sees now.
func (s *Breakers) state(ctx context.Context, b *Breaker) (*BreakerState, error) {
	now := s.now()
	st := &BreakerState{Since: now.Add(-time.Duration(b.Window) * time.Second)}
	last, err := s.freezes.lastOf(ctx, b.ID)
	if err != nil {
		return nil, err
	}
	if last != nil && last.Active() {
		st.Freeze = last
	} else if last != nil && last.LiftedAt.After(st.Since) {
		st.Since = *last.LiftedAt
	}
	counts, err := s.st.Executor().BreakerCounts(ctx, &driver.BreakerCountParams{Namespace: b.Namespace, Since: st.Since, Now: now})
	if err != nil {
		return nil, services.DBError("breakers: count outcomes", err)
	}
	for _, c := range counts {
		if toolMatches(b.Tools, c.Tool) {
			st.Actions += c.Settled
			st.TimedOut += c.Unknown
			st.Failed += c.Failed
		}
	}
	return st, nil
}

// trips says why a breaker's counts, made at now, trip it, or "".
func (b *Breaker) trips(st *BreakerState, now time.Time) string {
	if st.Actions < b.MinActions || st.Actions == 0 {
		return ""
	}
	n := float64(st.Actions)
	var why []string
	if r := b.MaxUnknownRatio; r != nil && float64(st.TimedOut)/n > *r {
		why = append(why, fmt.Sprintf("%d of %d timed out", st.TimedOut, st.Actions))
	}
	if r := b.MaxFailureRatio; r != nil && float64(st.Failed)/n > *r {
		why = append(why, fmt.Sprintf("%d of %d failed", st.Failed, st.Actions))
	}
	if len(why) == 0 {
		return ""
	}
	return fmt.Sprintf("%s in the last %d s", strings.Join(why, " and "), int(now.Sub(st.Since).Round(time.Second).Seconds()))
}

// Check counts every enabled breaker's actions and trips those over their
// shares, and returns the freezes it started. Every replica may check; the
// database lets one freeze of a breaker stand at a time, so a breaker
// trips once however many check it.
func (s *Breakers) Check(ctx context.Context) ([]*record.Freeze, error) {
	var ms []models.Breaker
	if err := s.st.Gorm().WithContext(ctx).Where("enabled AND deleted_at IS NULL").Order("created_at, id").
		Find(&ms).Error; err != nil {
		return nil, services.DBError("breakers: read enabled breakers", err)
	}
	var started []*record.Freeze
	for i := range ms {
		b := toBreaker(&ms[i])
		st, err := s.state(ctx, b)
		if err != nil {
			return started, err
		}
		if st.Freeze != nil {
			continue
		}
		why := b.trips(st, s.now())
		if why == "" {
			continue
		}
		id := b.ID
		f := &record.Freeze{ID: uuid.Must(uuid.NewV7()).String(), Namespace: b.Namespace, Tools: b.Tools, Reason: why,
			By: record.Actor{Kind: record.ActorSystem, Name: "breaker:" + b.Name}, BreakerID: &id, StartedAt: s.now()}
		switch err := s.freezes.insert(ctx, f); {
		case errors.Is(err, errTripped):
		case err != nil:
			return started, err
		default:
			started = append(started, f)
		}
	}
	return started, nil
}

// RunBrakes checks the breakers and finishes the release of lifted
// freezes every interval until ctx ends; onTrip observes each freeze a
// breaker starts.
func RunBrakes(ctx context.Context, log *slog.Logger, interval time.Duration, fz *Freezes, bs *Breakers,
	onTrip func(*record.Freeze)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		started, err := bs.Check(ctx)
		for _, f := range started {
			log.Warn("breaker tripped: freeze started", "namespace", f.Namespace, "by", f.By.Name, "reason", f.Reason,
				"freeze", f.ID)
			if onTrip != nil {
				onTrip(f)
			}
		}
		if err != nil && ctx.Err() == nil {
			log.Error("breakers: check failed", "err", err)
		}
		if _, err := fz.ReleaseLifted(ctx); err != nil && ctx.Err() == nil {
			log.Error("freezes: release of lifted freezes failed", "err", err)
		}
	}
}
