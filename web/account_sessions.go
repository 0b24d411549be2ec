package web

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/views"
)

// sessionLister is what the sessions page needs.
type sessionLister interface {
	Sessions(ctx context.Context, userID string) ([]accounts.SessionInfo, error)
	EndSession(ctx context.Context, userID, id string) error
	EndOtherSessions(ctx context.Context, userID, keepToken string) error
}

// sessionPages show signed-in users their own sessions and let them end
// them.
type sessionPages struct {
	*dashboard
	accounts sessionLister
}

func (h *sessionPages) list(c echo.Context) error {
	s, _ := currentSession(c)
	infos, err := h.accounts.Sessions(c.Request().Context(), s.User.ID)
	if err != nil {
		return err
	}
	rows := make([]views.AccountSession, 0, len(infos))
	for _, i := range infos {
		rows = append(rows, views.AccountSession{ID: i.ID, CreatedAt: i.CreatedAt, LastSeenAt: i.LastSeenAt,
			Address: i.Address, UserAgent: i.UserAgent, Current: i.ID == s.ID})
	}
	return render(c, http.StatusOK, views.AccountSessions(h.pageFor(c, "Your sessions", "account"), rows))
}

// end ends one session of the user's; another user's session is not found.
func (h *sessionPages) end(c echo.Context) error {
	s, _ := currentSession(c)
	if err := h.accounts.EndSession(c.Request().Context(), s.User.ID, c.Param("id")); err != nil {
		return err
	}
	if c.Param("id") == s.ID {
		h.cookies.set(c, sessionCookie, "", -1)
		return c.Redirect(http.StatusSeeOther, "/signin")
	}
	h.cookies.flash(c, "Ended the session.")
	return c.Redirect(http.StatusSeeOther, "/account/sessions")
}

func (h *sessionPages) endOthers(c echo.Context) error {
	s, _ := currentSession(c)
	if err := h.accounts.EndOtherSessions(c.Request().Context(), s.User.ID, h.cookies.get(c, sessionCookie)); err != nil {
		return err
	}
	h.cookies.flash(c, "Every other session is signed out.")
	return c.Redirect(http.StatusSeeOther, "/account/sessions")
}
