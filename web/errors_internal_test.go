package web

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/views"
)

// TestRefusalOfFollowsTheMapper: a page shows a refusal at the status the
// API answers for the same code, in the words views.RefusalText gives it;
// a failure the error handler must answer (a 5xx other than the database
// away) is no refusal.
func TestRefusalOfFollowsTheMapper(t *testing.T) {
	t.Parallel()
	for code, status := range statusOf {
		err := fmt.Errorf("wrapped: %w", services.Errorf(code, "refused as %s", code))
		r, ok := refusalOf(err)
		if status >= http.StatusInternalServerError && status != http.StatusServiceUnavailable {
			require.False(t, ok, code)
			continue
		}
		require.True(t, ok, code)
		require.Equal(t, refusal{status: status, code: code, message: "refused as " + code,
			text: views.RefusalText(code, "refused as "+code)}, r, code)
	}

	r, ok := refusalOf(fmt.Errorf("ledger: %w", context.DeadlineExceeded))
	require.True(t, ok, "the database away is said in words")
	require.Equal(t, http.StatusServiceUnavailable, r.status)
	require.Equal(t, services.CodeUnavailable, r.code)

	_, ok = refusalOf(fmt.Errorf("ledger: %w", context.Canceled))
	require.False(t, ok, "an error of no code is the error handler's")
}
