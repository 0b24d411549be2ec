package web

import (
	"net/http"
	"strings"

	"github.com/arbiter-ledger/arbiter/services/accounts"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/models"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/views"
)

func (h *adminPages) keys(c echo.Context) error {
	return h.showKeys(c, http.StatusOK, views.AdminKeysView{Form: views.KeyForm{Role: string(services.RoleAgent)}})
}

// showKeys renders the keys page around v, filling in the lists.
func (h *adminPages) showKeys(c echo.Context, status int, v views.AdminKeysView) error {
	ctx := c.Request().Context()
	keys, err := h.apiKeys.ListKeys(ctx)
	if err != nil {
		return err
	}
	namespaces, err := h.apiKeys.Namespaces(ctx)
	if err != nil {
		return err
	}
	for _, k := range keys {
		v.Keys = append(v.Keys, adminKey(k))
	}
	for _, ns := range namespaces {
		v.Namespaces = append(v.Namespaces, ns.Name)
	}
	return render(c, status, views.AdminKeys(h.pageFor(c, "API keys", "admin"), v))
}

func adminKey(k models.APIKey) views.AdminKey {
	v := views.AdminKey{ID: k.ID, Prefix: k.Prefix, Name: k.Name, Role: k.Role, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt}
	if k.Namespace != nil {
		v.Namespace = *k.Namespace
	}
	if k.Owner != nil {
		v.Owner = k.Owner.Email
	}
	return v
}

// createKey answers with the page itself, not a redirect: the secret exists
// only in this response, so it must never be cached or put in a cookie.
// The key belongs to the admin who creates it: its approvals count as theirs.
func (h *adminPages) createKey(c echo.Context) error {
	form := views.KeyForm{Namespace: strings.TrimSpace(c.FormValue("namespace")),
		Name: strings.TrimSpace(c.FormValue("name")), Role: c.FormValue("role")}
	me, _ := currentUser(c)
	m, secret, err := h.apiKeys.CreateKey(c.Request().Context(), accounts.CreateKeyRequest{
		Namespace: form.Namespace, Name: form.Name, Role: services.Role(form.Role), Owner: me.Email})
	if err != nil {
		return refused(c, err, func(status int, msg string) error {
			form.Error = msg
			return h.showKeys(c, status, views.AdminKeysView{Form: form})
		})
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	base := strings.TrimRight(h.publicURL, "/")
	if base == "" {
		base = c.Scheme() + "://" + c.Request().Host
	}
	return h.showKeys(c, http.StatusCreated, views.AdminKeysView{
		New:  &views.NewKey{Key: adminKey(m), Secret: secret, BaseURL: base},
		Form: views.KeyForm{Namespace: form.Namespace, Role: form.Role},
	})
}

func (h *adminPages) revokeKey(c echo.Context) error {
	m, err := h.apiKeys.RevokeKey(c.Request().Context(), c.Param("id"))
	if err != nil {
		return refused(c, err, func(status int, msg string) error {
			return h.showKeys(c, status, views.AdminKeysView{Error: msg, Form: views.KeyForm{Role: string(services.RoleAgent)}})
		})
	}
	h.cookies.flash(c, "Revoked key "+m.Prefix+"… ("+m.Name+"): requests with it get 401 from now on.")
	return c.Redirect(http.StatusSeeOther, "/admin/keys")
}
