package web

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services/evidence"
	"github.com/arbiter-ledger/arbiter/views"
)

// auditPages is the Audit page (admins): the evidence log's verifier key,
// newest checkpoint and last self-check.
type auditPages struct {
	*dashboard
	log   *evidence.Log         // nil: this server keeps no log
	check *evidence.SelfChecker // nil: no self-check runs
}

// auditProblemsShown bounds the problems the page lists.
const auditProblemsShown = 50

func (h *auditPages) page(c echo.Context) error {
	v := views.AdminAuditView{Enabled: h.log != nil, ProblemsShown: auditProblemsShown}
	if h.log != nil {
		ctx := c.Request().Context()
		key, err := h.log.VerifierKey(ctx)
		if err != nil && !errors.Is(err, evidence.ErrNoKey) {
			return err
		}
		v.VerifierKey = key
		cp, err := h.log.Checkpoint(ctx, -1)
		switch {
		case errors.Is(err, evidence.ErrNoCheckpoint):
		case err != nil:
			return err
		default:
			v.Checkpoint, v.CheckpointSize, v.CheckpointAt = string(cp.Note), cp.Size, cp.SignedAt
		}
	}
	if h.check != nil {
		rep, err := h.check.Last()
		v.SelfCheck = rep
		if err != nil {
			v.SelfCheckErr = err.Error()
		}
	}
	return render(c, http.StatusOK, views.AdminAudit(h.pageFor(c, "Audit", "admin"), v))
}

// checkNow runs the self-check at once and says what it found.
func (h *auditPages) checkNow(c echo.Context) error {
	if h.check == nil {
		h.cookies.flash(c, "This server runs no self-check.")
		return c.Redirect(http.StatusSeeOther, "/admin/audit")
	}
	rep, err := h.check.Check(c.Request().Context())
	switch {
	case err != nil:
		h.cookies.flash(c, "The self-check could not run: "+err.Error())
	case rep == nil:
		h.cookies.flash(c, "Nothing to check yet: the log has signed no checkpoint.")
	case rep.OK():
		h.cookies.flash(c, "Self-check: "+strconv.FormatInt(rep.Checked, 10)+" entries checked, intact.")
	default:
		h.cookies.flash(c, "Self-check: "+strconv.Itoa(len(rep.Problems))+" changes found; audit.mismatch sent.")
	}
	return c.Redirect(http.StatusSeeOther, "/admin/audit")
}
