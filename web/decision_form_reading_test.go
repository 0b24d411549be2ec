package web_test

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
)

// TestActionPageReadsEveryDecisionField: the action page's form reader
// (decisionForm in web/action_pages.go) reads each field a decision can
// carry, the fields TestDecisionFormsCarryEveryField (views) holds the
// forms to; a field the form sends and the reader drops would be lost
// without an error.
func TestActionPageReadsEveryDecisionField(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("action_pages.go")
	require.NoError(t, err)
	ty := reflect.TypeOf(services.DecisionInput{})
	require.Positive(t, ty.NumField())
	for i := range ty.NumField() {
		name, _, _ := strings.Cut(ty.Field(i).Tag.Get("json"), ",")
		require.Contains(t, string(src), `c.FormValue("`+name+`")`,
			"web/action_pages.go reads the decision field %q from the form", name)
	}
}
