package web

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/views"
)

// passwordChanger is what the change-password page needs.
type passwordChanger interface {
	ChangePassword(ctx context.Context, userID, current, password, keepToken string) error
}

// passwordPages let a signed-in user choose a new password; a user who
// must (the first admin) is sent here by requirePasswordChosen.
type passwordPages struct {
	*dashboard
	accounts passwordChanger
}

const changePasswordPath = "/account/password"

func (h *passwordPages) form(c echo.Context) error {
	u, _ := currentUser(c)
	if !accounts.HasPassword(u) {
		return render(c, http.StatusOK, views.NoLocalPassword(h.pageFor(c, "Your password", "")))
	}
	return render(c, http.StatusOK, views.ChangePassword(h.pageFor(c, "Change password", ""), u.MustChangePassword, ""))
}

func (h *passwordPages) submit(c echo.Context) error {
	u, _ := currentUser(c)
	if !accounts.HasPassword(u) {
		return render(c, http.StatusConflict, views.NoLocalPassword(h.pageFor(c, "Your password", "")))
	}
	r := c.Request()
	show := func(status int, msg string) error {
		return render(c, status, views.ChangePassword(h.pageFor(c, "Change password", ""), u.MustChangePassword, msg))
	}
	password := r.PostFormValue("password")
	if password != r.PostFormValue("confirm") {
		return show(http.StatusBadRequest, "The new passwords do not match.")
	}
	err := h.accounts.ChangePassword(r.Context(), u.ID, r.PostFormValue("current"), password, h.cookies.get(c, sessionCookie))
	if e, ok := services.AsError(err); ok && errors.Is(err, services.ErrInvalid) {
		return show(http.StatusBadRequest, e.Message)
	}
	if err != nil {
		return err
	}
	// Changing the password ended every other session of the user; this
	// one, where the password was just given, stays.
	h.cookies.flash(c, "Your password is changed, and your other sessions are signed out.")
	return c.Redirect(http.StatusSeeOther, "/")
}

// requirePasswordChosen sends a user who must choose a new password to the
// page for it, whatever they asked for; signing out still works.
func requirePasswordChosen(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		u, ok := currentUser(c)
		if !ok || !u.MustChangePassword || strings.HasPrefix(c.Path(), changePasswordPath) {
			return next(c)
		}
		if isHTMX(c) {
			c.Response().Header().Set("HX-Redirect", changePasswordPath)
			return c.NoContent(http.StatusForbidden)
		}
		if c.Request().Method != http.MethodGet {
			return services.Errorf(services.CodeForbidden, "choose a new password first, at %s", changePasswordPath)
		}
		return c.Redirect(http.StatusSeeOther, changePasswordPath)
	}
}
