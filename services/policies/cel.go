package policies

import (
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
)

// costLimit bounds one evaluation of a condition (CEL's cost units, about
// one per operation or byte compared): a condition that would run longer
// fails, and a failed condition holds the intent (fail closed).
const costLimit = 100_000

// env is the declared environment every condition is checked against.
var env = func() *cel.Env {
	e, err := cel.NewEnv(
		cel.Variable("tool", cel.StringType),
		cel.Variable("effect", cel.StringType),
		cel.Variable("agent", cel.StringType),
		cel.Variable("namespace", cel.StringType),
		cel.Variable("reference", cel.StringType),
		cel.Variable("run_id", cel.StringType),
		cel.Variable("params", cel.MapType(cel.StringType, cel.DynType)),
	)
	if err != nil {
		panic(fmt.Sprintf("policies: CEL environment: %v", err))
	}
	return e
}()

// compile type-checks a condition and returns its program; the error is the
// compiler's message, for the person who wrote it.
func compile(condition string) (cel.Program, error) {
	if strings.TrimSpace(condition) == "" {
		return nil, nil
	}
	ast, iss := env.Compile(condition)
	if iss != nil && iss.Err() != nil {
		return nil, fmt.Errorf("%s", iss.Err().Error())
	}
	if ast.OutputType() != types.BoolType {
		return nil, fmt.Errorf("the condition is of type %s; it must be a bool", ast.OutputType())
	}
	prg, err := env.Program(ast, cel.CostLimit(costLimit), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, err
	}
	return prg, nil
}

// Facts are what a condition reads about an intent; absent strings are "".
type Facts struct {
	Tool, Effect, Agent, Namespace, Reference, RunID string
	Params                                           map[string]any
}

// eval runs a program on facts: matched, or the error that made it fail.
func eval(prg cel.Program, f Facts) (bool, error) {
	if prg == nil {
		return true, nil
	}
	params := f.Params
	if params == nil {
		params = map[string]any{}
	}
	out, _, err := prg.Eval(map[string]any{"tool": f.Tool, "effect": f.Effect, "agent": f.Agent,
		"namespace": f.Namespace, "reference": f.Reference, "run_id": f.RunID, "params": params})
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("the condition gave %v, not a bool", out.Value())
	}
	return b, nil
}

// matchTool reports whether tool matches pattern, where * matches any run
// of characters (the empty run too) and nothing else is special.
func matchTool(pattern, tool string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == tool
	}
	if !strings.HasPrefix(tool, parts[0]) {
		return false
	}
	rest := tool[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return len(rest) >= len(last) && strings.HasSuffix(rest, last)
}
