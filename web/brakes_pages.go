package web

import (
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services/policies"
	"github.com/arbiter-ledger/arbiter/views"
)

// brakePages serve the limits across actions and the freezes to everyone
// signed in (each sees their namespaces'): the limits with their busiest
// groups, the active freezes with a lift each, the form to start one, and
// the breakers with what they count. Operators of a namespace and admins
// start and lift freezes, as in the API.
type brakePages struct {
	*dashboard
	limits   *policies.Limits
	freezes  *policies.Freezes
	breakers *policies.Breakers
}

// usageGroups is how many groups of each limit the limits page shows.
const usageGroups = 10

func (h *brakePages) limitsPage(c echo.Context) error {
	ctx, pr := c.Request().Context(), principal(c)
	ls, err := h.limits.List(ctx, pr, "")
	if err != nil {
		return err
	}
	v := views.LimitsView{}
	for _, l := range ls {
		u, err := h.limits.Usage(ctx, pr, l.ID, "")
		if err != nil {
			return err
		}
		if len(u.Groups) > usageGroups {
			u.Groups = u.Groups[:usageGroups]
		}
		v.Limits = append(v.Limits, views.LimitUse{Limit: l, Usage: u})
	}
	return render(c, http.StatusOK, views.Limits(h.pageFor(c, "Limits", "limits"), v, time.Now()))
}

// limitGroupPage shows one group of a limit with the actions behind its use.
func (h *brakePages) limitGroupPage(c echo.Context) error {
	ctx, pr := c.Request().Context(), principal(c)
	id, group := c.Param("id"), c.QueryParam("group")
	l, err := h.limits.Get(ctx, pr, id)
	if err != nil {
		return err
	}
	u, err := h.limits.Usage(ctx, pr, id, group)
	if err != nil {
		return err
	}
	cs, err := h.limits.GroupCharges(ctx, pr, id, group)
	if err != nil {
		return err
	}
	v := views.LimitGroupView{Limit: l, Group: group, Charges: cs}
	for _, g := range u.Groups {
		if g.Group == group { // "" asks for every group: pick the one named
			v.Used = g.Used
		}
	}
	return render(c, http.StatusOK, views.LimitGroup(h.pageFor(c, l.Name, "limits"), v, time.Now()))
}

func (h *brakePages) freezesPage(c echo.Context) error {
	return h.renderFreezes(c, http.StatusOK, views.FreezesView{})
}

// lifted is how many lifted freezes the page shows.
const lifted = 20

func (h *brakePages) renderFreezes(c echo.Context, status int, v views.FreezesView) error {
	ctx, pr := c.Request().Context(), principal(c)
	all, err := h.freezes.List(ctx, pr, "", false)
	if err != nil {
		return err
	}
	for _, f := range all {
		switch {
		case f.Active():
			v.Active = append(v.Active, f)
		case len(v.Lifted) < lifted:
			v.Lifted = append(v.Lifted, f)
		}
	}
	if v.Breakers, err = h.breakers.List(ctx, pr, ""); err != nil {
		return err
	}
	return render(c, status, views.Freezes(h.pageFor(c, "Freezes", "freezes"), v, time.Now()))
}

// start starts a freeze from the form of this page, of triage or of a
// tool's actions, and comes back to the freezes page; a refusal is shown
// on the form as typed.
func (h *brakePages) start(c echo.Context) error {
	f := views.FreezeForm{Namespace: strings.TrimSpace(c.FormValue("namespace")), Tools: c.FormValue("tools"),
		Reason: c.FormValue("reason")}
	in := policies.FreezeInput{Namespace: &f.Namespace, Reason: &f.Reason}
	if tools := splitTools(f.Tools); len(tools) > 0 {
		in.Tools = &tools
	}
	fz, err := h.freezes.Start(c.Request().Context(), principal(c), in)
	if err != nil {
		return refused(c, err, func(status int, msg string) error {
			f.Error = msg
			return h.renderFreezes(c, status, views.FreezesView{Form: f})
		})
	}
	h.cookies.flash(c, "Froze "+strings.Join(fz.Tools, ", ")+" in "+fz.Namespace+": new keys wait, nothing else of them runs.")
	return c.Redirect(http.StatusSeeOther, "/freezes")
}

func (h *brakePages) lift(c echo.Context) error {
	reason := c.FormValue("reason")
	fz, err := h.freezes.Lift(c.Request().Context(), principal(c), c.Param("id"), policies.LiftInput{Reason: &reason})
	if err != nil {
		return refused(c, err, func(status int, msg string) error {
			return h.renderFreezes(c, status, views.FreezesView{LiftID: c.Param("id"), LiftError: msg})
		})
	}
	h.cookies.flash(c, "Lifted the freeze of "+strings.Join(fz.Tools, ", ")+" in "+fz.Namespace+": what it held goes on.")
	return c.Redirect(http.StatusSeeOther, "/freezes")
}

// splitTools reads a comma-separated list of tool patterns.
func splitTools(s string) []string {
	var out []string
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}
