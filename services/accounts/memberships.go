package accounts

import (
	"context"
	"slices"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/arbiter-ledger/arbiter/models"
	"github.com/arbiter-ledger/arbiter/services"
)

// Memberships: a person other than an admin sees the namespaces they are a
// member of, and decides in those where they are an operator. A membership
// in "*" (services.Everywhere) holds in every namespace, present and future;
// users created before memberships existed have one with their old role.
// Admins see and decide everywhere and need none.

// MemberRoles are the roles a membership can give.
var MemberRoles = []services.Role{services.RoleViewer, services.RoleOperator}

// UserPrincipal is the principal a signed-in user acts as.
func UserPrincipal(u models.User, ms []models.Membership) services.Principal {
	p := services.Principal{Kind: "user", ID: u.ID, Name: u.Email, Role: services.Role(u.Role)}
	if p.Role != services.RoleAdmin {
		p.Memberships = make(map[string]services.Role, len(ms))
		for _, m := range ms {
			p.Memberships[m.Namespace] = services.Role(m.Role)
		}
	}
	return p
}

// Memberships lists a user's memberships by namespace ("*" first).
func (a *Accounts) Memberships(ctx context.Context, userID string) ([]models.Membership, error) {
	var out []models.Membership
	err := a.st.Gorm().WithContext(ctx).Where("user_id = ?", userID).Order("namespace").Find(&out).Error
	return out, services.DBErrorOrNil("accounts: read memberships", err)
}

// AllMemberships returns every user's memberships, by user id.
func (a *Accounts) AllMemberships(ctx context.Context) (map[string][]models.Membership, error) {
	var all []models.Membership
	if err := a.st.Gorm().WithContext(ctx).Order("user_id, namespace").Find(&all).Error; err != nil {
		return nil, services.DBError("accounts: read memberships", err)
	}
	out := map[string][]models.Membership{}
	for _, m := range all {
		out[m.UserID] = append(out[m.UserID], m)
	}
	return out, nil
}

func validMemberRole(r services.Role) error {
	if !slices.Contains(MemberRoles, r) {
		return services.Errorf(services.CodeInvalid, "unknown membership role %q: use viewer or operator", r)
	}
	return nil
}

// memberNamespace checks that ns is "*" or an existing namespace.
func memberNamespace(tx *gorm.DB, ns string) error {
	if ns == services.Everywhere {
		return nil
	}
	if err := services.ValidateNamespace(ns); err != nil {
		return err
	}
	var n int64
	if err := tx.Model(&models.Namespace{}).Where("name = ?", ns).Count(&n).Error; err != nil {
		return services.DBError("accounts: find namespace", err)
	}
	if n == 0 {
		return services.Errorf(services.CodeNotFound, "no namespace is named %q", ns)
	}
	return nil
}

// Grant gives a user role in namespace ns ("*" for every namespace),
// replacing the role they had there.
func (a *Accounts) Grant(ctx context.Context, userID, ns string, role services.Role) error {
	if err := validMemberRole(role); err != nil {
		return err
	}
	return a.changeMemberships(ctx, userID, func(tx *gorm.DB) error {
		if err := memberNamespace(tx, ns); err != nil {
			return err
		}
		m := models.Membership{UserID: userID, Namespace: ns, Role: string(role), CreatedAt: a.now()}
		return tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "user_id"}, {Name: "namespace"}},
			DoUpdates: clause.AssignmentColumns([]string{"role"})}).Create(&m).Error
	})
}

// Revoke ends a user's membership in namespace ns ("*" for the one that
// holds everywhere).
func (a *Accounts) Revoke(ctx context.Context, userID, ns string) error {
	return a.changeMemberships(ctx, userID, func(tx *gorm.DB) error {
		res := tx.Where("user_id = ? AND namespace = ?", userID, ns).Delete(&models.Membership{})
		if res.Error == nil && res.RowsAffected == 0 {
			return services.Errorf(services.CodeNotFound, "%s has no membership in %q", userID, ns)
		}
		return res.Error
	})
}

// changeMemberships runs change and then keeps users.role, for a user who
// is not an admin, the strongest role their memberships give.
func (a *Accounts) changeMemberships(ctx context.Context, userID string, change func(tx *gorm.DB) error) error {
	err := a.st.GormWriter().WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var u models.User
		if err := tx.Where("id = ?", userID).Limit(1).Find(&u).Error; err != nil {
			return err
		}
		if u.ID == "" {
			return services.Errorf(services.CodeNotFound, "no such user")
		}
		if err := change(tx); err != nil {
			return err
		}
		if u.Role == string(services.RoleAdmin) {
			return nil
		}
		var ops int64
		if err := tx.Model(&models.Membership{}).Where("user_id = ? AND role = ?", userID, "operator").Count(&ops).Error; err != nil {
			return err
		}
		role := services.RoleViewer
		if ops > 0 {
			role = services.RoleOperator
		}
		return tx.Model(&models.User{}).Where("id = ?", userID).
			Updates(map[string]any{"role": string(role), "updated_at": a.now()}).Error
	})
	if _, ok := services.AsError(err); ok {
		return err
	}
	return services.DBErrorOrNil("accounts: change memberships", err)
}
