package main_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// runArbiter runs the binary in dir with env and stdin, and returns its
// standard output and error.
func runArbiter(t *testing.T, dir string, env []string, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

var csrfField = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

// signInOverHTTP submits the sign-in form as a browser would and returns the
// client, holding the session cookie, and the status of the POST.
func signInOverHTTP(t *testing.T, base, email, password string) (*http.Client, int) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Get(base + "/signin")
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := csrfField.FindSubmatch(body)
	require.NotNil(t, m, "the sign-in form has a CSRF token: %s", body)
	res, err = client.PostForm(base+"/signin", url.Values{"csrf_token": {string(m[1])}, "email": {email}, "password": {password}})
	require.NoError(t, err)
	res.Body.Close()
	if res.StatusCode == http.StatusSeeOther {
		require.Equal(t, "/", res.Header.Get("Location"))
	}
	return client, res.StatusCode
}

func statusOf(t *testing.T, client *http.Client, url string) int {
	t.Helper()
	res, err := client.Get(url)
	require.NoError(t, err)
	res.Body.Close()
	return res.StatusCode
}

func TestUsersCommands(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			dbURL := dbtest.SQLiteURL(t)
			if d == services.Postgres {
				dbURL = dbtest.PostgresURL(t)
				_, stderr, err := runArbiter(t, dir, []string{"ARBITER_DATABASE_URL=" + dbURL}, "", "migrate")
				require.NoError(t, err, stderr)
			}
			env := []string{"ARBITER_DATABASE_URL=" + dbURL}
			users := func(stdin string, args ...string) (string, string, error) {
				return runArbiter(t, dir, env, stdin, append([]string{"users"}, args...)...)
			}

			out, stderr, err := users("first password 1\n", "create", "--email", "Ops@Example.com", "--role", "operator", "--password-stdin")
			require.NoError(t, err, stderr)
			require.Regexp(t, `^created operator ops@example.com \(id [0-9a-f-]{36}\); they can sign in now\n$`, out)

			for _, c := range []struct {
				stdin string
				args  []string
				want  string
			}{
				{"another password\n", []string{"create", "--email", "ops@example.com", "--role", "viewer", "--password-stdin"}, `a user with email "ops@example.com" exists`},
				{"short\n", []string{"create", "--email", "new@example.com", "--role", "viewer", "--password-stdin"}, "a password must be 12 to 256 characters"},
				{"", []string{"create", "--email", "new@example.com", "--role", "viewer", "--password-stdin"}, "no password on standard input"},
				{"\n", []string{"create", "--email", "new@example.com", "--role", "viewer", "--password-stdin"}, "no password on standard input"},
				{"a long password\n", []string{"create", "--email", "new@example.com", "--role", "viewer"}, "pass --password-stdin"},
				{"a long password\n", []string{"create", "--email", "new@example.com", "--role", "root", "--password-stdin"}, "--role must be one of"},
				{"a long password\n", []string{"set-password", "--email", "nobody@example.com", "--password-stdin"}, "no such user"},
			} {
				out, stderr, err := users(c.stdin, c.args...)
				require.Error(t, err, "%v: %s", c.args, out)
				require.Contains(t, stderr, c.want, "%v", c.args)
			}

			// The trailing newline, CR LF included, is not part of the password.
			out, stderr, err = users("second password 2\r\n", "set-password", "--email", "ops@example.com", "--password-stdin")
			require.NoError(t, err, stderr)
			require.Equal(t, "set the password of ops@example.com and ended their sessions\n", out)
			_, stderr, err = users("a viewer's password", "create", "--email", "view@example.com", "--role", "viewer", "--password-stdin")
			require.NoError(t, err, stderr, "a last line without a newline is read too")

			out, stderr, err = users("", "list")
			require.NoError(t, err, stderr)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			require.Len(t, lines, 3)
			require.Regexp(t, `^ID\s+EMAIL\s+ROLE\s+CREATED\s+STATE$`, lines[0])
			require.Regexp(t, `^[0-9a-f-]{36}\s+ops@example.com\s+operator\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\s+active$`, lines[1])
			require.Equal(t, strings.Index(lines[0], "ROLE"), strings.Index(lines[1], "operator"), "columns are aligned")
			require.Contains(t, lines[2], "view@example.com")
			out, stderr, err = users("", "list", "--json")
			require.NoError(t, err, stderr)
			var listed []map[string]any
			require.NoError(t, json.Unmarshal([]byte(out), &listed), out)
			require.Len(t, listed, 2)
			require.Equal(t, "ops@example.com", listed[0]["email"])
			require.Equal(t, "operator", listed[0]["role"])
			require.Nil(t, listed[0]["disabled_at"])
			require.Equal(t, map[string]any{"*": "operator"}, listed[0]["memberships"])
			require.NotContains(t, out, "argon2", "no password hashes")

			// Memberships per namespace.
			out, stderr, err = users("a team password\n", "create", "--email", "team@example.com", "--role", "operator",
				"--namespace", "team-a", "--password-stdin")
			require.Error(t, err, out)
			require.Contains(t, stderr, `no namespace is named "team-a"`)
			_, stderr, err = runArbiter(t, dir, env, "", "keys", "create", "--namespace", "team-a", "--name", "bot", "--role", "agent")
			require.NoError(t, err, stderr)
			out, stderr, err = users("a team password\n", "create", "--email", "team@example.com", "--role", "operator",
				"--namespace", "team-a", "--password-stdin")
			require.NoError(t, err, stderr)
			require.Contains(t, out, "created operator team@example.com in team-a")
			out, stderr, err = users("", "grant", "--email", "team@example.com", "--role", "viewer", "--namespace", "*")
			require.NoError(t, err, stderr)
			require.Equal(t, "team@example.com is viewer in *\n", out)
			_, stderr, err = users("", "revoke", "--email", "team@example.com", "--namespace", "team-a")
			require.NoError(t, err, stderr)
			out, _, err = users("", "list", "--json")
			require.NoError(t, err)
			require.Contains(t, out, `"*": "viewer"`)
			require.NotContains(t, out, `"team-a"`)

			// The server accepts the new password, not the old one.
			p := serve(t, dir, env)
			require.NotContains(t, p.logs.String(), "created the first dashboard user", "there are users already")
			_, status := signInOverHTTP(t, p.url, "ops@example.com", "first password 1")
			require.Equal(t, http.StatusUnauthorized, status)
			client, status := signInOverHTTP(t, p.url, "ops@example.com", "second password 2")
			require.Equal(t, http.StatusSeeOther, status)
			require.Equal(t, http.StatusForbidden, statusOf(t, client, p.url+"/admin/users"), "signed in, as an operator")

			// set-password signs the user out everywhere.
			_, stderr, err = users("third password 3\n", "set-password", "--email", "ops@example.com", "--password-stdin")
			require.NoError(t, err, stderr)
			require.Equal(t, http.StatusSeeOther, statusOf(t, client, p.url+"/admin/users"), "the session has ended")
		})
	}
}

// The first admin's password goes to a file only its owner can read, never
// to the log, and must be replaced at the first sign-in (finding 10 of the
// security review).
func TestServeCreatesTheFirstAdminOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{"ARBITER_DATABASE_URL=" + dbtest.SQLiteURL(t)}
	p := serve(t, dir, env)
	logs := p.logs.String()
	require.Equal(t, 1, strings.Count(logs, "created the first dashboard user"), logs)
	require.Contains(t, logs, "email=admin@localhost")
	require.Contains(t, logs, "password_file=arbiter-data/initial-admin-password")
	require.Contains(t, logs, "arbiter users set-password --email admin@localhost --password-stdin")
	file := filepath.Join(dir, "arbiter-data", "initial-admin-password")
	info, err := os.Stat(file)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	password := strings.TrimSpace(string(raw))
	require.Len(t, password, 20)
	require.NotContains(t, logs, password, "the password is not logged")

	client, status := signInOverHTTP(t, p.url, "admin@localhost", password)
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, http.StatusSeeOther, statusOf(t, client, p.url+"/admin/users"), "a new password first")
	_, stderr, err := runArbiter(t, dir, env, "my own admin password\n", "users", "set-password", "--email", "admin@localhost", "--password-stdin")
	require.NoError(t, err, stderr)
	client, status = signInOverHTTP(t, p.url, "admin@localhost", "my own admin password")
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, http.StatusOK, statusOf(t, client, p.url+"/admin/users"), "the first user is an admin")
	p.kill()

	p = serve(t, dir, env)
	require.NotContains(t, p.logs.String(), "created the first dashboard user")
}

// With ARBITER_METRICS_ADDR, /metrics is served there and not on the main
// listener.
func TestServeMetricsOnTheirOwnListener(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serve(t, dir, []string{"ARBITER_DATABASE_URL=" + dbtest.SQLiteURL(t), "ARBITER_METRICS_ADDR=127.0.0.1:0"})
	var m []string
	require.Eventually(t, func() bool {
		m = regexp.MustCompile(`metrics_url=(http://127\.0\.0\.1:\d+/metrics)`).FindStringSubmatch(p.logs.String())
		return m != nil
	}, 5*time.Second, 20*time.Millisecond, "the log says where the metrics are")
	res, err := http.Get(m[1])
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, string(body), "arbiter_sweeper_runs_total")
	res, err = http.Get(p.url + "/metrics")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusNotFound, res.StatusCode)
}
