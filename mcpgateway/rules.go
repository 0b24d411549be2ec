package mcpgateway

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// defaultApprovalWait is how long a call held for approval waits for the
// decision when the configuration says nothing.
const defaultApprovalWait = 2 * time.Minute

// plan is how calls of one upstream tool are handled: the configuration's
// rule resolved against the tool as the upstream lists it.
type plan struct {
	tool            *mcp.Tool // as the upstream lists it
	guarded         bool
	ledgerTool      string // the tool name recorded in the ledger
	effect          string
	lease           time.Duration // 0: the ledger's default
	key             *template     // nil: the default key
	reference       *template
	externalRef     *template
	requireApproval bool
	approvalWait    time.Duration
	compensate      *callPlan
	lookup          *callPlan
	found           []string // the lookup result's field that says the effect happened
}

// callPlan is a call of another upstream tool with mapped arguments.
type callPlan struct {
	tool string
	args map[string]any       // as configured
	tmpl map[string]*template // the string arguments, parsed
}

// arguments fills the mapping from the original call's values.
func (c *callPlan) arguments(v values) (map[string]any, error) {
	out := make(map[string]any, len(c.args))
	for name, raw := range c.args {
		t, ok := c.tmpl[name]
		if !ok {
			out[name] = raw
			continue
		}
		val, err := t.value(v)
		if err != nil {
			return nil, fmt.Errorf("%s argument %q: %w", c.tool, name, err)
		}
		out[name] = val
	}
	return out, nil
}

// resolve applies the configuration to the upstream's tools. Every mistake
// that can be found before the first call is an error here: a rule naming
// a tool the upstream lacks, a template naming an argument the tool's input
// schema lacks, a compensating or lookup tool that does not exist.
func resolve(cfg *Config, prefix string, tools []*mcp.Tool) (map[string]*plan, error) {
	byName := map[string]*mcp.Tool{}
	for _, t := range tools {
		byName[t.Name] = t
	}
	names := slices.Sorted(maps.Keys(byName))
	var errs []error
	for i, r := range cfg.Tools {
		if !isPattern(r.Match) && byName[r.Match] == nil {
			errs = append(errs, fmt.Errorf("tools[%d]: the upstream has no tool %q (it has %s)", i, r.Match, strings.Join(names, ", ")))
		}
	}
	wait := defaultApprovalWait
	if cfg.ApprovalWait != nil {
		wait = cfg.ApprovalWait.Duration
	}
	plans := map[string]*plan{}
	for _, name := range names {
		t := byName[name]
		var rule Rule
		for _, r := range cfg.Tools {
			if matchPattern(r.Match, name) {
				rule = r
				break
			}
		}
		p, err := newPlan(rule, t, prefix, wait, byName)
		if err != nil {
			errs = append(errs, fmt.Errorf("tool %q: %w", name, err))
			continue
		}
		plans[name] = p
	}
	return plans, errors.Join(errs...)
}

func newPlan(r Rule, t *mcp.Tool, prefix string, wait time.Duration, tools map[string]*mcp.Tool) (*plan, error) {
	// The upstream's annotations count only where the configuration says
	// to trust them: an upstream must not unguard its own tools.
	readOnly := r.TrustReadOnlyHint && t.Annotations != nil && t.Annotations.ReadOnlyHint
	p := &plan{tool: t, guarded: !readOnly, ledgerTool: ledgerTool(prefix, t.Name), effect: r.Effect,
		requireApproval: r.RequireApproval, approvalWait: wait}
	if r.Guarded != nil {
		p.guarded = *r.Guarded
	}
	if p.effect == "" {
		p.effect = "unkeyed"
		if readOnly {
			p.effect = "read_only"
		}
	}
	if r.Lease != nil {
		p.lease = r.Lease.Duration
	}
	if r.ApprovalWait != nil {
		p.approvalWait = r.ApprovalWait.Duration
	}
	props := properties(t.InputSchema)
	var errs []error
	parse := func(field, src string) *template {
		if src == "" {
			return nil
		}
		tp, err := parseTemplate(src)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", field, err))
			return nil
		}
		for _, a := range tp.arguments() {
			if !slices.Contains(props, a) {
				errs = append(errs, fmt.Errorf("%s %q names the argument %q, which the tool's input schema does not have (it has %s)",
					field, src, a, strings.Join(props, ", ")))
			}
		}
		return tp
	}
	p.key = parse("key", r.Key)
	p.reference = parse("reference", r.Reference)
	p.externalRef = parse("external_ref", r.ExternalRef)
	mapping := func(field string, c *ToolCall) *callPlan {
		target, ok := tools[c.Tool]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: the upstream has no tool %q", field, c.Tool))
			return nil
		}
		targetProps := properties(target.InputSchema)
		cp := &callPlan{tool: c.Tool, args: c.Arguments, tmpl: map[string]*template{}}
		for name, v := range c.Arguments {
			if !slices.Contains(targetProps, name) {
				errs = append(errs, fmt.Errorf("%s: %s has no argument %q (it has %s)", field, c.Tool, name, strings.Join(targetProps, ", ")))
			}
			if s, ok := v.(string); ok {
				if tp := parse(field+".arguments."+name, s); tp != nil {
					cp.tmpl[name] = tp
				}
			}
		}
		return cp
	}
	if r.Compensate != nil {
		p.compensate = mapping("compensate", r.Compensate)
	}
	if r.Lookup != nil {
		p.lookup = mapping("lookup", &r.Lookup.ToolCall)
		p.found = strings.Split(r.Lookup.Found, ".")
	}
	return p, errors.Join(errs...)
}

// ledgerTool is the tool name recorded in the ledger, at most the 128
// characters it takes.
func ledgerTool(prefix, name string) string {
	n := name
	if prefix != "" {
		n = prefix + "." + name
	}
	if len(n) > 128 {
		n = n[:128]
	}
	return n
}

// properties lists the argument names an input schema declares.
func properties(schema any) []string {
	m, ok := schema.(map[string]any)
	if !ok {
		return nil
	}
	props, _ := m["properties"].(map[string]any)
	return slices.Sorted(maps.Keys(props))
}
