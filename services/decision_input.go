package services

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// MaxReasonBytes bounds a decision's reason.
const MaxReasonBytes = 4096

// DecisionInput is an operator's resolution of an action.
type DecisionInput struct {
	Decision                 record.Decision `json:"decision"`
	Reason                   string          `json:"reason"`
	ExpectedVersion          *int            `json:"expected_version,omitempty"`
	AcknowledgeDuplicateRisk bool            `json:"acknowledge_duplicate_risk,omitempty"`
	ExternalRef              *string         `json:"external_ref,omitempty"`
	Result                   json.RawMessage `json:"result,omitempty"`
}

// Validate checks the decision's fields, not whether it is allowed now.
func (d *DecisionInput) Validate() error {
	known := d.Decision.Valid()
	switch {
	case d.Decision == "":
		return Errorf(CodeInvalid, "field \"decision\" is required: one of %s", ListOrNone(record.Decisions))
	case !known:
		return Errorf(CodeInvalid, "unknown decision %q: use one of %s", d.Decision, ListOrNone(record.Decisions))
	case strings.TrimSpace(d.Reason) == "" && d.Decision != record.DecisionApprove:
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
	if (d.ExternalRef != nil || d.Result != nil) && d.Decision != record.DecisionConfirm {
		return Errorf(CodeInvalid, "fields \"external_ref\" and \"result\" are evidence for confirm decisions only")
	}
	if d.AcknowledgeDuplicateRisk && d.Decision != record.DecisionRetry {
		return Errorf(CodeInvalid, "field \"acknowledge_duplicate_risk\" applies to retry decisions only")
	}
	return checkLabel("external_ref", d.ExternalRef, MaxLabelBytes)
}

// payload is the decision's entry; via is how the operator decided (the
// actor's Via, which the entries table keeps in the payload).
func (d *DecisionInput) payload(via string) *record.DecisionPayload {
	return &record.DecisionPayload{AcknowledgeDuplicateRisk: d.AcknowledgeDuplicateRisk, Decision: d.Decision,
		ExpectedVersion: d.ExpectedVersion, ExternalRef: d.ExternalRef, Reason: d.Reason, Result: d.Result, Via: via}
}
