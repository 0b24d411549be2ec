package main_test

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDemoHelpListsOnlyWhatItHonours: the demo always runs on its own SQLite
// database, so its help must not offer --database-url; serve's help still does.
func TestDemoHelpListsOnlyWhatItHonours(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(binary, "demo", "--help").CombinedOutput()
	require.NoError(t, err, string(out))
	require.NotContains(t, string(out), "--database-url", string(out))
	require.Contains(t, string(out), "--webhook-allow-private", string(out))
	out, err = exec.Command(binary, "serve", "--help").CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), "--database-url", string(out))
}

// TestDemoHonoursWebhookAllowPrivate: with ARBITER_WEBHOOK_ALLOW_PRIVATE the
// demo's server accepts a webhook endpoint on loopback, so webhooks can be
// tried locally; without it the server refuses it as before.
func TestDemoHonoursWebhookAllowPrivate(t *testing.T) {
	for _, allow := range []bool{true, false} {
		if allow {
			os.Setenv("ARBITER_WEBHOOK_ALLOW_PRIVATE", "true")
		} else {
			os.Unsetenv("ARBITER_WEBHOOK_ALLOW_PRIVATE")
		}
		d := startDemo(t)
		os.Unsetenv("ARBITER_WEBHOOK_ALLOW_PRIVATE")
		key := demoAdminKey.FindStringSubmatch(d.stdout.String())
		require.NotNil(t, key, d.stdout.String())
		code := createWebhook(t, d.url, key[1], "http://127.0.0.1:9/hook")
		if allow {
			require.Equal(t, 201, code, "loopback endpoint with ARBITER_WEBHOOK_ALLOW_PRIVATE")
		} else {
			require.Equal(t, 400, code, "loopback endpoint without ARBITER_WEBHOOK_ALLOW_PRIVATE")
		}
		d.stop(t, 2)
	}
}

var demoAdminKey = regexp.MustCompile(`ARBITER_API_KEY=(\S+)`)

// createWebhook creates an endpoint for url and returns the status code.
func createWebhook(t *testing.T, base, key, url string) int {
	t.Helper()
	req, err := http.NewRequest("POST", base+"/v1/webhooks", strings.NewReader(`{"url":"`+url+`","event_types":["action.timed_out"]}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	t.Logf("POST /v1/webhooks %s: %d %s", url, resp.StatusCode, body)
	return resp.StatusCode
}
