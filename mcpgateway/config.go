package mcpgateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"
)

// Config is the gateway's configuration file: how the upstream's tools are
// guarded. Without a file every tool gets the defaults (see Rule). The
// format is JSON, documented in docs/mcp-gateway.md; unknown fields are
// errors, so a typo does not silently leave a tool unguarded.
type Config struct {
	// Name prefixes the tool names recorded in the ledger ("payments" makes
	// refund "payments.refund"), which policies match. Required, here or on
	// the command line (--name): it is never taken from the upstream, which
	// could rename itself out of the policies written for it.
	Name string `json:"name,omitempty"`
	// ApprovalWait is how long a call held for approval waits for people's
	// decision before the model is told it is still pending (default 2m).
	ApprovalWait *Duration `json:"approval_wait,omitempty"`
	// Tools are the rules, tried in order; the first whose Match matches a
	// tool's name applies to it. A tool no rule matches gets the defaults.
	Tools []Rule `json:"tools,omitempty"`
}

// Rule says how calls of the tools it matches are guarded. Every field but
// Match is optional.
type Rule struct {
	// Match is a tool name, or a pattern where * matches any run of
	// characters ("find_*").
	Match string `json:"match"`
	// Guarded says whether calls are recorded in the ledger. Default: yes,
	// whatever the upstream says of the tool (see TrustReadOnlyHint).
	Guarded *bool `json:"guarded,omitempty"`
	// TrustReadOnlyHint lets the upstream decide: a tool it annotates
	// readOnlyHint (at start or in a changed tools list) is passed through
	// unrecorded, with effect read_only. Default false: the upstream's
	// annotations are never trusted.
	TrustReadOnlyHint bool `json:"trust_read_only_hint,omitempty"`
	// Effect is the effect class: read_only, idempotent, keyed or unkeyed
	// (the default).
	Effect string `json:"effect,omitempty"`
	// Lease is how long a call may run without the gateway heartbeating
	// before its outcome counts as unknown (default 300s).
	Lease *Duration `json:"lease,omitempty"`
	// Key is the key template over the call's arguments, the business
	// identity that makes a repeat recognisable: "refund:{order_id}".
	// Default: the ledger tool name and a hash of the canonical arguments,
	// so only an identical call is a repeat.
	Key string `json:"key,omitempty"`
	// Reference is a template for the business reference shown to
	// operators ("order {order_id}").
	Reference string `json:"reference,omitempty"`
	// ExternalRef is a template over the arguments and the result
	// ("{result.refund_id}"): the id of the effect downstream, recorded
	// with the success.
	ExternalRef string `json:"external_ref,omitempty"`
	// RequireApproval holds the first call of each key until a person
	// approves it (approval policies in Arbiter apply either way).
	RequireApproval bool `json:"require_approval,omitempty"`
	// ApprovalWait overrides the file's ApprovalWait for these tools.
	ApprovalWait *Duration `json:"approval_wait,omitempty"`
	// Compensate names the upstream tool that undoes a call, and its
	// arguments, when an operator decides compensate.
	Compensate *ToolCall `json:"compensate,omitempty"`
	// Lookup names the upstream tool that finds out whether a call whose
	// outcome is unknown happened, before a person has to decide.
	Lookup *Lookup `json:"lookup,omitempty"`
}

// ToolCall is a call of another upstream tool: its name and its arguments,
// each a template over the original call's arguments ("{order_id}") and,
// for a compensation, its saved result ("{result.refund_id}"). A string
// that is one placeholder copies the value as it is (a number stays a
// number); other values are sent as written.
type ToolCall struct {
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments,omitempty"`
}

// Lookup is a ToolCall whose result says whether the effect happened:
// Found is a field of its structured result (a dotted path) that is present
// and not empty when it did. Its value, if a string, is recorded as the
// effect's external ref.
type Lookup struct {
	ToolCall
	Found string `json:"found"`
}

// Duration is a time.Duration written as in Go ("90s", "5m").
type Duration struct{ time.Duration }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"90s\" or \"5m\", not %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if v <= 0 {
		return fmt.Errorf("duration %q must be positive", s)
	}
	d.Duration = v
	return nil
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// LoadConfig reads a configuration file. An empty path is no file: every
// tool gets the defaults.
func LoadConfig(path string) (*Config, error) {
	if path == "" {
		return &Config{}, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("mcpgateway: read the configuration: %w", err)
	}
	cfg, err := ParseConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("mcpgateway: %s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig reads a configuration document and checks what can be
// checked without the upstream: field names, pattern syntax, effect
// classes, template syntax. What needs the upstream's tools (a template
// naming an argument the tool lacks) is checked by New.
func ParseConfig(raw []byte) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var cfg Config
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	if dec.More() {
		return nil, errors.New("configuration: more than one JSON document")
	}
	var errs []error
	for i, r := range cfg.Tools {
		if err := r.check(); err != nil {
			errs = append(errs, fmt.Errorf("tools[%d] (%q): %w", i, r.Match, err))
		}
	}
	return &cfg, errors.Join(errs...)
}

var effects = []string{"read_only", "idempotent", "keyed", "unkeyed"}

// check validates a rule on its own.
func (r *Rule) check() error {
	var errs []error
	if err := checkPattern(r.Match); err != nil {
		errs = append(errs, err)
	}
	if r.Effect != "" && !slices.Contains(effects, r.Effect) {
		errs = append(errs, fmt.Errorf("effect %q is none of %v", r.Effect, effects))
	}
	if r.Lease != nil && (r.Lease.Duration < time.Second || r.Lease.Duration > 7*24*time.Hour) {
		errs = append(errs, fmt.Errorf("lease %s is outside 1s-168h", r.Lease))
	}
	for _, t := range []struct{ field, tmpl string }{{"key", r.Key}, {"reference", r.Reference}, {"external_ref", r.ExternalRef}} {
		if t.tmpl == "" {
			continue
		}
		tp, err := parseTemplate(t.tmpl)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", t.field, err))
			continue
		}
		if t.field != "external_ref" && tp.usesResult() {
			errs = append(errs, fmt.Errorf("%s %q: {result.…} is known only after the call", t.field, t.tmpl))
		}
	}
	if r.Compensate != nil {
		if err := r.Compensate.check(true); err != nil {
			errs = append(errs, fmt.Errorf("compensate: %w", err))
		}
	}
	if r.Lookup != nil {
		if err := r.Lookup.check(false); err != nil {
			errs = append(errs, fmt.Errorf("lookup: %w", err))
		}
		if r.Lookup.Found == "" {
			errs = append(errs, errors.New("lookup: found is required: the field of the lookup's structured result that is set when the effect happened"))
		}
	}
	if r.Guarded != nil && r.TrustReadOnlyHint {
		errs = append(errs, errors.New("guarded and trust_read_only_hint both decide whether calls are recorded; give one"))
	}
	if r.TrustReadOnlyHint && (r.Compensate != nil || r.Lookup != nil || r.Key != "" || r.RequireApproval) {
		errs = append(errs, errors.New("trust_read_only_hint lets the upstream leave the tool unrecorded, so key, require_approval, compensate and lookup would not apply; give guarded or leave them out"))
	}
	if r.Guarded != nil && !*r.Guarded && (r.Compensate != nil || r.Lookup != nil || r.Key != "" || r.RequireApproval) {
		errs = append(errs, errors.New("an unguarded tool is not recorded, so key, require_approval, compensate and lookup do not apply"))
	}
	return errors.Join(errs...)
}

// check validates a tool call's name and argument templates.
func (c *ToolCall) check(resultAllowed bool) error {
	if c.Tool == "" {
		return errors.New("tool is required")
	}
	var errs []error
	for name, v := range c.Arguments {
		s, ok := v.(string)
		if !ok {
			continue
		}
		tp, err := parseTemplate(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("arguments.%s: %w", name, err))
			continue
		}
		if !resultAllowed && tp.usesResult() {
			errs = append(errs, fmt.Errorf("arguments.%s %q: a lookup runs when the result is unknown; use the call's arguments", name, s))
		}
	}
	return errors.Join(errs...)
}
