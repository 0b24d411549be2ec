package policies

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// big is a param of about the largest size an entry allows (params are at
// most 64 KiB serialized).
var big = strings.Repeat("a", 60_000)

// TestRegexOverLargeInputIsBounded: RE2 is linear in the input, but its
// cost is the input's length times the size of the compiled program, and
// a short pattern can compile to thousands of instructions. Unbounded,
// `.{0,1000}.{0,1000}x` (19 characters, about 4,000 instructions) over 60
// KB runs for seconds; it is now refused before it runs, and the refusal
// is an evaluation error, which holds the intent (fail closed).
func TestRegexOverLargeInputIsBounded(t *testing.T) {
	t.Parallel()
	for _, pattern := range []string{`.{0,1000}.{0,1000}x`, `[a-z]{500}[a-z]{500}x`, `(\\w*\\s*){100}x`} {
		prg, err := compile(`params.s.matches('` + pattern + `')`)
		require.NoError(t, err, pattern)
		start := time.Now()
		_, err = eval(prg, Facts{Params: map[string]any{"s": big}})
		took := time.Since(start)
		require.Error(t, err, pattern)
		require.Contains(t, err.Error(), "regular expression", pattern)
		require.Less(t, took, 250*time.Millisecond*slowdown, pattern)

		// The same pattern as a param (the agent's choice) is bounded too.
		dyn, err := compile(`params.s.matches(params.p)`)
		require.NoError(t, err)
		_, err = eval(dyn, Facts{Params: map[string]any{"s": big, "p": strings.ReplaceAll(pattern, `\\`, `\`)}})
		require.Error(t, err, pattern)
		require.Contains(t, err.Error(), "regular expression", pattern)
	}

	// A pattern of the kind policies use runs over the same input.
	prg, err := compile(`params.s.matches('^a+$') && !params.s.matches('(?i)password|secret|token')`)
	require.NoError(t, err)
	ok, err := eval(prg, Facts{Params: map[string]any{"s": big}})
	require.NoError(t, err)
	require.True(t, ok)
	// And the heavy pattern over a short string.
	prg, err = compile(`params.s.matches('.{0,1000}.{0,1000}x')`)
	require.NoError(t, err)
	ok, err = eval(prg, Facts{Params: map[string]any{"s": "aaax"}})
	require.NoError(t, err)
	require.True(t, ok)
}

// TestRegexCostAddsUp: each call is charged by its input and program size,
// so several calls that each fit stop at the cost limit together (CEL's
// own estimate charges the pattern's length, which lets these through).
func TestRegexCostAddsUp(t *testing.T) {
	t.Parallel()
	calls := make([]string, 5)
	for i := range calls {
		calls[i] = `params.s.matches('[ab]{1,12}c')`
	}
	one, err := compile(calls[0])
	require.NoError(t, err)
	ok, err := eval(one, Facts{Params: map[string]any{"s": big}})
	require.NoError(t, err, "one call fits")
	require.False(t, ok)
	prg, err := compile(strings.Join(calls, " || "))
	require.NoError(t, err)
	_, err = eval(prg, Facts{Params: map[string]any{"s": big}})
	require.Error(t, err)
	require.Contains(t, err.Error(), "actual cost limit exceeded")
}

// TestConditionsStopWithinTheirBound: conditions written to run long over
// the largest params an entry allows all stop at a bound, with an error,
// in about the time bound of one evaluation (generous here: the tests
// share the machine).
func TestConditionsStopWithinTheirBound(t *testing.T) {
	t.Parallel()
	items := make([]any, 2000)
	for i := range items {
		items[i] = float64(i)
	}
	strs := make([]any, 200)
	for i := range strs {
		strs[i] = strings.Repeat("b", 300)
	}
	facts := Facts{Params: map[string]any{"s": big, "items": items, "strs": strs}}
	for _, condition := range []string{
		`params.items.all(x, params.items.all(y, x != y || x == y))`,
		`params.items.all(x, !params.s.matches('(\\w*\\s*){4}x'))`,
		`params.strs.exists(x, x.matches('.{0,1000}.{0,1000}x'))`,
		`params.s.matches('(.*a){15}x') || params.s.matches('[ab]{1,12}c')`,
		`params.items.map(x, params.s + params.s).size() > 0`,
		`params.items.exists(x, params.s.contains(params.s + 'b'))`,
	} {
		prg, err := compile(condition)
		require.NoError(t, err, condition)
		start := time.Now()
		_, err = eval(prg, facts)
		require.Error(t, err, condition)
		require.Less(t, time.Since(start), 5*evalTimeout*slowdown, condition)
	}
}

// TestEvaluationStopsWhenItsContextEnds: a comprehension checks the
// evaluation's context (its deadline, or the request's end) as it runs.
func TestEvaluationStopsWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	items := make([]any, 500)
	for i := range items {
		items[i] = float64(i)
	}
	prg, err := compile(`params.items.all(x, x >= 0.0)`)
	require.NoError(t, err)
	act := Facts{Params: map[string]any{"items": items}}.activation()
	ok, err := evalIn(context.Background(), prg, act)
	require.NoError(t, err)
	require.True(t, ok)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = evalIn(ctx, prg, act)
	require.ErrorIs(t, err, context.Canceled)
}

// TestBoundedEvaluationsTakeTurns: bounded evaluations run fewer at once
// than there are processors, so a storm of them leaves one for other
// requests; one that waits for its turn waits only as long as its request,
// and light programs never wait. Not parallel: it fills the turns.
func TestBoundedEvaluationsTakeTurns(t *testing.T) {
	heavy, err := compile(`params.items.all(x, x >= 0.0)`)
	require.NoError(t, err)
	require.True(t, heavy.bounded)
	light, err := compile(`agent == 'bot'`)
	require.NoError(t, err)
	require.False(t, light.bounded)
	act := Facts{Agent: "bot", Params: map[string]any{"items": []any{1.0, 2.0}}}.activation()

	for range cap(running) {
		running <- struct{}{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = evalIn(ctx, heavy, act)
	require.ErrorIs(t, err, context.DeadlineExceeded, "no turn while every one is taken")
	ok, err := evalIn(context.Background(), light, act)
	require.NoError(t, err)
	require.True(t, ok, "a light program takes no turn")

	<-running
	ok, err = evalIn(context.Background(), heavy, act)
	require.NoError(t, err)
	require.True(t, ok)
	for range cap(running) - 1 {
		<-running
	}
	require.Less(t, cap(running), max(2, runtime.GOMAXPROCS(0)))
}
