package services

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Decisions an operator can take, in the order a person reads them.
var Decisions = []string{"confirm", "retry", "compensate", "mark_compensated", "abandon"}

// MaxReasonBytes bounds a decision's reason.
const MaxReasonBytes = 4096

// DecisionInput is an operator's resolution of an action.
type DecisionInput struct {
	Decision                 string          `json:"decision"`
	Reason                   string          `json:"reason"`
	ExpectedVersion          *int            `json:"expected_version,omitempty"`
	AcknowledgeDuplicateRisk bool            `json:"acknowledge_duplicate_risk,omitempty"`
	ExternalRef              *string         `json:"external_ref,omitempty"`
	Result                   json.RawMessage `json:"result,omitempty"`
}

// Validate checks the decision's fields, not whether it is allowed now.
func (d *DecisionInput) Validate() error {
	known := false
	for _, k := range Decisions {
		known = known || k == d.Decision
	}
	switch {
	case d.Decision == "":
		return Errorf(CodeInvalid, "field \"decision\" is required: one of %s", strings.Join(Decisions, ", "))
	case !known:
		return Errorf(CodeInvalid, "unknown decision %q: use one of %s", d.Decision, strings.Join(Decisions, ", "))
	case strings.TrimSpace(d.Reason) == "":
		return Errorf(CodeInvalid, "field \"reason\" is required: say why, for whoever reads the ledger later")
	case len(d.Reason) > MaxReasonBytes || !utf8.ValidString(d.Reason) || strings.ContainsRune(d.Reason, 0):
		return Errorf(CodeInvalid, "field \"reason\" must be valid UTF-8 of at most %d bytes, without NUL characters", MaxReasonBytes)
	case d.ExpectedVersion != nil && *d.ExpectedVersion < 1:
		return Errorf(CodeInvalid, "field \"expected_version\" must be 1 or more")
	case len(d.Result) > MaxJSONBytes:
		return Errorf(CodeInvalid, "field \"result\" is %d bytes; the limit is %d", len(d.Result), MaxJSONBytes)
	}
	if err := checkJSONField("result", d.Result); err != nil {
		return err
	}
	if (d.ExternalRef != nil || d.Result != nil) && d.Decision != "confirm" {
		return Errorf(CodeInvalid, "fields \"external_ref\" and \"result\" are evidence for confirm decisions only")
	}
	if d.AcknowledgeDuplicateRisk && d.Decision != "retry" {
		return Errorf(CodeInvalid, "field \"acknowledge_duplicate_risk\" applies to retry decisions only")
	}
	return checkLabel("external_ref", d.ExternalRef, MaxLabelBytes)
}

func (d *DecisionInput) payload() map[string]any {
	p := map[string]any{"decision": d.Decision, "reason": d.Reason}
	if d.AcknowledgeDuplicateRisk {
		p["acknowledge_duplicate_risk"] = true
	}
	if d.ExternalRef != nil {
		p["external_ref"] = *d.ExternalRef
	}
	if d.Result != nil {
		p["result"] = json.RawMessage(d.Result)
	}
	if d.ExpectedVersion != nil {
		p["expected_version"] = *d.ExpectedVersion
	}
	return p
}
