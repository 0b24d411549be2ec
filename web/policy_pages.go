package web

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/policies"
	"github.com/arbiter-ledger/arbiter/views"
)

// policyPages serve the approval policies for admins (the router puts
// requireRole(admin) in front of every route): the list with the form to
// add one, one policy with its versions, and the controls. They use the
// same service as the /v1/policies API; "Try it" runs the rule on recent
// first intents without saving.
type policyPages struct {
	*dashboard
	policies policyManager
}

// policyForm reads the form, as typed and as service input. A number field
// left empty is left out; one that is not a number is refused as the
// service refuses an out-of-range one.
func policyForm(c echo.Context) (views.PolicyForm, policies.Input, error) {
	params, err := c.FormParams()
	if err != nil {
		return views.PolicyForm{}, policies.Input{}, services.Errorf(services.CodeInvalid, "unreadable form: %v", err)
	}
	f := views.PolicyForm{Name: strings.TrimSpace(params.Get("name")), Namespace: strings.TrimSpace(params.Get("namespace")),
		Tools: params.Get("tools"), Condition: params.Get("condition"), Approvals: params.Get("approvals_required"),
		ExpiresAfter: params.Get("expires_after"), EscalateAfter: params.Get("escalate_after"),
		Enabled: params.Get("enabled") == "true"}
	tools := append([]string{}, splitTools(f.Tools)...)
	in := policies.Input{Name: &f.Name, Tools: &tools, Condition: &f.Condition, Enabled: &f.Enabled}
	if f.Namespace != "" {
		in.Namespace = &f.Namespace
	}
	for _, n := range []struct {
		value string
		into  **int
		name  string
	}{{f.Approvals, &in.ApprovalsRequired, "approvals"}, {f.ExpiresAfter, &in.ExpiresAfter, "expires after"},
		{f.EscalateAfter, &in.EscalateAfter, "escalates after"}} {
		if strings.TrimSpace(n.value) == "" {
			continue
		}
		v, err := strconv.Atoi(strings.TrimSpace(n.value))
		if err != nil {
			return f, in, services.Errorf(services.CodeInvalid, "%q is not a number of %s", n.value, n.name)
		}
		*n.into = &v
	}
	return f, in, nil
}

// showRefusal puts a refusal on the form: the compiler's message next to the
// condition, anything else above the form.
func showRefusal(f *views.PolicyForm, err error) {
	if e, ok := services.AsError(err); ok && e.Code == services.CodeInvalidPolicy {
		f.ConditionError = e.Message
		return
	}
	if e, ok := services.AsError(err); ok {
		f.Error = e.Message
	}
}

func (h *policyPages) list(c echo.Context) error {
	return h.renderList(c, http.StatusOK, views.PolicyForm{Approvals: "1", ExpiresAfter: "86400", Enabled: true})
}

func (h *policyPages) renderList(c echo.Context, status int, f views.PolicyForm) error {
	ps, err := h.policies.List(c.Request().Context(), principal(c), "")
	if err != nil {
		return err
	}
	return render(c, status, views.Policies(h.pageFor(c, "Approval policies", "admin"),
		views.PoliciesView{Policies: ps, Form: f, Now: time.Now()}))
}

// try fills the form's preview: what the rule would have caught.
func (h *policyPages) try(c echo.Context, f *views.PolicyForm, in policies.Input, namespace string) int {
	res, err := h.policies.Test(c.Request().Context(), principal(c), policies.TestInput{Namespace: namespace,
		Tools: *in.Tools, Condition: f.Condition})
	if err != nil {
		showRefusal(f, err)
		return http.StatusBadRequest
	}
	f.Tried = res
	return http.StatusOK
}

func (h *policyPages) create(c echo.Context) error {
	f, in, err := policyForm(c)
	if err != nil {
		showRefusal(&f, err)
		return h.renderList(c, http.StatusBadRequest, f)
	}
	if c.FormValue("do") == "test" {
		return h.renderList(c, h.try(c, &f, in, f.Namespace), f)
	}
	p, err := h.policies.Create(c.Request().Context(), principal(c), in)
	if err != nil {
		return refused(c, err, func(status int, msg string) error {
			showRefusal(&f, err)
			return h.renderList(c, status, f)
		})
	}
	h.cookies.flash(c, "Policy created: "+p.Name+" (version 1).")
	return c.Redirect(http.StatusSeeOther, "/admin/policies/"+p.ID)
}

func (h *policyPages) show(c echo.Context) error {
	p, err := h.policies.Get(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	notice := ""
	if c.QueryParam("saved") != "" {
		notice = "Saved as version " + strconv.Itoa(p.Version) + "."
	}
	return h.renderPolicy(c, http.StatusOK, p, views.PolicyFormFor(p), notice)
}

func (h *policyPages) renderPolicy(c echo.Context, status int, p *policies.Policy, f views.PolicyForm, notice string) error {
	vs, err := h.policies.Versions(c.Request().Context(), principal(c), p.ID)
	if err != nil {
		return err
	}
	return render(c, status, views.Policy(h.pageFor(c, "Policy "+p.Name, "admin"),
		views.PolicyView{Policy: p, Versions: vs, Form: f, Notice: notice, Now: time.Now()}))
}

func (h *policyPages) update(c echo.Context) error {
	p, err := h.policies.Get(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	f, in, err := policyForm(c)
	f.Namespace, in.Namespace = p.Namespace, nil
	if err != nil {
		showRefusal(&f, err)
		return h.renderPolicy(c, http.StatusBadRequest, p, f, "")
	}
	if in.EscalateAfter == nil {
		in.EscalateAfter = new(0) // an empty field removes the escalation
	}
	if c.FormValue("do") == "test" {
		return h.renderPolicy(c, h.try(c, &f, in, p.Namespace), p, f, "")
	}
	saved, err := h.policies.Update(c.Request().Context(), principal(c), p.ID, in)
	if err != nil {
		return refused(c, err, func(status int, msg string) error {
			showRefusal(&f, err)
			return h.renderPolicy(c, status, p, f, "")
		})
	}
	return c.Redirect(http.StatusSeeOther, "/admin/policies/"+saved.ID+"?saved=1")
}

func (h *policyPages) delete(c echo.Context) error {
	if err := h.policies.Delete(c.Request().Context(), principal(c), c.Param("id")); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/policies")
}
