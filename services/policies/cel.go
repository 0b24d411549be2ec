package policies

import (
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/interpreter"
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
	// A condition whose cost the checker can bound below the limit runs
	// without counting its cost; the others count it as they run, which
	// costs them about three times as long.
	opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}
	if est, err := env.EstimateCost(ast, sizeless{}); err != nil || est.Max > costLimit {
		opts = append(opts, cel.CostLimit(costLimit))
	}
	prg, err := env.Program(ast, opts...)
	if err != nil {
		return nil, err
	}
	return prg, nil
}

// sizeless is a cost estimator that knows no sizes: strings and params may
// be as large as an entry allows.
type sizeless struct{}

func (sizeless) EstimateSize(checker.AstNode) *checker.SizeEstimate { return nil }

func (sizeless) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// Facts are what a condition reads about an intent; absent strings are "".
type Facts struct {
	Tool, Effect, Agent, Namespace, Reference, RunID string
	Params                                           map[string]any
}

// activation is what conditions read about an intent, built once for
// all the conditions that run on it.
func (f Facts) activation() interpreter.Activation {
	params := f.Params
	if params == nil {
		params = map[string]any{}
	}
	act, _ := interpreter.NewActivation(map[string]any{"tool": f.Tool, "effect": f.Effect, "agent": f.Agent,
		"namespace": f.Namespace, "reference": f.Reference, "run_id": f.RunID,
		"params": types.DefaultTypeAdapter.NativeToValue(params)})
	return act
}

// eval runs a program on facts: matched, or the error that made it fail.
func eval(prg cel.Program, f Facts) (bool, error) {
	return evalIn(prg, f.activation())
}

// evalIn runs a program on an activation; no program matches everything.
func evalIn(prg cel.Program, act interpreter.Activation) (bool, error) {
	if prg == nil {
		return true, nil
	}
	out, _, err := prg.Eval(act)
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
