package accounts

import (
	"context"
	"sort"
	"time"

	"gorm.io/gorm"

	"github.com/arbiter-ledger/arbiter/models"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/driver"
)

// Single sign-on: the identity provider says who a person is (issuer and
// subject) and, through a claim mapped by a rule (services/sso), what they
// may do. The user is found by that identity, not by email, so a changed
// email stays the same user. Their memberships follow the provider: they
// are replaced with what the rule gives at every sign-in.

// Identity is a person as an OpenID Connect provider vouched for them.
type Identity struct {
	Issuer, Subject string
	Email           string
	EmailVerified   bool
	// AuthTime is when the person last authenticated at the provider
	// (auth_time); zero when it did not say. A provider's sign-in can be
	// silent, from a session of its own opened long before: the session
	// opened here counts as authenticated then, not now, for the changes
	// that ask for a recent sign-in (ReauthAfter).
	AuthTime time.Time
}

// Grants is what a person may do, as a mapping rule derives it from the
// provider's claims: admin, or a role per namespace ("*" for every one).
type Grants struct {
	Admin      bool
	Namespaces map[string]services.Role
}

// None reports whether the grants give no role at all.
func (g Grants) None() bool { return !g.Admin && len(g.Namespaces) == 0 }

// ErrNoRole is a person the provider vouched for whose claims give no role
// here: they are refused, and a user they had loses their memberships and
// sessions.
var ErrNoRole = services.Errorf(services.CodeForbidden, "your account at the identity provider gives you no role in Arbiter")

// SignInIdentity signs in the person the provider vouched for, with the
// grants the mapping rule gave them, and opens a session as SignIn does.
//
// The user is the one linked to (issuer, subject). At a first sign-in, an
// existing user with the same email is linked if the provider says the
// email is verified and the user has no other identity at this issuer;
// otherwise a new user without a password is created. A linked user whose
// email changed at the provider gets the new one unless another user has
// it.
func (a *Accounts) SignInIdentity(ctx context.Context, id Identity, g Grants, address, userAgent string) (Session, error) {
	if id.Issuer == "" || id.Subject == "" {
		return Session{}, services.Errorf(services.CodeInvalid, "the identity provider named no subject")
	}
	for ns, r := range g.Namespaces {
		if err := validMemberRole(r); err != nil {
			return Session{}, err
		}
		if ns != services.Everywhere {
			if err := services.ValidateNamespace(ns); err != nil {
				return Session{}, err
			}
		}
	}
	var u models.User
	noRole := false
	err := a.st.GormWriter().WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		u, err = a.linkIdentity(tx, id, g)
		if err != nil {
			return err
		}
		if u.DisabledAt != nil {
			return services.Errorf(services.CodeForbidden, "your Arbiter account is disabled")
		}
		if g.None() {
			noRole = true
			if err := tx.Where("user_id = ?", u.ID).Delete(&models.Session{}).Error; err != nil {
				return err
			}
		}
		return a.applyGrants(tx, &u, g)
	})
	if _, ok := services.AsError(err); ok {
		return Session{}, err
	}
	if err != nil {
		return Session{}, services.DBError("accounts: sign in with identity", err)
	}
	if noRole {
		return Session{}, ErrNoRole
	}
	authenticated := a.now()
	if !id.AuthTime.IsZero() && id.AuthTime.Before(authenticated) {
		authenticated = id.AuthTime
	}
	return a.openSession(ctx, u, address, userAgent, authenticated)
}

// linkIdentity finds, links or creates the user of id (see SignInIdentity).
// A person with no role and no user yet is refused before anything is
// written.
func (a *Accounts) linkIdentity(tx *gorm.DB, id Identity, g Grants) (models.User, error) {
	now := a.now()
	var link models.Identity
	if err := tx.Where("issuer = ? AND subject = ?", id.Issuer, id.Subject).Limit(1).Find(&link).Error; err != nil {
		return models.User{}, err
	}
	email, emailErr := normalizeEmail(id.Email)
	var u models.User
	if link.UserID != "" {
		if err := tx.Where("id = ?", link.UserID).Limit(1).Find(&u).Error; err != nil {
			return u, err
		}
		set := map[string]any{"last_sign_in_at": now}
		if emailErr == nil && email != u.Email {
			var taken int64
			if err := tx.Model(&models.User{}).Where("email = ? AND id <> ?", email, u.ID).Count(&taken).Error; err != nil {
				return u, err
			}
			if taken == 0 {
				if err := tx.Model(&models.User{}).Where("id = ?", u.ID).Updates(map[string]any{"email": email, "updated_at": now}).Error; err != nil {
					return u, err
				}
				u.Email = email
				set["email"] = email
			}
		}
		err := tx.Model(&models.Identity{}).Where("issuer = ? AND subject = ?", id.Issuer, id.Subject).Updates(set).Error
		return u, err
	}
	if g.None() {
		return u, ErrNoRole
	}
	if emailErr != nil {
		return u, services.Errorf(services.CodeForbidden, "the identity provider gave no usable email address for your account")
	}
	if err := tx.Where("email = ?", email).Limit(1).Find(&u).Error; err != nil {
		return u, err
	}
	if u.ID != "" {
		if !id.EmailVerified {
			return u, services.Errorf(services.CodeForbidden,
				"an Arbiter account with the email %s exists, and the identity provider does not say the address is verified; ask an administrator", email)
		}
		var other int64
		if err := tx.Model(&models.Identity{}).Where("issuer = ? AND user_id = ?", id.Issuer, u.ID).Count(&other).Error; err != nil {
			return u, err
		}
		if other > 0 {
			return u, services.Errorf(services.CodeForbidden,
				"the Arbiter account with the email %s belongs to another account at the identity provider; ask an administrator", email)
		}
	} else {
		u = models.User{ID: driver.NewID(), Email: email, Role: string(services.RoleViewer), CreatedAt: now, UpdatedAt: now}
		if err := tx.Create(&u).Error; err != nil {
			return u, err
		}
	}
	err := tx.Create(&models.Identity{Issuer: id.Issuer, Subject: id.Subject, UserID: u.ID, Email: email, CreatedAt: now, LastSignInAt: now}).Error
	return u, err
}

// applyGrants replaces u's role and memberships with g.
func (a *Accounts) applyGrants(tx *gorm.DB, u *models.User, g Grants) error {
	if err := tx.Where("user_id = ?", u.ID).Delete(&models.Membership{}).Error; err != nil {
		return err
	}
	role := services.RoleViewer
	switch {
	case g.Admin:
		role = services.RoleAdmin
	default:
		for _, r := range g.Namespaces {
			if r == services.RoleOperator {
				role = services.RoleOperator
			}
		}
	}
	now := a.now()
	namespaces := make([]string, 0, len(g.Namespaces))
	for ns := range g.Namespaces {
		namespaces = append(namespaces, ns)
	}
	sort.Strings(namespaces)
	for _, ns := range namespaces {
		if g.Admin {
			break
		}
		m := models.Membership{UserID: u.ID, Namespace: ns, Role: string(g.Namespaces[ns]), CreatedAt: now}
		if err := tx.Create(&m).Error; err != nil {
			return err
		}
	}
	if u.Role != string(role) {
		if err := tx.Model(&models.User{}).Where("id = ?", u.ID).Updates(map[string]any{"role": string(role), "updated_at": now}).Error; err != nil {
			return err
		}
		u.Role = string(role)
	}
	return nil
}

// Identities lists the providers' identities linked to a user.
func (a *Accounts) Identities(ctx context.Context, userID string) ([]models.Identity, error) {
	var out []models.Identity
	err := a.st.Gorm().WithContext(ctx).Where("user_id = ?", userID).Order("issuer, subject").Find(&out).Error
	return out, services.DBErrorOrNil("accounts: read identities", err)
}

// HasPassword reports whether u can sign in with a local password (users
// created by single sign-on have none).
func HasPassword(u models.User) bool { return u.PasswordHash != "" }
