package demo

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// The demo fleet's downstream systems, in memory. What matters is how each
// answers a repeat: the payment provider deduplicates by idempotency key
// (so its tools are keyed), the mailer does not (unkeyed), and the CRM sets
// state (idempotent) or only reads it (read_only). And whether each can be
// asked what happened: the payment provider can be searched by key, the
// mailer cannot.

// demoPSP is a payment provider that honours idempotency keys the way
// Stripe does: a repeat of a key returns what the first request created.
type demoPSP struct {
	mu      sync.Mutex
	byKey   map[string]string // idempotency key → refund or charge id
	created map[string]int    // "refund" / "charge" → how many were created
}

func newDemoPSP() *demoPSP {
	return &demoPSP{byKey: map[string]string{}, created: map[string]int{}}
}

// do creates a refund or charge once per idempotency key.
func (p *demoPSP) do(kind, idempotencyKey string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id, ok := p.byKey[idempotencyKey]; ok {
		return id
	}
	p.created[kind]++
	prefix := map[string]string{"refund": "re_", "charge": "ch_"}[kind]
	id := fmt.Sprintf("%s%04d", prefix, p.created[kind])
	p.byKey[idempotencyKey] = id
	return id
}

// find returns what the PSP created for idempotencyKey, if anything: its
// search by key, which the workers' lookups use.
func (p *demoPSP) find(_ context.Context, idempotencyKey string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id, ok := p.byKey[idempotencyKey]
	return id, ok
}

func (p *demoPSP) refund(_ context.Context, idempotencyKey string) string {
	return p.do("refund", idempotencyKey)
}

func (p *demoPSP) charge(_ context.Context, idempotencyKey string) string {
	return p.do("charge", idempotencyKey)
}

// errCardDeclined is a final answer: the refund did not happen and retrying
// will not change that.
var errCardDeclined = errors.New("card_declined: the card was closed; refund by bank transfer")

// demoMailer sends whatever it is given, every time: it has no idempotency
// keys, so a retry after a lost answer may send the message twice.
type demoMailer struct {
	mu   sync.Mutex
	sent map[string]int // recipient → messages sent
	n    int
}

func newDemoMailer() *demoMailer { return &demoMailer{sent: map[string]int{}} }

func (m *demoMailer) send(_ context.Context, to string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n++
	m.sent[to]++
	return fmt.Sprintf("msg_%05d", m.n)
}

func (m *demoMailer) count(to string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sent[to]
}

// errMailerBusy is a transient refusal: nothing was sent, try again later.
var errMailerBusy = errors.New("421 4.7.0 try again later: the mail relay is busy")

// demoCRM holds customers' tiers: setting a tier twice changes nothing.
type demoCRM struct {
	mu    sync.Mutex
	tiers map[string]string
}

func newDemoCRM() *demoCRM { return &demoCRM{tiers: map[string]string{}} }

func (c *demoCRM) setTier(_ context.Context, customer, tier string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tiers[customer] = tier
}

func (c *demoCRM) tier(_ context.Context, customer string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.tiers[customer]; ok {
		return t
	}
	return "standard"
}
