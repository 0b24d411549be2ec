package web

import (
	"net/http"
	"strings"

	"github.com/arbiter-ledger/arbiter/services/accounts"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/views"
)

// adminPages serves namespaces, API keys and users, for admins only (the
// router puts requireRole(admin) in front of every route). The key pages are
// in admin_keys.go, the user pages in admin_users.go.
type adminPages struct {
	*dashboard
	apiKeys  *accounts.Keys
	accounts *accounts.Accounts
	// publicURL is where agents reach the API, for the example command shown
	// with a new key; the request's own host when unset.
	publicURL string
}

func newAdminPages(dash *dashboard, d Deps) *adminPages {
	return &adminPages{dashboard: dash, apiKeys: d.Keys, accounts: d.Accounts, publicURL: d.PublicURL}
}

func (h *adminPages) index(c echo.Context) error {
	return c.Redirect(http.StatusSeeOther, "/admin/namespaces")
}

func (h *adminPages) namespaces(c echo.Context) error {
	return h.showNamespaces(c, http.StatusOK, views.NamespaceForm{})
}

func (h *adminPages) showNamespaces(c echo.Context, status int, form views.NamespaceForm) error {
	list, err := h.apiKeys.NamespaceSummaries(c.Request().Context())
	if err != nil {
		return err
	}
	v := views.AdminNamespacesView{ActionsCap: accounts.NamespaceActionsCap, Form: form}
	for _, n := range list {
		v.Namespaces = append(v.Namespaces, views.AdminNamespace{Name: n.Name, CreatedAt: n.CreatedAt,
			ActiveKeys: n.ActiveKeys, Actions: n.Actions})
	}
	return render(c, status, views.AdminNamespaces(h.pageFor(c, "Namespaces", "admin"), v))
}

func (h *adminPages) createNamespace(c echo.Context) error {
	name := strings.TrimSpace(c.FormValue("name"))
	if err := h.apiKeys.CreateNamespace(c.Request().Context(), name); err != nil {
		return refused(c, err, func(status int, msg string) error {
			return h.showNamespaces(c, status, views.NamespaceForm{Name: name, Error: msg})
		})
	}
	h.cookies.flash(c, "Created namespace "+name+".")
	return c.Redirect(http.StatusSeeOther, "/admin/namespaces")
}

// refused answers a refused form: a coded error re-renders the form's page
// with its message at the error's status; anything else (the database is
// down) goes to the error page.
func refused(c echo.Context, err error, show func(status int, msg string) error) error {
	e, ok := services.AsError(err)
	status, _ := toAPIError(err)
	if !ok || status >= 500 {
		return err
	}
	c.Set(logErrKey, err)
	return show(status, e.Message)
}
