package policies

import (
	"math"

	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// callCosts is what a call costs as it runs, where CEL's own count falls
// short: `matches` by its compiled program (regex.go), and the operators on
// params' values. Params are dynamic, so `params.s + params.s` or
// `params.a < params.b` is dispatched at run time, and CEL then counts 1
// whatever the sizes; here such a call is counted by what it traverses,
// with CEL's factors, as it would be on declared strings.
type callCosts struct{}

func (callCosts) CallCost(function, overload string, args []ref.Val, result ref.Val) *uint64 {
	if overload == overloads.Matches || overload == overloads.MatchesString {
		return matchesCost(args, result)
	}
	switch function {
	case operators.Add:
		if len(args) == 2 && traversable(args[0]) && traversable(args[1]) {
			return traversal(length(args[0]) + length(args[1]))
		}
	case operators.Less, operators.LessEquals, operators.Greater, operators.GreaterEquals,
		operators.Equals, operators.NotEquals:
		if len(args) == 2 && traversable(args[0]) && traversable(args[1]) {
			return traversal(min(length(args[0]), length(args[1])))
		}
	case operators.In:
		if len(args) == 2 {
			if l, ok := args[1].(traits.Lister); ok {
				n := uint64(l.Size().(types.Int))
				return &n
			}
		}
	case overloads.Size:
		// The size of a string counts its code points.
		if len(args) == 1 && traversable(args[0]) {
			return traversal(length(args[0]))
		}
	}
	return nil
}

// matchesCost charges `matches` by its input and compiled program, so
// that several calls add up to the cost limit.
func matchesCost(args []ref.Val, result ref.Val) *uint64 {
	if len(args) != 2 {
		return nil
	}
	if types.IsError(result) {
		one := uint64(1) // refused before it ran: its own error says why
		return &one
	}
	s, ok := args[0].(types.String)
	pat, ok2 := args[1].(types.String)
	if !ok || !ok2 {
		return nil
	}
	r, err := compileRegex(string(pat))
	if err != nil {
		return nil // the call itself failed
	}
	c := regexCost(len(s), r.insts)
	return &c
}

func traversable(v ref.Val) bool {
	switch v.(type) {
	case types.String, types.Bytes:
		return true
	}
	return false
}

// length is the bytes of a string or bytes value.
func length(v ref.Val) int {
	switch v := v.(type) {
	case types.String:
		return len(v)
	case types.Bytes:
		return len(v)
	}
	return 1
}

// traversal is the cost of reading n bytes, at least 1.
func traversal(n int) *uint64 {
	c := max(uint64(math.Ceil(float64(n)*common.StringTraversalCostFactor)), 1)
	return &c
}
