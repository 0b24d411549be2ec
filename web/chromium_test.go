package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	cdppage "github.com/chromedp/cdproto/page"
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

// chromiumSlots bounds how many browsers run at once: two per core. A
// browser test mostly waits on its pages, so two per core keep a small
// machine busy without starving the servers the browsers talk to.
var chromiumSlots = make(chan struct{}, 2*goruntime.GOMAXPROCS(0))

// tab is one headless browser tab. Console errors, uncaught exceptions and
// what the browser itself logs as an error (Content-Security-Policy
// violations, failed loads) are collected, and the test fails at its end if
// there were any. Every page the tab shows is audited with axe-core (see
// audit): after each navigation and each htmx swap, at the next step of
// run and at the test's end.
type tab struct {
	ctx        context.Context
	javascript bool
	mu         sync.Mutex
	errors     []string
	allowed    []string // substrings of errors a test expects (allowError)
	views      int      // documents loaded and htmx swaps settled so far
	audited    int      // views as of the last audit
	reported   map[string]bool
	audits     int           // axe-core runs
	auditTime  time.Duration // spent in them
}

// tabTimeout bounds a tab's whole life, audits included: generous, since
// an axe-core run takes up to a second or two on a loaded 2-core machine.
const tabTimeout = 2 * time.Minute

// pageProbe runs in every document before its own scripts (the DevTools
// protocol injects it; the page's CSP does not apply to it). It reports
// Content-Security-Policy violations as the page sees them, and each settled
// htmx swap so the new content is audited too.
const pageProbe = `(function () {
	function report(m) { try { window.arbiterReport(JSON.stringify(m)); } catch (e) {} }
	document.addEventListener("securitypolicyviolation", function (e) {
		report({kind: "csp", text: e.violatedDirective + " blocked " + (e.blockedURI || "inline") +
			" at " + e.sourceFile + ":" + e.lineNumber + " (" + (e.sample || "") + ")"});
	}, true);
	document.addEventListener("htmx:afterSettle", function () { report({kind: "swap"}); });
})();`

// newTab starts a browser for t. javascript=false runs it with scripts
// disabled, as for a visitor without JavaScript.
func newTab(t *testing.T, javascript bool) *tab {
	t.Helper()
	path := chromiumPath(t)
	if _, err := axeSource(); err != nil {
		t.Fatalf("axe-core: %v", err)
	}
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
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, tabTimeout)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	tb := &tab{ctx: ctx, javascript: javascript, reported: map[string]bool{}}
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
		case *runtime.EventBindingCalled:
			if ev.Name != "arbiterReport" {
				return
			}
			var m struct{ Kind, Text string }
			if json.Unmarshal([]byte(ev.Payload), &m) != nil {
				return
			}
			switch m.Kind {
			case "csp":
				tb.addError("securitypolicyviolation: " + m.Text)
			case "swap":
				tb.changed()
			}
		case *cdppage.EventFrameNavigated:
			if ev.Frame.ParentID == "" {
				tb.changed()
			}
		}
	})
	t.Cleanup(func() {
		if tb.ctx.Err() == nil && !t.Failed() {
			tb.audit(t)
		}
		t.Logf("axe-core: %d audits, %v", tb.audits, tb.auditTime.Round(time.Millisecond))
		if errs := tb.consoleErrors(); len(errs) > 0 {
			t.Errorf("the browser reported errors:\n%s", strings.Join(errs, "\n"))
		}
	})
	err = chromedp.Run(ctx,
		// Without JavaScript, the page's scripts are off for the tab's life;
		// an audit turns them on only while axe-core runs (its timers need
		// them) and the page's own scripts have long been skipped by then.
		emulation.SetScriptExecutionDisabled(!javascript),
		runtime.AddBinding("arbiterReport"),
		chromedp.ActionFunc(func(ctx context.Context) error {
			_, err := cdppage.AddScriptToEvaluateOnNewDocument(pageProbe).Do(ctx)
			return err
		}),
	)
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return tb
}

// changed notes that the tab shows something new: a document or a swap.
func (tb *tab) changed() {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.views++
}

// allowError lets the test's browser log errors containing substr: a test
// that visits an error page on purpose expects the browser to say the page
// answered 404.
func (tb *tab) allowError(substr string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.allowed = append(tb.allowed, substr)
}

func (tb *tab) addError(s string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for _, a := range tb.allowed {
		if strings.Contains(s, a) {
			return
		}
	}
	tb.errors = append(tb.errors, s)
}

// run performs browser actions and fails the test on error. Before each
// step the tab waits for htmx to finish a swap in hand (settled), and what
// it shows is audited if it changed since the last audit, so every page a
// test passes through is checked once.
func (tb *tab) run(t *testing.T, actions ...chromedp.Action) {
	t.Helper()
	for _, a := range flatten(actions) {
		tb.settled()
		tb.audit(t)
		if err := chromedp.Run(tb.ctx, a); err != nil {
			t.Fatalf("browser: %v", err)
		}
	}
	tb.settled()
	tb.audit(t)
}

// settled waits, at most two seconds, until htmx has finished the swap in
// hand. Swapped-in content is visible before htmx has processed its hx-
// attributes (that happens when the swap settles): a click on a button of a
// form just swapped in would then submit the form without htmx, as a person
// clicking within those milliseconds does, and the test would see the page
// answer instead of the fragment it waits for.
func (tb *tab) settled() {
	const busy = `!!document.querySelector('.htmx-added, .htmx-settling, .htmx-swapping')`
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline) && tb.ctx.Err() == nil; {
		var swapping bool
		if err := chromedp.Run(tb.ctx, chromedp.Evaluate(busy, &swapping)); err == nil && !swapping {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// flatten opens chromedp.Tasks so run can audit between their steps.
func flatten(actions []chromedp.Action) []chromedp.Action {
	var out []chromedp.Action
	for _, a := range actions {
		if ts, ok := a.(chromedp.Tasks); ok {
			out = append(out, flatten(ts)...)
			continue
		}
		out = append(out, a)
	}
	return out
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

// axeScript is axe-core from npm, vendored as test data
// (testdata/axe/README.md): it is evaluated in the audited page through the
// DevTools protocol and never served.
const axeScript = "testdata/axe/axe-4.14.1.min.js"

var axeSource = sync.OnceValues(func() (string, error) {
	b, err := os.ReadFile(axeScript)
	return string(b), err
})

// axeRun runs every axe-core rule of WCAG 2.0, 2.1 and 2.2 at levels A and
// AA, the experimental ones among them (p-as-heading is one), and returns
// the violations: one run per audit, which asks axe for nothing else.
const axeRun = `(async function () {
	var ids = axe.getRules(["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]).map(function (r) { return r.ruleId; });
	var r = await axe.run(document, {runOnly: {type: "rule", values: ids}, resultTypes: ["violations"]});
	return r.violations.map(function (v) {
		return {id: v.id, help: v.help, nodes: v.nodes.slice(0, 5).map(function (n) {
			return {target: n.target.join(" "), html: n.html.slice(0, 300), summary: (n.failureSummary || "").slice(0, 400)};
		})};
	});
})()`

type axeViolation struct {
	ID, Help string
	Nodes    []struct{ Target, HTML, Summary string }
}

// audit runs axe-core on what the tab shows, if it changed since the last
// audit, and fails the test on each violation (once per page and rule).
func (tb *tab) audit(t *testing.T) {
	t.Helper()
	tb.mu.Lock()
	views := tb.views
	tb.mu.Unlock()
	if views == tb.audited {
		return
	}
	start := time.Now()
	violations, loc, err := tb.axe()
	tb.audits++
	tb.auditTime += time.Since(start)
	tb.mu.Lock()
	now := tb.views
	tb.mu.Unlock()
	if err != nil && now != views {
		return // the page moved on meanwhile; the next audit sees the new one
	}
	tb.audited = views
	if err != nil {
		t.Errorf("axe-core on %s: %v", loc, err)
		return
	}
	for _, v := range violations {
		if tb.reported[loc+" "+v.ID] {
			continue
		}
		tb.reported[loc+" "+v.ID] = true
		var b strings.Builder
		fmt.Fprintf(&b, "axe-core: %s on %s: %s", v.ID, loc, v.Help)
		for _, n := range v.Nodes {
			fmt.Fprintf(&b, "\n  %s: %s\n    %s", n.Target, n.HTML, strings.ReplaceAll(n.Summary, "\n", "\n    "))
		}
		t.Error(b.String())
	}
}

// axe waits for the document to load, injects axe-core unless the document
// has it, and runs it.
func (tb *tab) axe() ([]axeViolation, string, error) {
	src, err := axeSource()
	if err != nil {
		return nil, "", err
	}
	var loc string
	var violations []axeViolation
	if !tb.javascript {
		if err := chromedp.Run(tb.ctx, emulation.SetScriptExecutionDisabled(false)); err != nil {
			return nil, "", err
		}
		defer func() {
			if err := chromedp.Run(tb.ctx, emulation.SetScriptExecutionDisabled(true)); err != nil {
				tb.addError("turn scripts off again after the audit: " + err.Error())
			}
		}()
	}
	err = chromedp.Run(tb.ctx,
		chromedp.ActionFunc(func(ctx context.Context) error {
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				var ready bool
				if err := chromedp.Evaluate(`document.readyState === "complete"`, &ready).Do(ctx); err != nil {
					return err
				}
				if ready {
					return nil
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("the page did not finish loading")
				}
			}
		}),
		chromedp.Location(&loc),
		chromedp.ActionFunc(func(ctx context.Context) error {
			var loaded bool
			if err := chromedp.Evaluate(`typeof window.axe === "object"`, &loaded).Do(ctx); err != nil || loaded {
				return err
			}
			var ro *runtime.RemoteObject
			return chromedp.Evaluate(src, &ro).Do(ctx)
		}),
		chromedp.Evaluate(axeRun, &violations, func(p *runtime.EvaluateParams) *runtime.EvaluateParams {
			return p.WithAwaitPromise(true)
		}),
	)
	return violations, loc, err
}
