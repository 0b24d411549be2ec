package policies

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/arbiter-ledger/arbiter/models"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// Freezes (SPEC "Limits across actions"): operators of a namespace and
// admins start and lift them; a breaker starts one as the system. The
// ledger asks Frozen about every intent, from the active freezes of its
// namespace as read at most FreezeFreshness ago, so a freeze started or
// lifted on one replica holds on every replica within a second.
type Freezes struct {
	st  *services.Store
	now func() time.Time
	cfg FreezesConfig

	mu    sync.Mutex
	cache map[string]cachedFreezes // by namespace
}

type cachedFreezes struct {
	read    time.Time
	freezes []*record.Freeze
}

// FreezeFreshness bounds how old the active freezes an intent is judged by
// may be.
const FreezeFreshness = 500 * time.Millisecond

// releaseSettle is how long after a lift the sweeper keeps letting go of
// what the freeze held: an intent judged by freezes read just before the
// lift may still be held by it.
const releaseSettle = 2 * FreezeFreshness

// FreezeInput is the body of POST /v1/freezes.
type FreezeInput struct {
	Namespace *string   `json:"namespace"`
	Tools     *[]string `json:"tools"`
	Reason    *string   `json:"reason"`
}

// LiftInput is the body of POST /v1/freezes/{id}/lift.
type LiftInput struct {
	Reason *string `json:"reason"`
}

// FreezesConfig is what the freeze service is built with.
type FreezesConfig struct {
	// Release lets go of the actions a lifted freeze held: the ledger's
	// Release.
	Release func(ctx context.Context, ns, id string, by record.Actor, why string) (int, error)
	// OnAlert runs after a freeze's alert is written, to wake the
	// dispatcher (nil: nothing).
	OnAlert func()
}

// NewFreezes returns the freeze service on st.
func NewFreezes(st *services.Store, cfg FreezesConfig) *Freezes {
	return &Freezes{st: st, now: services.Now, cfg: cfg, cache: map[string]cachedFreezes{}}
}

func freezeNotFound(id string) error {
	return services.Errorf(services.CodeNotFound, "no freeze has id %q", id)
}

func toFreeze(m *models.Freeze) *record.Freeze {
	f := &record.Freeze{ID: m.ID, Namespace: m.Namespace, Reason: m.Reason,
		By: record.Actor{Kind: record.ActorKind(m.ByKind), Name: m.ByName, Via: m.ByVia}, BreakerID: m.BreakerID,
		StartedAt: m.StartedAt.UTC(), LiftedAt: services.UTCPtr(m.LiftedAt), LiftReason: m.LiftReason}
	_ = json.Unmarshal([]byte(m.Tools), &f.Tools)
	if f.Tools == nil {
		f.Tools = []string{}
	}
	if m.LiftedKind != nil && m.LiftedName != nil {
		f.LiftedBy = &record.Actor{Kind: record.ActorKind(*m.LiftedKind), Name: *m.LiftedName}
		if m.LiftedVia != nil {
			f.LiftedBy.Via = *m.LiftedVia
		}
	}
	return f
}

func checkReason(r *string) (string, error) {
	if r == nil || strings.TrimSpace(*r) == "" {
		return "", invalid("field \"reason\" is required: say why, for whoever is held and whoever lifts it")
	}
	if len(*r) > services.MaxReasonBytes || !services.Printable(strings.ReplaceAll(*r, "\n", " ")) {
		return "", invalid("field \"reason\" must be at most %d printable bytes", services.MaxReasonBytes)
	}
	return strings.TrimSpace(*r), nil
}

func checkTools(tools []string) error {
	if len(tools) < 1 || len(tools) > MaxTools {
		return invalid("field \"tools\" must list 1 to %d patterns", MaxTools)
	}
	for _, t := range tools {
		if t == "" || len(t) > MaxToolPattern || !services.Printable(t) {
			return invalid("each pattern of \"tools\" must be 1 to %d printable bytes", MaxToolPattern)
		}
	}
	return nil
}

// mayFreeze checks that p may start and lift freezes in ns: its operators
// and admins, the person on call among them.
func mayFreeze(p services.Principal, ns string) error {
	if !p.DecidesIn(ns) {
		if p.Sees(ns) {
			return services.Errorf(services.CodeForbidden, "only operators of namespace %q and admins start and lift freezes", ns)
		}
		return services.Errorf(services.CodeNotFound, "no namespace is named %q", ns)
	}
	return nil
}

// namespaceExists answers not_found for a namespace that does not exist.
func namespaceExists(ctx context.Context, st *services.Store, ns, what string) error {
	if err := services.ValidateNamespace(ns); err != nil {
		return err
	}
	var n int64
	if err := st.Gorm().WithContext(ctx).Model(&models.Namespace{}).Where("name = ?", ns).Count(&n).Error; err != nil {
		return services.DBError(what+": find namespace", err)
	}
	if n == 0 {
		return services.Errorf(services.CodeNotFound, "no namespace is named %q", ns)
	}
	return nil
}

// Start starts a freeze of a namespace's tools (all of them when tools is
// not given), as p.
func (s *Freezes) Start(ctx context.Context, pr services.Principal, in FreezeInput) (*record.Freeze, error) {
	if in.Namespace == nil || *in.Namespace == "" {
		return nil, invalid("field \"namespace\" is required")
	}
	ns := *in.Namespace
	if err := services.ValidateNamespace(ns); err != nil {
		return nil, err
	}
	if err := mayFreeze(pr, ns); err != nil {
		return nil, err
	}
	tools := []string{"*"}
	if in.Tools != nil {
		tools = *in.Tools
	}
	if err := checkTools(tools); err != nil {
		return nil, err
	}
	reason, err := checkReason(in.Reason)
	if err != nil {
		return nil, err
	}
	if err := namespaceExists(ctx, s.st, ns, "freezes"); err != nil {
		return nil, err
	}
	f := &record.Freeze{ID: uuid.Must(uuid.NewV7()).String(), Namespace: ns, Tools: tools, Reason: reason,
		By: services.Decider(pr), StartedAt: s.now()}
	if err := s.insert(ctx, f); err != nil {
		return nil, err
	}
	return f, nil
}

// insert writes a new freeze and its freeze.started alert in one
// transaction; a breaker's second active freeze is refused by the
// database (errTripped).
func (s *Freezes) insert(ctx context.Context, f *record.Freeze) error {
	tools, _ := json.Marshal(f.Tools)
	m := models.Freeze{ID: f.ID, Namespace: f.Namespace, Tools: string(tools), Reason: f.Reason, ByKind: string(f.By.Kind),
		ByName: f.By.Name, ByVia: f.By.Via, BreakerID: f.BreakerID, StartedAt: f.StartedAt}
	err := s.st.GormWriter().WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&m).Error; err != nil {
			return err
		}
		return queueAlert(tx, f.Namespace, record.EventFreezeStarted, f, f.StartedAt)
	})
	if err != nil && f.BreakerID != nil {
		// Another replica's check tripped the breaker first: the database
		// keeps one active freeze per breaker.
		if tripped, rerr := s.tripped(ctx, *f.BreakerID); rerr == nil && tripped != nil {
			return errTripped
		}
	}
	if err != nil {
		return services.DBError("freezes: start", err)
	}
	s.forget(f.Namespace)
	s.alerted()
	return nil
}

var errTripped = errors.New("freezes: the breaker's freeze is active")

// tripped returns the active freeze a breaker started, or nil.
func (s *Freezes) tripped(ctx context.Context, breakerID string) (*record.Freeze, error) {
	f, err := s.lastOf(ctx, breakerID)
	if err != nil || f == nil || !f.Active() {
		return nil, err
	}
	return f, nil
}

// lastOf returns the newest freeze a breaker started, or nil.
func (s *Freezes) lastOf(ctx context.Context, breakerID string) (*record.Freeze, error) {
	var ms []models.Freeze
	if err := s.st.Gorm().WithContext(ctx).Where("breaker_id = ?", breakerID).Order("started_at DESC").Limit(1).
		Find(&ms).Error; err != nil {
		return nil, services.DBError("freezes: read a breaker's freeze", err)
	}
	if len(ms) == 0 {
		return nil, nil
	}
	return toFreeze(&ms[0]), nil
}

func (s *Freezes) alerted() {
	if s.cfg.OnAlert != nil {
		s.cfg.OnAlert()
	}
}

// Lift lifts an active freeze, as p, and lets go of what it held: each
// action it held is approved once no other freeze holds it and its people
// have approved it. Lifting a lifted freeze is a conflict.
func (s *Freezes) Lift(ctx context.Context, pr services.Principal, id string, in LiftInput) (*record.Freeze, error) {
	f, err := s.Get(ctx, pr, id)
	if err != nil {
		return nil, err
	}
	if err := mayFreeze(pr, f.Namespace); err != nil {
		return nil, err
	}
	reason, err := checkReason(in.Reason)
	if err != nil {
		return nil, err
	}
	if !f.Active() {
		return nil, services.Errorf(services.CodeConflict, "freeze %s was lifted at %s by %s", id,
			f.LiftedAt.Format(time.RFC3339), f.LiftedBy.Name)
	}
	by, now := services.Decider(pr), s.now()
	f.LiftedAt, f.LiftedBy, f.LiftReason = &now, &by, &reason
	lifted := false
	err = s.st.GormWriter().WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&models.Freeze{}).Where("id = ? AND lifted_at IS NULL", id).Updates(map[string]any{
			"lifted_at": now, "lifted_kind": string(by.Kind), "lifted_name": by.Name, "lifted_via": by.Via, "lift_reason": reason})
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		lifted = true
		return queueAlert(tx, f.Namespace, record.EventFreezeLifted, f, now)
	})
	if err != nil {
		return nil, services.DBError("freezes: lift", err)
	}
	if !lifted {
		return nil, services.Errorf(services.CodeConflict, "freeze %s was lifted meanwhile; read it again", id)
	}
	s.forget(f.Namespace)
	s.alerted()
	// What the freeze held is let go now. The lift stands whatever happens
	// next: if this fails, or the process stops, the sweeper finishes it
	// (ReleaseLifted).
	_, _ = s.cfg.Release(ctx, f.Namespace, id, by, reason)
	return f, nil
}

// Get returns a freeze p may see.
func (s *Freezes) Get(ctx context.Context, pr services.Principal, id string) (*record.Freeze, error) {
	if _, err := uuid.Parse(id); err != nil {
		return nil, freezeNotFound(id)
	}
	var ms []models.Freeze
	if err := s.st.Gorm().WithContext(ctx).Where("id = ?", id).Limit(1).Find(&ms).Error; err != nil {
		return nil, services.DBError("freezes: read", err)
	}
	if len(ms) == 0 || !pr.Sees(ms[0].Namespace) {
		return nil, freezeNotFound(id)
	}
	return toFreeze(&ms[0]), nil
}

// MaxFreezeList bounds a list of freezes.
const MaxFreezeList = 500

// List returns the freezes p may see, of namespace ns if set, only the
// active ones if asked, newest first (at most MaxFreezeList).
func (s *Freezes) List(ctx context.Context, pr services.Principal, ns string, active bool) ([]*record.Freeze, error) {
	if err := services.CheckFilterText("namespace", ns); err != nil {
		return nil, err
	}
	q := s.st.Gorm().WithContext(ctx)
	one, among, none := pr.Scope(ns)
	switch {
	case none:
		return []*record.Freeze{}, nil
	case one != "":
		q = q.Where("namespace = ?", one)
	case len(among) > 0:
		q = q.Where("namespace IN ?", among)
	}
	if active {
		q = q.Where("lifted_at IS NULL")
	}
	var ms []models.Freeze
	if err := q.Order("started_at DESC, id DESC").Limit(MaxFreezeList).Find(&ms).Error; err != nil {
		return nil, services.DBError("freezes: list", err)
	}
	out := make([]*record.Freeze, 0, len(ms))
	for i := range ms {
		out = append(out, toFreeze(&ms[i]))
	}
	return out, nil
}

// Frozen answers which active freezes of namespace ns cover tool.
func (s *Freezes) Frozen(ctx context.Context, ns, tool string) ([]record.FreezeRef, error) {
	fs, err := s.active(ctx, ns)
	if err != nil {
		return nil, err
	}
	var out []record.FreezeRef
	for _, f := range fs {
		if toolMatches(f.Tools, tool) {
			out = append(out, f.Ref())
		}
	}
	return out, nil
}

// active returns the active freezes of ns, read again at most
// FreezeFreshness after they were read.
func (s *Freezes) active(ctx context.Context, ns string) ([]*record.Freeze, error) {
	now := time.Now()
	s.mu.Lock()
	c, ok := s.cache[ns]
	s.mu.Unlock()
	if ok && now.Sub(c.read) < FreezeFreshness {
		return c.freezes, nil
	}
	var ms []models.Freeze
	if err := s.st.Gorm().WithContext(ctx).Where("namespace = ? AND lifted_at IS NULL", ns).
		Order("started_at, id").Find(&ms).Error; err != nil {
		return nil, err
	}
	fs := make([]*record.Freeze, 0, len(ms))
	for i := range ms {
		fs = append(fs, toFreeze(&ms[i]))
	}
	s.mu.Lock()
	s.cache[ns] = cachedFreezes{read: now, freezes: fs}
	s.mu.Unlock()
	return fs, nil
}

func (s *Freezes) forget(ns string) {
	s.mu.Lock()
	delete(s.cache, ns)
	s.mu.Unlock()
}

// ReleaseLifted lets go of what lifted freezes held, for those whose
// release has not settled: a lift whose own release failed, or whose
// process stopped, is finished here, by the sweeper. It returns how many
// actions it changed.
func (s *Freezes) ReleaseLifted(ctx context.Context) (int, error) {
	var ms []models.Freeze
	if err := s.st.Gorm().WithContext(ctx).Where("released_at IS NULL AND lifted_at IS NOT NULL").
		Order("lifted_at").Limit(100).Find(&ms).Error; err != nil {
		return 0, services.DBError("freezes: read lifted freezes", err)
	}
	n := 0
	for i := range ms {
		f := toFreeze(&ms[i])
		k, err := s.cfg.Release(ctx, f.Namespace, f.ID, *f.LiftedBy, *f.LiftReason)
		n += k
		if err != nil {
			return n, err
		}
		if s.now().Sub(*f.LiftedAt) < releaseSettle {
			continue
		}
		if err := s.st.GormWriter().WithContext(ctx).Model(&models.Freeze{}).Where("id = ?", f.ID).
			Update("released_at", s.now()).Error; err != nil {
			return n, services.DBError("freezes: mark released", err)
		}
	}
	return n, nil
}

// queueAlert writes the alert of a freeze for every enabled endpoint that
// subscribes to its type and namespace, in tx.
func queueAlert(tx *gorm.DB, ns string, typ record.EventType, f *record.Freeze, at time.Time) error {
	var eps []models.WebhookEndpoint
	if err := tx.Where("enabled").Find(&eps).Error; err != nil {
		return err
	}
	var to []string
	for _, e := range eps {
		var types, nss []string
		_ = json.Unmarshal([]byte(e.EventTypes), &types)
		_ = json.Unmarshal([]byte(e.Namespaces), &nss)
		if contains(types, string(typ)) && (len(nss) == 0 || contains(nss, ns)) {
			to = append(to, e.ID)
		}
	}
	if len(to) == 0 {
		return nil
	}
	body, _ := json.Marshal(services.MessageBody{Type: typ, Timestamp: at, Data: services.MessageData{Freeze: f}})
	msg := models.WebhookMessage{ID: uuid.Must(uuid.NewV7()).String(), EventType: string(typ), Namespace: &ns,
		Payload: body, CreatedAt: at}
	if err := tx.Create(&msg).Error; err != nil {
		return err
	}
	for _, id := range to {
		if err := tx.Create(&models.WebhookDelivery{ID: uuid.Must(uuid.NewV7()).String(), MessageID: msg.ID, EndpointID: id,
			State: "pending", NextAttemptAt: at, CreatedAt: at, UpdatedAt: at}).Error; err != nil {
			return err
		}
	}
	return nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// NewBraked builds the ledger of st with cfg and the freeze and breaker
// services that work with it: the ledger asks the freezes about every
// intent, and a lifted freeze lets go of what it held through the ledger.
// onAlert wakes the dispatcher after a freeze's alert (nil: nothing).
func NewBraked(st *services.Store, cfg services.LedgerConfig, onAlert func()) (*services.Ledger, *Freezes, *Breakers) {
	var l *services.Ledger
	fz := NewFreezes(st, FreezesConfig{OnAlert: onAlert,
		Release: func(ctx context.Context, ns, id string, by record.Actor, why string) (int, error) {
			return l.Release(ctx, ns, id, by, why)
		}})
	cfg.Freezer = fz
	l = services.NewLedger(st, cfg)
	return l, fz, NewBreakers(st, fz)
}
