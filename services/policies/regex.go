package policies

import (
	"fmt"
	"math"
	"regexp"
	"regexp/syntax"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// CEL's `matches` runs Go's RE2, which is linear in the input but whose
// work is the input's length times the size of the compiled program, and a
// short pattern can compile to thousands of instructions (`.{0,1000}` is
// 1,000). CEL charges a call by the pattern's length, and only after it has
// run, so one call could take seconds under the cost limit. Here a call is
// charged by its compiled program instead, with CEL's own factors, and a
// call that would cost more than the whole limit is refused before it runs.

// maxRegexProgram bounds the compiled program of one pattern
// (instructions), so that compiling a pattern is cheap too.
const maxRegexProgram = 10_000

// regexInstCostFactor weighs one instruction of a compiled pattern: twice
// CEL's weight of one character of a pattern, so that a call that costs
// the whole limit runs well inside evalTimeout (docs/benchmarks.md, "CEL
// under a regex storm").
const regexInstCostFactor = 2 * common.RegexStringLengthCostFactor

// regexCost is what matching a string of n bytes against a program of
// insts instructions costs: CEL's formula for `matches` with the program's
// size in place of the pattern's length.
func regexCost(n, insts int) uint64 {
	str := uint64(math.Ceil((1 + float64(n)) * common.StringTraversalCostFactor))
	prog := uint64(math.Ceil(float64(insts) * regexInstCostFactor))
	return str * prog
}

// boundedRegex is a compiled pattern and the size of its program.
type boundedRegex struct {
	pattern string
	re      *regexp.Regexp
	insts   int
}

// compileRegex compiles a pattern whose program is at most maxRegexProgram
// instructions; the size is estimated from the parsed pattern before
// anything large is built.
func compileRegex(pattern string) (*boundedRegex, error) {
	if r, ok := regexes.get(pattern); ok {
		return r, nil
	}
	parsed, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, err
	}
	if n := estimateInsts(parsed); n > maxRegexProgram {
		return nil, fmt.Errorf("the regular expression %s compiles to more than %d instructions", quoteShort(pattern), maxRegexProgram)
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		return nil, err
	}
	if len(prog.Inst) > maxRegexProgram {
		return nil, fmt.Errorf("the regular expression %s compiles to %d instructions; the limit is %d",
			quoteShort(pattern), len(prog.Inst), maxRegexProgram)
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	r := &boundedRegex{pattern: pattern, re: re, insts: len(prog.Inst)}
	regexes.put(r)
	return r, nil
}

// estimateInsts is an upper bound of the program size of re, saturated
// above maxRegexProgram (Go's parser already refuses repetitions nested
// beyond 1,000 in all).
func estimateInsts(re *syntax.Regexp) int {
	sum := func(subs []*syntax.Regexp) int {
		n := 0
		for _, s := range subs {
			n = min(n+estimateInsts(s), maxRegexProgram+1)
		}
		return n
	}
	switch re.Op {
	case syntax.OpLiteral:
		return len(re.Rune)
	case syntax.OpConcat:
		return sum(re.Sub)
	case syntax.OpAlternate:
		return min(sum(re.Sub)+len(re.Sub), maxRegexProgram+1)
	case syntax.OpCapture:
		return min(sum(re.Sub)+2, maxRegexProgram+1)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		return min(sum(re.Sub)+1, maxRegexProgram+1)
	case syntax.OpRepeat:
		times := re.Max
		if times < 0 {
			times = re.Min + 1
		}
		return min(sum(re.Sub)*max(times, 1)+times, maxRegexProgram+1)
	}
	return 1
}

// match runs r on s unless it would cost more than the whole limit.
func (r *boundedRegex) match(s string) ref.Val {
	if c := regexCost(len(s), r.insts); c > costLimit {
		return types.NewErr("the regular expression %s (%d instructions) over a string of %d bytes would cost %d; "+
			"the cost limit is %d", quoteShort(r.pattern), r.insts, len(s), c, costLimit)
	}
	return types.Bool(r.re.MatchString(s))
}

func quoteShort(s string) string {
	if len(s) > 40 {
		return fmt.Sprintf("%q…", s[:40])
	}
	return fmt.Sprintf("%q", s)
}

// matchesDynamic is `matches` with a pattern known only at run time.
func matchesDynamic(s, pattern ref.Val) ref.Val {
	str, ok := s.(types.String)
	pat, ok2 := pattern.(types.String)
	if !ok || !ok2 {
		return types.NoSuchOverloadErr()
	}
	r, err := compileRegex(string(pat))
	if err != nil {
		return types.WrapErr(err)
	}
	return r.match(string(str))
}

// matchesLib replaces the standard library's `matches` (both overloads, so
// the checker and CEL's cost estimate are unchanged).
var matchesLib = cel.Function(overloads.Matches,
	cel.Overload(overloads.Matches, []*cel.Type{cel.StringType, cel.StringType}, cel.BoolType),
	cel.MemberOverload(overloads.MatchesString, []*cel.Type{cel.StringType, cel.StringType}, cel.BoolType),
	cel.SingletonBinaryBinding(matchesDynamic))

// constantRegex compiles a constant pattern once, when the program is
// built: keyed by overload, so that it takes the place of CEL's own
// optimization of constant patterns, which would run them unbounded.
func constantRegex(overload string) *interpreter.RegexOptimization {
	return &interpreter.RegexOptimization{Function: overloads.Matches, OverloadID: overload, RegexIndex: 1,
		Factory: func(call interpreter.InterpretableCall, pattern string) (interpreter.InterpretableCall, error) {
			r, err := compileRegex(pattern)
			if err != nil {
				return nil, err
			}
			return interpreter.NewCall(call.ID(), call.Function(), call.OverloadID(), call.Args(),
				func(args ...ref.Val) ref.Val {
					s, ok := args[0].(types.String)
					if len(args) != 2 || !ok {
						return types.NoSuchOverloadErr()
					}
					return r.match(string(s))
				}), nil
		}}
}

// regexes keeps compiled patterns, so that a constant pattern is compiled
// once and its cost looked up on every call; bounded, since patterns may
// come from params.
var regexes = regexCache{m: map[string]*boundedRegex{}}

const (
	maxCachedRegexes = 1024
	maxCachedPattern = 1024 // bytes
)

type regexCache struct {
	mu sync.Mutex
	m  map[string]*boundedRegex
}

func (c *regexCache) get(pattern string) (*boundedRegex, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.m[pattern]
	return r, ok
}

func (c *regexCache) put(r *boundedRegex) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) < maxCachedRegexes && len(r.pattern) <= maxCachedPattern {
		c.m[r.pattern] = r
	}
}
