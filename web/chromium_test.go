package web_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Browser tests drive a real headless Chromium (Debian's chromium package).
// Without it they skip on a developer's machine and fail in CI, where
// .ci/run installs it.

func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("ARBITER_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"} {
		if p == "" {
			continue
		}
		if _, err := exec.LookPath(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not found: install Debian's chromium package (apt-get install chromium) or set ARBITER_CHROMIUM")
	}
	t.Skip("chromium not found; install Debian's chromium package to run browser tests")
	return ""
}

// chromiumSlots bounds how many browsers run at once on a small machine.
var chromiumSlots = make(chan struct{}, 2)

// tab is one headless browser tab. Console errors, uncaught exceptions and
// what the browser itself logs as an error (Content-Security-Policy
// violations, failed loads) are collected, and the test fails at its end if
// there were any.
type tab struct {
	ctx    context.Context
	mu     sync.Mutex
	errors []string
}

// newTab starts a browser for t. javascript=false runs it with scripts
// disabled, as for a visitor without JavaScript.
func newTab(t *testing.T, javascript bool) *tab {
	t.Helper()
	path := chromiumPath(t)
	chromiumSlots <- struct{}{}
	t.Cleanup(func() { <-chromiumSlots })
	// Not t.TempDir: Chromium's helper processes may still be writing the
	// profile for a moment after the browser exits, which would fail the
	// test's own cleanup. Removal is retried briefly and then left to the OS.
	profile, err := os.MkdirTemp("", "arbiter-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for range 20 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	opts := append([]chromedp.ExecAllocatorOption{}, chromedp.DefaultExecAllocatorOptions[:]...)
	opts = append(opts,
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.UserDataDir(profile),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.WindowSize(1280, 900),
	)
	if !javascript {
		opts = append(opts, chromedp.Flag("blink-settings", "scriptEnabled=false"))
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 20*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	tb := &tab{ctx: ctx}
	chromedp.ListenTarget(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				tb.addError("console: " + strings.Join(parts, " "))
			}
		case *runtime.EventExceptionThrown:
			tb.addError("exception: " + ev.ExceptionDetails.Error())
		case *cdplog.EventEntryAdded:
			// CSP violations arrive here (source "security"), not as
			// console API calls.
			if ev.Entry.Level == cdplog.LevelError {
				tb.addError(fmt.Sprintf("browser (%s): %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		}
	})
	t.Cleanup(func() {
		if errs := tb.consoleErrors(); len(errs) > 0 {
			t.Errorf("the browser reported errors:\n%s", strings.Join(errs, "\n"))
		}
	})
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return tb
}

func (tb *tab) addError(s string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.errors = append(tb.errors, s)
}

// run performs browser actions and fails the test on error.
func (tb *tab) run(t *testing.T, actions ...chromedp.Action) {
	t.Helper()
	if err := chromedp.Run(tb.ctx, actions...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// consoleErrors returns what the page logged as errors so far.
func (tb *tab) consoleErrors() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return append([]string(nil), tb.errors...)
}

// signIn signs in through the real form.
func (tb *tab) signIn(t *testing.T, base, email, password string) {
	t.Helper()
	tb.run(t,
		chromedp.Navigate(base+"/signin"),
		chromedp.WaitVisible(`#email`, chromedp.ByQuery),
		chromedp.SendKeys(`#email`, email, chromedp.ByQuery),
		chromedp.SendKeys(`#password`, password, chromedp.ByQuery),
		chromedp.Submit(`[data-testid="signin-form"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`[data-testid="current-user"]`, chromedp.ByQuery),
	)
}
