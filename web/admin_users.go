package web

import (
	"net/http"
	"strings"

	"github.com/arbiter-ledger/arbiter/services/accounts"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/models"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/views"
)

func (h *adminPages) users(c echo.Context) error {
	return h.showUsers(c, http.StatusOK, views.AdminUsersView{Form: views.UserForm{Role: string(services.RoleViewer)}})
}

// showUsers renders the users page around v, filling in the list.
func (h *adminPages) showUsers(c echo.Context, status int, v views.AdminUsersView) error {
	users, err := h.accounts.Users(c.Request().Context())
	if err != nil {
		return err
	}
	ms, err := h.accounts.AllMemberships(c.Request().Context())
	if err != nil {
		return err
	}
	nss, err := h.apiKeys.Namespaces(c.Request().Context())
	if err != nil {
		return err
	}
	for _, ns := range nss {
		v.Namespaces = append(v.Namespaces, ns.Name)
	}
	me, _ := currentUser(c)
	for _, u := range users {
		row := views.AdminUser{ID: u.ID, Email: u.Email, Role: u.Role, CreatedAt: u.CreatedAt,
			DisabledAt: u.DisabledAt, Me: u.ID == me.ID}
		if u.Role != string(services.RoleAdmin) {
			row.Where, row.Memberships = views.MembershipSummary(ms[u.ID]), ms[u.ID]
		}
		v.Users = append(v.Users, row)
	}
	v.MinPassword, v.MaxPassword = accounts.MinPasswordChars, accounts.MaxPasswordChars
	if v.Form.Role == "" {
		v.Form.Role = string(services.RoleViewer)
	}
	return render(c, status, views.AdminUsers(h.pageFor(c, "Users", "admin"), v))
}

func (h *adminPages) createUser(c echo.Context) error {
	form := views.UserForm{Email: strings.TrimSpace(c.FormValue("email")), Role: c.FormValue("role"), Namespace: c.FormValue("namespace")}
	var where []string
	if form.Role != string(services.RoleAdmin) && form.Namespace != "" {
		where = []string{form.Namespace}
	}
	u, err := h.accounts.CreateMember(c.Request().Context(), form.Email, services.Role(form.Role), where, c.FormValue("password"))
	if err != nil {
		return refused(c, err, func(status int, msg string) error {
			form.Error = msg
			return h.showUsers(c, status, views.AdminUsersView{Form: form})
		})
	}
	in := ""
	if u.Role != string(services.RoleAdmin) {
		in = " in " + views.MembershipWhere(form.Namespace)
	}
	h.cookies.flash(c, "Created "+u.Role+" "+u.Email+in+". They can sign in now with the password you chose.")
	return c.Redirect(http.StatusSeeOther, "/admin/users")
}

// Nobody may disable themselves or give up their own admin role: the person
// doing it is an admin, so the instance always keeps one who can sign in.
var (
	errDemoteSelf  = services.Errorf(services.CodeInvalid, "you cannot remove your own admin role; another admin can do it for you")
	errNoSuchUser  = services.Errorf(services.CodeNotFound, "no such user")
	errGrantAdmin  = services.Errorf(services.CodeInvalid, "an admin sees and decides in every namespace; set their role to viewer or operator first")
	errDisableSelf = services.Errorf(services.CodeInvalid, "you cannot disable your own account; another admin can do it for you")
)

func (h *adminPages) setRole(c echo.Context) error {
	role := services.Role(c.FormValue("role"))
	return h.onUser(c, func(u models.User, self bool) (string, error) {
		if self && role != services.RoleAdmin {
			return "", errDemoteSelf
		}
		if err := h.accounts.SetRole(c.Request().Context(), u.ID, role); err != nil {
			return "", err
		}
		return u.Email + " is now " + string(role) + ".", nil
	})
}

// grant gives a viewer or operator a role in one namespace, or everywhere.
func (h *adminPages) grant(c echo.Context) error {
	role, ns := services.Role(c.FormValue("role")), c.FormValue("namespace")
	return h.onUser(c, func(u models.User, self bool) (string, error) {
		if u.Role == string(services.RoleAdmin) {
			return "", errGrantAdmin
		}
		if err := h.accounts.Grant(c.Request().Context(), u.ID, ns, role); err != nil {
			return "", err
		}
		return u.Email + " is now " + string(role) + " in " + views.MembershipWhere(ns) + ".", nil
	})
}

func (h *adminPages) revoke(c echo.Context) error {
	ns := c.FormValue("namespace")
	return h.onUser(c, func(u models.User, self bool) (string, error) {
		if err := h.accounts.Revoke(c.Request().Context(), u.ID, ns); err != nil {
			return "", err
		}
		return u.Email + " is no longer a member in " + views.MembershipWhere(ns) + ".", nil
	})
}

func (h *adminPages) disableUser(c echo.Context) error {
	return h.onUser(c, func(u models.User, self bool) (string, error) {
		if self {
			return "", errDisableSelf
		}
		if err := h.accounts.SetDisabled(c.Request().Context(), u.ID, true); err != nil {
			return "", err
		}
		return "Disabled " + u.Email + " and signed them out everywhere.", nil
	})
}

func (h *adminPages) enableUser(c echo.Context) error {
	return h.onUser(c, func(u models.User, self bool) (string, error) {
		if err := h.accounts.SetDisabled(c.Request().Context(), u.ID, false); err != nil {
			return "", err
		}
		return "Enabled " + u.Email + ": they can sign in again.", nil
	})
}

func (h *adminPages) endSessions(c echo.Context) error {
	return h.onUser(c, func(u models.User, self bool) (string, error) {
		if err := h.accounts.EndSessions(c.Request().Context(), u.ID); err != nil {
			return "", err
		}
		return "Signed " + u.Email + " out everywhere.", nil
	})
}

// onUser runs a per-row change on the user named by the route, then
// redirects with its notice, or re-renders the page with its refusal.
func (h *adminPages) onUser(c echo.Context, change func(u models.User, self bool) (notice string, err error)) error {
	notice, err := h.changeUser(c, change)
	if err != nil {
		return refused(c, err, func(status int, msg string) error {
			return h.showUsers(c, status, views.AdminUsersView{Error: msg})
		})
	}
	h.cookies.flash(c, notice)
	return c.Redirect(http.StatusSeeOther, "/admin/users")
}

func (h *adminPages) changeUser(c echo.Context, change func(u models.User, self bool) (string, error)) (string, error) {
	id := c.Param("id")
	// Not a UUID: no such user, rather than a database error on PostgreSQL.
	if _, err := uuid.Parse(id); err != nil {
		return "", errNoSuchUser
	}
	u, err := h.accounts.User(c.Request().Context(), id)
	if err != nil {
		return "", err
	}
	me, _ := currentUser(c)
	return change(u, u.ID == me.ID)
}
