package views

import (
	"strconv"
	"strings"
	"time"

	"github.com/arbiter-ledger/arbiter/services/policies"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// PoliciesView is the policy list with the form to add one, and what the
// form's rule would have caught when it was tried.
type PoliciesView struct {
	Policies []*policies.Policy
	Form     PolicyForm
	Now      time.Time
}

// PolicyView is one policy: the form to change it, and its versions.
type PolicyView struct {
	Policy   *policies.Policy
	Versions []*policies.Policy
	Form     PolicyForm
	Notice   string
	Now      time.Time
}

// PolicyForm is what an admin typed, kept when the server refuses it, and
// the preview of a tried rule.
type PolicyForm struct {
	Name, Namespace, Tools, Condition      string
	Approvals, ExpiresAfter, EscalateAfter string
	Enabled                                bool
	// Error is why the form was refused; ConditionError is the CEL
	// compiler's message, shown next to the condition.
	Error, ConditionError string
	// Tried is the preview of the rule: what it would have caught.
	Tried *policies.TestResult
}

// PolicyFormFor fills the form with a policy as it is.
func PolicyFormFor(p *policies.Policy) PolicyForm {
	f := PolicyForm{Name: p.Name, Namespace: p.Namespace, Tools: strings.Join(p.Tools, ", "), Condition: p.Condition,
		Approvals: strconv.Itoa(p.ApprovalsRequired), ExpiresAfter: strconv.Itoa(p.ExpiresAfter), Enabled: p.Enabled}
	if p.EscalateAfter != nil {
		f.EscalateAfter = strconv.Itoa(*p.EscalateAfter)
	}
	return f
}

func policyPath(id string, what ...string) string {
	p := "/admin/policies/" + id
	for _, w := range what {
		p += "/" + w
	}
	return p
}

func seconds(n int) string {
	d := time.Duration(n) * time.Second
	switch {
	case n%3600 == 0:
		return strconv.Itoa(n/3600) + " h"
	case n%60 == 0:
		return strconv.Itoa(n/60) + " min"
	}
	return d.String()
}

func escalation(p *policies.Policy) string {
	if p.EscalateAfter == nil {
		return "never"
	}
	return "after " + seconds(*p.EscalateAfter)
}

func orEveryIntent(cond string) string {
	if strings.TrimSpace(cond) == "" {
		return "every intent of these tools"
	}
	return cond
}

// paramsText is an action's params on one line, cut at 120 characters.
func paramsText(a *record.Action) string {
	s := strings.Join(strings.Fields(string(a.Params)), " ")
	if len(s) > 120 {
		s = s[:117] + "…"
	}
	return s
}

func joinTools(ts []string) string { return strings.Join(ts, ", ") }
