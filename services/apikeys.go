package services

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/arbiter-ledger/arbiter/models"
)

// KeyPrefix starts every API key, so leaked keys are easy to recognise.
const KeyPrefix = "ak_"

// Keys manages namespaces and API keys and authenticates requests.
type Keys struct {
	st    *Store
	cache *authCache
}

// authCache remembers authenticated keys per Store, so every Keys on one
// Store sees a revocation at once.
type authCache struct {
	mu sync.Mutex
	m  map[[32]byte]cachedKey
}

// authCacheTTL bounds how long an authenticated key is trusted without asking
// the database again: a key revoked by another process stops working within
// this time, and at once in the process that revoked it.
const authCacheTTL = time.Second

type cachedKey struct {
	p       Principal
	expires time.Time
}

// NewKeys returns the key service on st.
func NewKeys(st *Store) *Keys {
	st.authOnce.Do(func() { st.auth = &authCache{m: map[[32]byte]cachedKey{}} })
	return &Keys{st: st, cache: st.auth}
}

var namespaceName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// ValidateNamespace checks a namespace name: lowercase letters, digits, '.',
// '_' and '-', 1 to 63 characters.
func ValidateNamespace(ns string) error {
	if !namespaceName.MatchString(ns) {
		return Errorf(CodeInvalid, "namespace %q must be 1 to 63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit", ns)
	}
	return nil
}

// EnsureNamespace creates namespace ns if it does not exist.
func (k *Keys) EnsureNamespace(ctx context.Context, ns string) error {
	if err := ValidateNamespace(ns); err != nil {
		return err
	}
	_, err := k.insertNamespace(ctx, ns)
	return err
}

// insertNamespace creates namespace ns unless it exists, and says whether
// it created it.
func (k *Keys) insertNamespace(ctx context.Context, ns string) (bool, error) {
	res := k.st.wdb.WithContext(ctx).Exec(
		`INSERT INTO namespaces (name, created_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`, ns, utcNow())
	if res.Error != nil {
		return false, dbError("keys: create namespace", res.Error)
	}
	return res.RowsAffected > 0, nil
}

// Namespaces lists every namespace by name.
func (k *Keys) Namespaces(ctx context.Context) ([]models.Namespace, error) {
	var out []models.Namespace
	err := k.st.db.WithContext(ctx).Order("name").Find(&out).Error
	return out, dbErrorOrNil("keys: list namespaces", err)
}

// CreateKeyRequest describes a new API key.
type CreateKeyRequest struct {
	Namespace string // required unless Role is admin; created if missing
	Name      string
	Role      Role
}

// CreateKey makes a key and returns it with its secret, which is never stored
// and cannot be shown again.
func (k *Keys) CreateKey(ctx context.Context, r CreateKeyRequest) (models.APIKey, string, error) {
	switch r.Role {
	case RoleAgent, RoleReader, RoleOperator:
		if r.Namespace == "" {
			return models.APIKey{}, "", Errorf(CodeInvalid, "a %s key needs a namespace", r.Role)
		}
	case RoleAdmin:
		if r.Namespace != "" {
			return models.APIKey{}, "", Errorf(CodeInvalid, "an admin key is global: leave the namespace out")
		}
	default:
		return models.APIKey{}, "", Errorf(CodeInvalid, "unknown role %q: use agent, reader, operator or admin", r.Role)
	}
	if r.Name == "" || len(r.Name) > MaxLabelBytes || !printable(r.Name) {
		return models.APIKey{}, "", Errorf(CodeInvalid, "a key needs a name of 1 to %d printable bytes", MaxLabelBytes)
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
	m := models.APIKey{ID: newID(), Namespace: ns, Name: r.Name, Role: string(r.Role),
		Prefix: secret[:len(KeyPrefix)+8], Hash: sum[:], CreatedAt: utcNow()}
	if err := k.st.wdb.WithContext(ctx).Create(&m).Error; err != nil {
		return models.APIKey{}, "", dbError("keys: create", err)
	}
	return m, secret, nil
}

// ListKeys returns every key (never a secret), newest first.
func (k *Keys) ListKeys(ctx context.Context) ([]models.APIKey, error) {
	var out []models.APIKey
	err := k.st.db.WithContext(ctx).Order("created_at DESC, id DESC").Find(&out).Error
	return out, dbErrorOrNil("keys: list", err)
}

// RevokeKey revokes the key with the given id or prefix. Revoking twice is
// not an error.
func (k *Keys) RevokeKey(ctx context.Context, idOrPrefix string) (models.APIKey, error) {
	var m models.APIKey
	q := k.st.wdb.WithContext(ctx)
	var err error
	if len(idOrPrefix) > len(KeyPrefix) && idOrPrefix[:len(KeyPrefix)] == KeyPrefix {
		err = q.Where("prefix = ?", idOrPrefix[:min(len(idOrPrefix), len(KeyPrefix)+8)]).First(&m).Error
	} else {
		err = q.Where("id = ?", idOrPrefix).First(&m).Error
	}
	if errors.Is(err, gorm.ErrRecordNotFound) || (err != nil && !unavailable(err)) {
		return m, Errorf(CodeNotFound, "no key has id or prefix %q", idOrPrefix)
	}
	if err != nil {
		return m, dbError("keys: revoke", err)
	}
	if m.RevokedAt == nil {
		now := utcNow()
		m.RevokedAt = &now
		if err := q.Model(&m).Update("revoked_at", now).Error; err != nil {
			return m, dbError("keys: revoke", err)
		}
	}
	k.cache.mu.Lock()
	clear(k.cache.m)
	k.cache.mu.Unlock()
	return m, nil
}

// Authenticate returns the principal of an API key secret, or an
// unauthorized error for a missing, unknown or revoked key.
func (k *Keys) Authenticate(ctx context.Context, secret string) (Principal, error) {
	if secret == "" {
		return Principal{}, Errorf(CodeUnauthorized, "missing API key: send Authorization: Bearer ak_…")
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
	err := k.st.db.WithContext(ctx).Where("hash = ?", sum[:]).Limit(1).Find(&m).Error
	if err != nil {
		return Principal{}, dbError("keys: authenticate", err)
	}
	if m.ID == "" || m.RevokedAt != nil {
		return Principal{}, Errorf(CodeUnauthorized, "unknown or revoked API key")
	}
	p := Principal{Kind: "api_key", ID: m.ID, Name: m.Name, Role: Role(m.Role)}
	if m.Namespace != nil {
		p.Namespace = *m.Namespace
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
