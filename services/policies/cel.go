package policies

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	celenv "github.com/google/cel-go/common/env"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// running holds a place for each bounded evaluation under way: they may
// each take their whole bound, so they are kept to fewer than the
// processors, and a storm of them leaves one free for every other request
// (a light program, bounded by the checker, takes no place).
var running = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)-1))

// errTooLong is why an evaluation that ran out of time stopped.
var errTooLong = fmt.Errorf("the condition ran longer than %v", evalTimeout)

// Each evaluation of a condition is bounded in cost and in time; a
// condition that reaches either bound fails, and a failed condition holds
// the intent (fail closed), with the bound it reached as its error.
const (
	// costLimit is in CEL's cost units: about one per operation, a tenth
	// per byte traversed, and for `matches` the input's length times its
	// compiled program (regex.go).
	costLimit = 100_000
	// evalTimeout bounds the time of one evaluation: comprehensions
	// (all, exists, map, filter) check it every interruptEvery iterations.
	evalTimeout    = 100 * time.Millisecond
	interruptEvery = 100
)

// celEnv is the declared environment every condition is checked against.
var celEnv = func() *cel.Env {
	// The standard library without its `matches`, which regex.go replaces.
	std := celenv.NewLibrarySubset().AddExcludedFunctions(celenv.NewFunction(overloads.Matches))
	e, err := cel.NewCustomEnv(cel.StdLib(cel.StdLibSubset(std)),
		cel.Variable("tool", cel.StringType),
		cel.Variable("effect", cel.StringType),
		cel.Variable("agent", cel.StringType),
		cel.Variable("namespace", cel.StringType),
		cel.Variable("reference", cel.StringType),
		cel.Variable("run_id", cel.StringType),
		cel.Variable("params", cel.MapType(cel.StringType, cel.DynType)),
		matchesLib,
	)
	if err != nil {
		panic(fmt.Sprintf("policies: CEL environment: %v", err))
	}
	return e
}()

// program is a compiled condition. A bounded one counts its cost and
// watches its deadline as it runs; the others are those whose cost the
// checker bounds below the limit, which need neither.
type program struct {
	prg     cel.Program
	bounded bool
}

// compile type-checks a condition and returns its program; the error is the
// compiler's message, for the person who wrote it.
func compile(condition string) (*program, error) {
	return compileAs(condition, "the condition", "a bool", types.BoolType)
}

// compileAs type-checks an expression that must be of one of the types
// wanted (what says which field it is, kind what it must be, for the
// message) and returns its program; nil for an empty expression.
func compileAs(expr, what, kind string, wanted ...*types.Type) (*program, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, nil
	}
	ast, iss := celEnv.Compile(expr)
	if iss != nil && iss.Err() != nil {
		return nil, fmt.Errorf("%s", iss.Err().Error())
	}
	ok := false
	for _, t := range wanted {
		ok = ok || ast.OutputType().IsExactType(t)
	}
	if !ok {
		return nil, fmt.Errorf("%s is of type %s; it must be %s", what, ast.OutputType(), kind)
	}
	// A condition whose cost the checker can bound below the limit runs
	// without counting its cost; the others count it as they run, which
	// makes them slower (docs/benchmarks.md, "CEL under a regex storm",
	// "Counting the cost as a condition runs").
	opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize),
		cel.OptimizeRegex(constantRegex(overloads.Matches), constantRegex(overloads.MatchesString))}
	bounded := false
	if est, err := celEnv.EstimateCost(ast, sizeless{}); err != nil || est.Max > costLimit {
		bounded = true
		opts = append(opts, cel.CostLimit(costLimit), cel.CostTracking(callCosts{}),
			cel.InterruptCheckFrequency(interruptEvery))
	}
	prg, err := celEnv.Program(ast, opts...)
	if err != nil {
		return nil, err
	}
	return &program{prg: prg, bounded: bounded}, nil
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
func eval(prg *program, f Facts) (bool, error) {
	return evalIn(context.Background(), prg, f.activation())
}

// evalIn runs a program on an activation, for at most evalTimeout and
// until ctx ends; no program matches everything.
func evalIn(ctx context.Context, prg *program, act interpreter.Activation) (bool, error) {
	if prg == nil {
		return true, nil
	}
	out, err := evalValue(ctx, prg, act)
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("the condition gave %v, not a bool", out.Value())
	}
	return b, nil
}

// evalValue runs a program on an activation under the bounds evalIn says.
func evalValue(ctx context.Context, prg *program, act interpreter.Activation) (ref.Val, error) {
	var out ref.Val
	var err error
	if prg.bounded {
		select {
		case running <- struct{}{}:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		ctx, cancel := context.WithTimeoutCause(ctx, evalTimeout, errTooLong)
		out, _, err = prg.prg.ContextEval(ctx, act)
		cancel()
		<-running
	} else {
		out, _, err = prg.prg.Eval(act)
	}
	if err != nil {
		return nil, err
	}
	if types.IsError(out) {
		return nil, fmt.Errorf("%v", out)
	}
	return out, nil
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
