package accounts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/arbiter-ledger/arbiter/models"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/driver"
)

// KeyPrefix starts every API key, so leaked keys are easy to recognise.
const KeyPrefix = "ak_"

// Keys manages namespaces and API keys and authenticates requests. A server
// builds one and shares it, so that a key revoked through it stops working
// at once (through another Keys, within authCacheTTL).
type Keys struct {
	st    *services.Store
	cache authCache
}

// authCache remembers authenticated keys.
type authCache struct {
	mu sync.Mutex
	m  map[[32]byte]cachedKey
}

// authCacheTTL bounds how long an authenticated key is trusted without asking
// the database again: a key revoked by another process stops working within
// this time, and at once in the process that revoked it.
const authCacheTTL = time.Second

type cachedKey struct {
	p       services.Principal
	expires time.Time
}

// NewKeys returns the key service on st.
func NewKeys(st *services.Store) *Keys {
	return &Keys{st: st, cache: authCache{m: map[[32]byte]cachedKey{}}}
}

// EnsureNamespace creates namespace ns if it does not exist.
func (k *Keys) EnsureNamespace(ctx context.Context, ns string) error {
	if err := services.ValidateNamespace(ns); err != nil {
		return err
	}
	_, err := k.insertNamespace(ctx, ns)
	return err
}

// insertNamespace creates namespace ns unless it exists, and says whether
// it created it.
func (k *Keys) insertNamespace(ctx context.Context, ns string) (bool, error) {
	res := k.st.GormWriter().WithContext(ctx).Exec(
		`INSERT INTO namespaces (name, created_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`, ns, services.Now())
	if res.Error != nil {
		return false, services.DBError("keys: create namespace", res.Error)
	}
	return res.RowsAffected > 0, nil
}

// Namespaces lists every namespace by name.
func (k *Keys) Namespaces(ctx context.Context) ([]models.Namespace, error) {
	var out []models.Namespace
	err := k.st.Gorm().WithContext(ctx).Order("name").Find(&out).Error
	return out, services.DBErrorOrNil("keys: list namespaces", err)
}

// CreateKeyRequest describes a new API key.
type CreateKeyRequest struct {
	Namespace string // required unless Role is admin; created if missing
	Name      string
	Role      services.Role
	// Owner is the email of the user the key belongs to: the person its
	// approvals count as. Empty for a key without an owner, which may take
	// every decision but approve.
	Owner string
}

// CreateKey makes a key and returns it with its secret, which is never stored
// and cannot be shown again.
func (k *Keys) CreateKey(ctx context.Context, r CreateKeyRequest) (models.APIKey, string, error) {
	switch r.Role {
	case services.RoleAgent, services.RoleReader, services.RoleOperator:
		if r.Namespace == "" {
			return models.APIKey{}, "", services.Errorf(services.CodeInvalid, "a %s key needs a namespace", r.Role)
		}
	case services.RoleAdmin:
		if r.Namespace != "" {
			return models.APIKey{}, "", services.Errorf(services.CodeInvalid, "an admin key is global: leave the namespace out")
		}
	default:
		return models.APIKey{}, "", services.Errorf(services.CodeInvalid, "unknown role %q: use agent, reader, operator or admin", r.Role)
	}
	if r.Name == "" || len(r.Name) > services.MaxLabelBytes || !services.Printable(r.Name) {
		return models.APIKey{}, "", services.Errorf(services.CodeInvalid, "a key needs a name of 1 to %d printable bytes", services.MaxLabelBytes)
	}
	owner, err := k.owner(ctx, r.Owner)
	if err != nil {
		return models.APIKey{}, "", err
	}
	var ns *string
	if r.Namespace != "" {
		if err := k.EnsureNamespace(ctx, r.Namespace); err != nil {
			return models.APIKey{}, "", err
		}
		ns = &r.Namespace
	}
	secret := KeyPrefix + randomToken(32)
	sum := sha256.Sum256([]byte(secret))
	m := models.APIKey{ID: driver.NewID(), Namespace: ns, Name: r.Name, Role: string(r.Role),
		Prefix: secret[:len(KeyPrefix)+8], Hash: sum[:], CreatedAt: services.Now()}
	if owner != nil {
		m.OwnerID = &owner.ID
	}
	if err := k.st.GormWriter().WithContext(ctx).Omit("Owner").Create(&m).Error; err != nil {
		return models.APIKey{}, "", services.DBError("keys: create", err)
	}
	m.Owner = owner
	return m, secret, nil
}

// owner finds the user a new key is to belong to; nil for none.
func (k *Keys) owner(ctx context.Context, email string) (*models.User, error) {
	if email == "" {
		return nil, nil
	}
	norm, err := normalizeEmail(email)
	if err != nil {
		return nil, services.Errorf(services.CodeInvalid, "the owner of a key is a user's email: %q is not an email address", email)
	}
	var u models.User
	if err := k.st.Gorm().WithContext(ctx).Where("email = ?", norm).Limit(1).Find(&u).Error; err != nil {
		return nil, services.DBError("keys: find owner", err)
	}
	if u.ID == "" {
		return nil, services.Errorf(services.CodeInvalid,
			"no user has email %q: a key's owner must be a user (create one with `arbiter users create`, or in the dashboard)", norm)
	}
	if u.DisabledAt != nil {
		return nil, services.Errorf(services.CodeInvalid, "user %q is disabled and cannot own a key", norm)
	}
	return &u, nil
}

// ListKeys returns every key (never a secret), newest first.
func (k *Keys) ListKeys(ctx context.Context) ([]models.APIKey, error) {
	var out []models.APIKey
	err := k.st.Gorm().WithContext(ctx).Preload("Owner").Order("created_at DESC, id DESC").Find(&out).Error
	return out, services.DBErrorOrNil("keys: list", err)
}

// RevokeKey revokes the key with the given id or prefix. Revoking twice is
// not an error.
func (k *Keys) RevokeKey(ctx context.Context, idOrPrefix string) (models.APIKey, error) {
	var m models.APIKey
	q := k.st.GormWriter().WithContext(ctx)
	var err error
	if len(idOrPrefix) > len(KeyPrefix) && idOrPrefix[:len(KeyPrefix)] == KeyPrefix {
		err = q.Where("prefix = ?", idOrPrefix[:min(len(idOrPrefix), len(KeyPrefix)+8)]).First(&m).Error
	} else {
		err = q.Where("id = ?", idOrPrefix).First(&m).Error
	}
	if errors.Is(err, gorm.ErrRecordNotFound) || (err != nil && !services.Unavailable(err)) {
		return m, services.Errorf(services.CodeNotFound, "no key has id or prefix %q", idOrPrefix)
	}
	if err != nil {
		return m, services.DBError("keys: revoke", err)
	}
	if m.RevokedAt == nil {
		now := services.Now()
		m.RevokedAt = &now
		if err := q.Model(&m).Update("revoked_at", now).Error; err != nil {
			return m, services.DBError("keys: revoke", err)
		}
	}
	k.cache.mu.Lock()
	clear(k.cache.m)
	k.cache.mu.Unlock()
	return m, nil
}

// Authenticate returns the principal of an API key secret, or an
// unauthorized error for a missing, unknown or revoked key.
func (k *Keys) Authenticate(ctx context.Context, secret string) (services.Principal, error) {
	if secret == "" {
		return services.Principal{}, services.Errorf(services.CodeUnauthorized, "missing API key: send Authorization: Bearer ak_…")
	}
	sum := sha256.Sum256([]byte(secret))
	now := time.Now()
	k.cache.mu.Lock()
	c, ok := k.cache.m[sum]
	k.cache.mu.Unlock()
	if ok && now.Before(c.expires) {
		return c.p, nil
	}
	var m models.APIKey
	err := k.st.Gorm().WithContext(ctx).Where("hash = ?", sum[:]).Limit(1).Find(&m).Error
	if err != nil {
		return services.Principal{}, services.DBError("keys: authenticate", err)
	}
	if m.ID == "" || m.RevokedAt != nil {
		return services.Principal{}, services.Errorf(services.CodeUnauthorized, "unknown or revoked API key")
	}
	p := services.Principal{Kind: "api_key", ID: m.ID, Name: m.Name, Role: services.Role(m.Role)}
	if m.Namespace != nil {
		p.Namespace = *m.Namespace
	}
	if m.OwnerID != nil {
		// A key approves for its owner only while the owner may sign in:
		// a disabled person's key keeps its other rights, not their vote.
		var u models.User
		if err := k.st.Gorm().WithContext(ctx).Where("id = ?", *m.OwnerID).Limit(1).Find(&u).Error; err != nil {
			return services.Principal{}, services.DBError("keys: authenticate", err)
		}
		if u.ID != "" && u.DisabledAt == nil {
			p.OwnerID, p.OwnerEmail = u.ID, u.Email
		}
	}
	k.cache.mu.Lock()
	if len(k.cache.m) > 10000 {
		clear(k.cache.m)
	}
	k.cache.m[sum] = cachedKey{p: p, expires: now.Add(authCacheTTL)}
	k.cache.mu.Unlock()
	return p, nil
}

const tokenAlphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

// RandomToken returns n random characters from [0-9a-zA-Z]: about 5.95
// bits each.
func RandomToken(n int) string { return randomToken(n) }

// randomToken returns n characters from a 62-letter alphabet (about 5.95 bits
// each), drawn without modulo bias.
func randomToken(n int) string {
	out := make([]byte, 0, n)
	buf := make([]byte, n*2)
	for len(out) < n {
		if _, err := rand.Read(buf); err != nil {
			panic(fmt.Sprintf("keys: no randomness: %v", err))
		}
		for _, b := range buf {
			if b < 248 && len(out) < n { // 248 = 4*62
				out = append(out, tokenAlphabet[b%62])
			}
		}
	}
	return string(out)
}
