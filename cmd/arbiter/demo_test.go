package main_test

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"
)

// demoProc is a running `arbiter demo`.
type demoProc struct {
	cmd      *exec.Cmd
	started  time.Time
	url      string
	email    string
	password string
	database string
	stdout   *syncBuffer
	stderr   *syncBuffer
	done     chan struct{}
}

var (
	demoDashboard = regexp.MustCompile(`dashboard\s+(http://127\.0\.0\.1:\d+)`)
	demoSignIn    = regexp.MustCompile(`sign in\s+email (\S+)\s+password (\S+)`)
	demoDatabase  = regexp.MustCompile(`database\s+(\S+)`)
)

// startDemo runs `arbiter demo` on a free port and waits for its banner.
func startDemo(t *testing.T, args ...string) *demoProc {
	t.Helper()
	d := &demoProc{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	d.cmd = exec.Command(binary, append([]string{"demo", "--addr", "127.0.0.1:0"}, args...)...)
	d.cmd.Dir = t.TempDir()
	d.cmd.Env = os.Environ()
	d.cmd.Stderr = d.stderr
	stdout, err := d.cmd.StdoutPipe()
	require.NoError(t, err)
	d.started = time.Now()
	require.NoError(t, d.cmd.Start())
	banner := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			d.stdout.Write([]byte(sc.Text() + "\n"))
			if !signalled && strings.Contains(sc.Text(), "Ctrl-C stops the demo") {
				signalled = true
				close(banner)
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { d.cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			d.cmd.Process.Signal(syscall.SIGKILL)
			<-d.done
		}
	})
	select {
	case <-banner:
	case <-d.done:
		t.Fatalf("arbiter demo exited early:\n%s\n%s", d.stdout.String(), d.stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("arbiter demo printed no banner:\n%s\n%s", d.stdout.String(), d.stderr.String())
	}
	out := d.stdout.String()
	m := demoDashboard.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	d.url = m[1]
	m = demoSignIn.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	d.email, d.password = m[1], m[2]
	m = demoDatabase.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	d.database = m[1]
	return d
}

// waitForStory waits up to within for every line of a story to show in the
// demo's output, and returns the output.
func (d *demoProc) waitForStory(t *testing.T, story string, within time.Duration, lines ...*regexp.Regexp) string {
	t.Helper()
	var out string
	require.Eventually(t, func() bool {
		out = d.stdout.String()
		for _, re := range lines {
			if !re.MatchString(out) {
				return false
			}
		}
		return true
	}, within, 100*time.Millisecond, "%s missing:\n%s", story, d.stdout.String())
	return out
}

// stop sends sig and requires a clean exit within a few seconds.
func (d *demoProc) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, d.cmd.Process.Signal(sig))
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("arbiter demo did not exit after %s:\n%s\n%s", sig, d.stdout.String(), d.stderr.String())
	}
	require.Equal(t, 0, d.cmd.ProcessState.ExitCode(), "%s\n%s", d.stdout.String(), d.stderr.String())
	require.Contains(t, d.stdout.String(), "demo stopped")
}

// TestDemoPopulatesTriage: a new user who runs `arbiter demo` and signs in
// sees a triage page with the fleet's incidents within ten seconds of the
// start, and Ctrl-C stops everything cleanly.
func TestDemoPopulatesTriage(t *testing.T) {
	t.Parallel()
	d := startDemo(t)
	require.Equal(t, "demo@localhost", d.email)
	client, status := signInOverHTTP(t, d.url, d.email, d.password)
	require.Equal(t, http.StatusSeeOther, status)

	var kinds map[string]int
	var populated time.Duration
	for {
		kinds = triageKinds(t, client, d.url)
		if kinds["timed_out"] > 0 && kinds["key_reused"] > 0 && kinds["stale_outcome"] > 0 {
			populated = time.Since(d.started)
			break
		}
		if time.Since(d.started) > 10*time.Second {
			t.Fatalf("the triage page is not populated 10 s after the start: rows %v\n%s\n%s", kinds, d.stdout.String(), d.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("triage populated %s after the start (race detector %v): rows %v", populated.Round(time.Millisecond), raceEnabled, kinds)
	require.Less(t, populated, 10*time.Second)
	require.GreaterOrEqual(t, kinds["timed_out"], 3, "one crashed worker per effect class with an effect")

	out := d.stdout.String()
	for _, story := range []string{"CRASHED after the effect", "key_reused", "a late result", "a stale outcome", "compensated"} {
		require.Contains(t, out, story)
	}

	// Timeouts resolved by the workers' lookups, beside those that still
	// need a person: a refund the PSP has (confirmed), one it never got
	// (retried with its key), one under a key the PSP forgot, and an email
	// the mailer cannot be searched for.
	lookups := []*regexp.Regexp{
		regexp.MustCompile(`payments-worker\s+payments\.refund (refund:\S+): looked up attempt 1 at the PSP by its key: found re_\d+ \(happened\)`),
		regexp.MustCompile(`payments-worker\s+payments\.refund (refund:\S+): looked up attempt 1 at the PSP by its key: no refund \(not_happened\)`),
		regexp.MustCompile(`payments-worker\s+payments\.refund (refund:\S+): retried: ran attempt 2 with the same key \(re_\d+\)`),
		regexp.MustCompile(`demo\s+payments\.refund (refund:\S+): the PSP honours keys for 1s here .* it waits for you`),
		regexp.MustCompile(`support-worker\s+email\.send (email:\S+): the mailer cannot be searched`),
	}
	d.waitForStory(t, "lookup stories", 20*time.Second, lookups...)
	// Limits across actions: the runaway refund loop stops at its
	// customer's budget, and the mailer's breaker freezes email.send until
	// the on-call lifts it, when the emails that waited go out.
	brakes := []*regexp.Regexp{
		regexp.MustCompile(`refund-bot\s+payments\.refund refund:\S+: denied by limit "refunds per customer" \(3000\.00 of 3000\.00 EUR used, 250\.00 more would exceed it\): nothing refunded; the loop stops after 12 refunds`),
		regexp.MustCompile(`arbiter\s+breaker "mailer" tripped: \d+ of \d+ timed out in the last 30 s; email\.send is frozen`),
		regexp.MustCompile(`support-oncall\s+lifted the freeze of email\.send`),
		regexp.MustCompile(`(?s)lifted the freeze.*mail-bot\s+email\.send (email:\S+): the freeze is lifted: sent \(msg_\d+\)`),
	}
	out = d.waitForStory(t, "budget and breaker stories", 45*time.Second, brakes...)
	require.NotContains(t, out, "did not trip")
	retried := lookups[2].FindStringSubmatch(out)[1]
	require.Contains(t, out, retried+": CRASHED before the request reached the provider", "the retried refund is one the PSP never got")
	require.FileExists(t, d.database)

	d.stop(t, syscall.SIGINT)
	require.NoFileExists(t, d.database, "the temporary database is removed")
	_, err := http.Get(d.url + "/healthz")
	require.Error(t, err, "the server is gone")
}

// TestDemoKeepsDir: with --dir the database stays, and a second run prints
// a password that works.
func TestDemoKeepsDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := startDemo(t, "--dir", dir)
	first.stop(t, syscall.SIGTERM)
	require.FileExists(t, first.database)

	second := startDemo(t, "--dir", dir)
	require.Equal(t, first.database, second.database)
	require.NotEqual(t, first.password, second.password)
	_, status := signInOverHTTP(t, second.url, second.email, first.password)
	require.Equal(t, http.StatusUnauthorized, status)
	_, status = signInOverHTTP(t, second.url, second.email, second.password)
	require.Equal(t, http.StatusSeeOther, status)
	second.stop(t, syscall.SIGINT)
}

// triageKinds counts the triage page's rows by kind.
func triageKinds(t *testing.T, client *http.Client, base string) map[string]int {
	t.Helper()
	res, err := client.Get(base + "/")
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	doc, err := goquery.NewDocumentFromReader(res.Body)
	require.NoError(t, err)
	kinds := map[string]int{}
	doc.Find(`[data-testid="triage-row"]`).Each(func(_ int, s *goquery.Selection) {
		kinds[s.AttrOr("data-kind", "")]++
	})
	return kinds
}
