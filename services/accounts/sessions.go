package accounts

import (
	"context"
	"encoding/hex"
	"time"

	"github.com/arbiter-ledger/arbiter/models"
	"github.com/arbiter-ledger/arbiter/services"
)

// ReauthAfter is how long a password given in a session (or a sign-in at
// the identity provider) vouches for the admin changes of who may do what
// and of what holds actions (keys, users, roles, memberships, policies,
// webhook endpoints: web/reauth.go); later, they ask for it again.
const ReauthAfter = 10 * time.Minute

// sessionID names a session on its user's sessions page: the hex of its
// token's SHA-256, which the session row already holds and from which the
// token cannot be found.
func sessionID(tokenHash []byte) string { return hex.EncodeToString(tokenHash) }

// Sessions lists a user's live sessions, the most recently seen first.
func (a *Accounts) Sessions(ctx context.Context, userID string) ([]SessionInfo, error) {
	var rows []models.Session
	now := a.now()
	err := a.st.Gorm().WithContext(ctx).Where("user_id = ? AND expires_at > ? AND last_seen_at > ?",
		userID, now, now.Add(-a.IdleTimeout)).Order("last_seen_at DESC").Find(&rows).Error
	if err != nil {
		return nil, services.DBError("accounts: list sessions", err)
	}
	out := make([]SessionInfo, 0, len(rows))
	for _, r := range rows {
		out = append(out, SessionInfo{ID: sessionID(r.TokenHash), CreatedAt: r.CreatedAt, LastSeenAt: r.LastSeenAt,
			Address: r.Address, UserAgent: r.UserAgent})
	}
	return out, nil
}

// SessionInfo is one session as its user sees it.
type SessionInfo struct {
	ID         string
	CreatedAt  time.Time
	LastSeenAt time.Time
	Address    string
	UserAgent  string
}

// EndSession ends one of a user's sessions; another user's, or an unknown
// id, is not found.
func (a *Accounts) EndSession(ctx context.Context, userID, id string) error {
	h, err := hex.DecodeString(id)
	if err != nil || len(h) != 32 {
		return services.Errorf(services.CodeNotFound, "no such session")
	}
	res := a.st.GormWriter().WithContext(ctx).Where("user_id = ? AND token_hash = ?", userID, h).Delete(&models.Session{})
	if res.Error != nil {
		return services.DBError("accounts: end session", res.Error)
	}
	if res.RowsAffected == 0 {
		return services.Errorf(services.CodeNotFound, "no such session")
	}
	return nil
}

// EndOtherSessions signs a user out everywhere but the session of
// keepToken.
func (a *Accounts) EndOtherSessions(ctx context.Context, userID, keepToken string) error {
	err := a.st.GormWriter().WithContext(ctx).Where("user_id = ? AND token_hash <> ?", userID, tokenHash(keepToken)).
		Delete(&models.Session{}).Error
	return services.DBErrorOrNil("accounts: end other sessions", err)
}

// Reauthenticate checks the password of the session's user again, throttled
// like a sign-in, and on success records that the password was given now.
func (a *Accounts) Reauthenticate(ctx context.Context, token, password, address string) error {
	s, err := a.Session(ctx, token)
	if err != nil {
		return err
	}
	now := a.now()
	if err := a.claimAddress(ctx, address, now); err != nil {
		return err
	}
	wait, err := a.claimAccount(ctx, s.User.Email, now)
	if err != nil {
		return err
	}
	if err := sleep(ctx, wait); err != nil {
		return err
	}
	ok, err := a.check(ctx, s.User.PasswordHash, password)
	if err != nil {
		return err
	}
	if !ok {
		return services.Errorf(services.CodeInvalid, "the password is wrong")
	}
	if err := a.forgive(ctx, address, s.User.Email); err != nil {
		return err
	}
	err = a.st.GormWriter().WithContext(ctx).Model(&models.Session{}).Where("token_hash = ?", tokenHash(token)).
		Update("authenticated_at", a.now()).Error
	return services.DBErrorOrNil("accounts: record authentication", err)
}
