package accounts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/arbiter-ledger/arbiter/models"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/driver"
)

// Session defaults (OWASP ASVS 3.3).
const (
	DefaultIdleTimeout     = 8 * time.Hour
	DefaultAbsoluteTimeout = 7 * 24 * time.Hour
	sessionTouchEvery      = time.Minute
)

// Accounts manages dashboard users and their sessions. A server builds one
// and shares it: its hashing slots bound the process's password checks.
type Accounts struct {
	st              *services.Store
	now             func() time.Time
	IdleTimeout     time.Duration
	AbsoluteTimeout time.Duration
	// HashWait is how long a password check waits for a hashing slot
	// before the server answers that it is busy.
	HashWait time.Duration
	// hashSlots is the semaphore of password hashing (throttle.go).
	hashSlots chan struct{}
}

// New returns the account service on st with default timeouts.
func New(st *services.Store) *Accounts {
	return &Accounts{st: st, now: services.Now, IdleTimeout: DefaultIdleTimeout, AbsoluteTimeout: DefaultAbsoluteTimeout, HashWait: hashWait,
		hashSlots: make(chan struct{}, hashSlots)}
}

func normalizeEmail(email string) (string, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	a, err := mail.ParseAddress(email)
	if err != nil || a.Address != email || len(email) > 254 {
		return "", services.Errorf(services.CodeInvalid, "%q is not an email address", email)
	}
	return email, nil
}

func validUserRole(r services.Role) error {
	for _, x := range services.UserRoles {
		if x == r {
			return nil
		}
	}
	return services.Errorf(services.CodeInvalid, "unknown role %q: use viewer, operator or admin", r)
}

// CreateUser adds a user: an admin, or a viewer or operator in every
// namespace.
func (a *Accounts) CreateUser(ctx context.Context, email string, role services.Role, password string) (models.User, error) {
	return a.CreateMember(ctx, email, role, nil, password)
}

// CreateMember adds a user with role: an admin (namespaces must be empty),
// or a viewer or operator in each of namespaces ("*" or none for every
// namespace).
func (a *Accounts) CreateMember(ctx context.Context, email string, role services.Role, namespaces []string, password string) (models.User, error) {
	email, err := normalizeEmail(email)
	if err != nil {
		return models.User{}, err
	}
	if err := validUserRole(role); err != nil {
		return models.User{}, err
	}
	if role == services.RoleAdmin && len(namespaces) > 0 {
		return models.User{}, services.Errorf(services.CodeInvalid, "an admin sees and decides in every namespace: leave out the namespaces")
	}
	if role != services.RoleAdmin && len(namespaces) == 0 {
		namespaces = []string{services.Everywhere}
	}
	if err := ValidatePassword(password); err != nil {
		return models.User{}, err
	}
	hash, err := a.hash(ctx, password)
	if err != nil {
		return models.User{}, err
	}
	now := a.now()
	u := models.User{ID: driver.NewID(), Email: email, Role: string(role), PasswordHash: hash, CreatedAt: now, UpdatedAt: now}
	err = a.st.GormWriter().WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&u)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return services.Errorf(services.CodeConflict, "a user with email %q exists", email)
		}
		for _, ns := range namespaces {
			if err := memberNamespace(tx, ns); err != nil {
				return err
			}
			m := models.Membership{UserID: u.ID, Namespace: ns, Role: string(role), CreatedAt: now}
			if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&m).Error; err != nil {
				return err
			}
		}
		return nil
	})
	if _, ok := services.AsError(err); ok {
		return models.User{}, err
	}
	if err != nil {
		return models.User{}, services.DBError("accounts: create user", err)
	}
	return u, nil
}

// EnsureAdmin creates an admin with a random password when there are no
// users at all, and returns the password; created is false otherwise. The
// admin must choose a new password at the first sign-in.
func (a *Accounts) EnsureAdmin(ctx context.Context) (email, password string, created bool, err error) {
	var n int64
	if err := a.st.Gorm().WithContext(ctx).Model(&models.User{}).Count(&n).Error; err != nil {
		return "", "", false, services.DBError("accounts: count users", err)
	}
	if n > 0 {
		return "", "", false, nil
	}
	password = randomToken(20)
	u, err := a.CreateUser(ctx, "admin@localhost", services.RoleAdmin, password)
	if errors.Is(err, services.ErrConflict) {
		return "", "", false, nil // another replica was first
	}
	if err != nil {
		return "", "", false, err
	}
	// The password has been on a screen or in a file: its owner replaces it
	// at the first sign-in.
	if err := a.updateUser(ctx, u.ID, map[string]any{"must_change_password": true}, false); err != nil {
		return "", "", false, err
	}
	return "admin@localhost", password, true, nil
}

// UserByEmail returns one user.
func (a *Accounts) UserByEmail(ctx context.Context, email string) (models.User, error) {
	email, err := normalizeEmail(email)
	if err != nil {
		return models.User{}, err
	}
	return a.findUser(ctx, "email = ?", email)
}

// User returns one user by id.
func (a *Accounts) User(ctx context.Context, id string) (models.User, error) {
	if _, err := uuid.Parse(id); err != nil {
		return models.User{}, services.Errorf(services.CodeNotFound, "no such user")
	}
	return a.findUser(ctx, "id = ?", id)
}

func (a *Accounts) findUser(ctx context.Context, where string, arg any) (models.User, error) {
	var u models.User
	err := a.st.Gorm().WithContext(ctx).Where(where, arg).Limit(1).Find(&u).Error
	if err != nil {
		return u, services.DBError("accounts: find user", err)
	}
	if u.ID == "" {
		return u, services.Errorf(services.CodeNotFound, "no such user")
	}
	return u, nil
}

// Users lists every user by email.
func (a *Accounts) Users(ctx context.Context) ([]models.User, error) {
	var out []models.User
	err := a.st.Gorm().WithContext(ctx).Order("email").Find(&out).Error
	return out, services.DBErrorOrNil("accounts: list users", err)
}

// SetPassword changes a user's password, which is then theirs to keep (no
// change is required at the next sign-in), and ends their sessions.
func (a *Accounts) SetPassword(ctx context.Context, userID, password string) error {
	if err := ValidatePassword(password); err != nil {
		return err
	}
	hash, err := a.hash(ctx, password)
	if err != nil {
		return err
	}
	return a.updateUser(ctx, userID, map[string]any{"password_hash": hash, "must_change_password": false}, true)
}

// ChangePassword is a signed-in user replacing their own password: the
// current one must be right and the new one must differ. Their other
// sessions end; the one named by keepToken (the browser they did it in)
// stays signed in.
func (a *Accounts) ChangePassword(ctx context.Context, userID, current, password, keepToken string) error {
	u, err := a.User(ctx, userID)
	if err != nil {
		return err
	}
	ok, err := a.check(ctx, u.PasswordHash, current)
	if err != nil {
		return err
	}
	if !ok {
		return services.Errorf(services.CodeInvalid, "the current password is wrong")
	}
	if current == password {
		return services.Errorf(services.CodeInvalid, "the new password must differ from the current one")
	}
	if err := ValidatePassword(password); err != nil {
		return err
	}
	hash, err := a.hash(ctx, password)
	if err != nil {
		return err
	}
	if err := a.updateUser(ctx, userID, map[string]any{"password_hash": hash, "must_change_password": false}, false); err != nil {
		return err
	}
	return a.EndOtherSessions(ctx, userID, keepToken)
}

// SetRole makes a user an admin, or a viewer or operator in every
// namespace (replacing their memberships).
func (a *Accounts) SetRole(ctx context.Context, userID string, role services.Role) error {
	if err := validUserRole(role); err != nil {
		return err
	}
	if role == services.RoleAdmin {
		return a.updateUser(ctx, userID, map[string]any{"role": string(role)}, false)
	}
	return a.changeMemberships(ctx, userID, func(tx *gorm.DB) error {
		// An admin becoming a member is not one any more.
		if err := tx.Model(&models.User{}).Where("id = ?", userID).Update("role", string(role)).Error; err != nil {
			return err
		}
		if err := tx.Where("user_id = ?", userID).Delete(&models.Membership{}).Error; err != nil {
			return err
		}
		return tx.Create(&models.Membership{UserID: userID, Namespace: services.Everywhere, Role: string(role), CreatedAt: a.now()}).Error
	})
}

// SetDisabled disables (and signs out) or re-enables a user.
func (a *Accounts) SetDisabled(ctx context.Context, userID string, disabled bool) error {
	var at *time.Time
	if disabled {
		now := a.now()
		at = &now
	}
	return a.updateUser(ctx, userID, map[string]any{"disabled_at": at}, disabled)
}

func (a *Accounts) updateUser(ctx context.Context, userID string, set map[string]any, endSessions bool) error {
	set["updated_at"] = a.now()
	res := a.st.GormWriter().WithContext(ctx).Model(&models.User{}).Where("id = ?", userID).Updates(set)
	if res.Error != nil {
		return services.DBError("accounts: update user", res.Error)
	}
	if res.RowsAffected == 0 {
		return services.Errorf(services.CodeNotFound, "no such user")
	}
	if endSessions {
		return a.EndSessions(ctx, userID)
	}
	return nil
}

// EndSessions signs a user out everywhere.
func (a *Accounts) EndSessions(ctx context.Context, userID string) error {
	err := a.st.GormWriter().WithContext(ctx).Where("user_id = ?", userID).Delete(&models.Session{}).Error
	return services.DBErrorOrNil("accounts: end sessions", err)
}

// Session is a signed-in browser as the web layer sees it.
type Session struct {
	Token string // only returned by SignIn; the cookie's value
	ID    string // names the session on the user's sessions page
	CSRF  string
	User  models.User
	// Memberships are the user's, read with the session, so a change takes
	// effect at the user's next request.
	Memberships []models.Membership
	// AuthenticatedAt is when the user last gave their password here.
	AuthenticatedAt time.Time
}

// Principal is who the session's user acts as.
func (s Session) Principal() services.Principal { return UserPrincipal(s.User, s.Memberships) }

// SignIn checks a password and opens a new session with a fresh token (so a
// token planted before sign-in is worthless). Attempts are throttled per
// address and spaced out per account (throttle.go) before the password is
// checked; every failure looks the same to the caller.
func (a *Accounts) SignIn(ctx context.Context, email, password, address, userAgent string) (Session, error) {
	now := a.now()
	norm, _ := normalizeEmail(email)
	if err := a.claimAddress(ctx, address, now); err != nil {
		return Session{}, err
	}
	if norm != "" {
		wait, err := a.claimAccount(ctx, norm, now)
		if err != nil {
			return Session{}, err
		}
		if err := sleep(ctx, wait); err != nil {
			return Session{}, fmt.Errorf("accounts: sign in: %w", err)
		}
	}
	var u models.User
	if norm != "" {
		if err := a.st.Gorm().WithContext(ctx).Where("email = ?", norm).Limit(1).Find(&u).Error; err != nil {
			return Session{}, services.DBError("accounts: sign in", err)
		}
	}
	// A user who signs in through the identity provider has no password
	// (""); checking the dummy hash keeps them from being told apart by time.
	hasPassword := u.ID != "" && u.PasswordHash != ""
	hash := u.PasswordHash
	if !hasPassword {
		hash = dummyHash()
	}
	matched, err := a.check(ctx, hash, password)
	if err != nil {
		return Session{}, err
	}
	if !matched || !hasPassword || u.DisabledAt != nil {
		return Session{}, services.Errorf(services.CodeUnauthorized, "wrong email or password")
	}
	if err := a.forgive(ctx, address, norm); err != nil {
		return Session{}, err
	}
	return a.openSession(ctx, u, address, userAgent, a.now())
}

// openSession starts a session for u, who has just proved who they are
// (at authenticated), with a fresh token (so a token planted before
// sign-in is worthless).
func (a *Accounts) openSession(ctx context.Context, u models.User, address, userAgent string, authenticated time.Time) (Session, error) {
	now := a.now()
	token := randomBytes64(32)
	s := models.Session{TokenHash: tokenHash(token), UserID: u.ID, CSRFToken: randomBytes64(32), CreatedAt: now,
		LastSeenAt: now, ExpiresAt: now.Add(a.AbsoluteTimeout), Address: address, UserAgent: truncate(userAgent, 512),
		AuthenticatedAt: authenticated}
	if err := a.st.GormWriter().WithContext(ctx).Create(&s).Error; err != nil {
		return Session{}, services.DBError("accounts: create session", err)
	}
	ms, err := a.Memberships(ctx, u.ID)
	if err != nil {
		return Session{}, err
	}
	return Session{Token: token, ID: sessionID(s.TokenHash), CSRF: s.CSRFToken, User: u, Memberships: ms, AuthenticatedAt: authenticated}, nil
}

// Session returns the live session for a cookie token, or unauthorized when
// it is unknown, idle too long, past its absolute lifetime, or its user is
// disabled.
func (a *Accounts) Session(ctx context.Context, token string) (Session, error) {
	if token == "" {
		return Session{}, services.ErrUnauthorized
	}
	now := a.now()
	var s models.Session
	h := tokenHash(token)
	if err := a.st.Gorm().WithContext(ctx).Where("token_hash = ?", h).Limit(1).Find(&s).Error; err != nil {
		return Session{}, services.DBError("accounts: find session", err)
	}
	if s.UserID == "" {
		return Session{}, services.ErrUnauthorized
	}
	if now.After(s.ExpiresAt) || now.Sub(s.LastSeenAt) > a.IdleTimeout {
		a.st.GormWriter().WithContext(ctx).Where("token_hash = ?", h).Delete(&models.Session{})
		return Session{}, services.ErrUnauthorized
	}
	u, err := a.User(ctx, s.UserID)
	if err != nil || u.DisabledAt != nil {
		if errors.Is(err, services.ErrUnavailable) {
			return Session{}, err
		}
		return Session{}, services.ErrUnauthorized
	}
	if now.Sub(s.LastSeenAt) > sessionTouchEvery {
		if err := a.st.GormWriter().WithContext(ctx).Model(&models.Session{}).Where("token_hash = ?", h).
			Update("last_seen_at", now).Error; err != nil {
			return Session{}, services.DBError("accounts: touch session", err)
		}
	}
	var ms []models.Membership
	if u.Role != string(services.RoleAdmin) {
		if ms, err = a.Memberships(ctx, u.ID); err != nil {
			return Session{}, err
		}
	}
	return Session{ID: sessionID(h), CSRF: s.CSRFToken, User: u, Memberships: ms, AuthenticatedAt: s.AuthenticatedAt}, nil
}

// SignOut ends the session of a cookie token.
func (a *Accounts) SignOut(ctx context.Context, token string) error {
	err := a.st.GormWriter().WithContext(ctx).Where("token_hash = ?", tokenHash(token)).Delete(&models.Session{}).Error
	return services.DBErrorOrNil("accounts: sign out", err)
}

func tokenHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

func randomBytes64(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("accounts: no randomness: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
