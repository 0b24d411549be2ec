package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/evidence"
)

// auditCmd is `arbiter audit` (SPEC "Evidence: a ledger that proves
// itself"): the log's verifier key, bundles of a namespace's entries, and
// their verification offline or against the live database.
type auditCmd struct {
	Key    auditKeyCmd    `cmd:"" help:"Print the evidence log's verifier key (origin+hash+base64), from its signing key file (made there when there is none yet)."`
	Export auditExportCmd `cmd:"" help:"Write a namespace's entries with their inclusion proofs and the checkpoint as a bundle (NDJSON), from a server (--url, --api-key) or straight from the database (--database)."`
	Verify auditVerifyCmd `cmd:"" help:"Verify a bundle with no server and no database, or the live database (--database) against the newest checkpoint; exit 1 naming what changed."`
}

type auditKeyCmd struct {
	LogKeyFile string `name:"log-key-file" env:"ARBITER_LOG_KEY_FILE" default:"arbiter-data/log.key" help:"The log's signing key file, as serve reads it."`
	LogOrigin  string `name:"log-origin" env:"ARBITER_LOG_ORIGIN" default:"arbiter.local/log" help:"The log's name."`
}

func (a *auditKeyCmd) Run() error {
	_, statErr := os.Stat(a.LogKeyFile)
	k, err := evidence.LoadOrCreateKey(a.LogKeyFile, a.LogOrigin)
	if err != nil {
		return err
	}
	if errors.Is(statErr, os.ErrNotExist) {
		fmt.Fprintf(os.Stderr, "made a new signing key in %s (mode 0600): give every replica this file\n", a.LogKeyFile)
	}
	fmt.Println(k.Verifier)
	return nil
}

type auditExportCmd struct {
	URL       string `name:"url" env:"ARBITER_URL" help:"The Arbiter server to export from (ARBITER_URL), with --api-key."`
	APIKey    string `name:"api-key" env:"ARBITER_API_KEY" help:"A reader, operator or admin API key (ARBITER_API_KEY)."`
	Database  string `name:"database" help:"Export straight from this database (postgres://… or sqlite:PATH) instead of a server."`
	Namespace string `required:"" help:"The namespace whose entries the bundle holds."`
	Since     string `help:"Only entries recorded at or after this time: RFC 3339, or a duration ago such as 24h."`
	Until     string `help:"Only entries recorded before this time: RFC 3339, or a duration ago."`
	Output    string `short:"o" help:"Write the bundle to this file (default: standard output)."`
}

func (a *auditExportCmd) Run(ctx context.Context) error {
	since, err := parseWhen("--since", a.Since, time.Now())
	if err != nil {
		return err
	}
	until, err := parseWhen("--until", a.Until, time.Now())
	if err != nil {
		return err
	}
	out := io.Writer(os.Stdout)
	if a.Output != "" {
		f, err := os.OpenFile(a.Output, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		out = f
	}
	bw := bufio.NewWriterSize(out, 1<<16)
	switch {
	case a.Database != "":
		st, err := services.Open(ctx, a.Database)
		if err != nil {
			return err
		}
		defer st.Close()
		bar := newBar(-1, "exporting", "entries", a.Output != "")
		res, err := evidence.NewLog(st.Driver(), nil).Export(ctx, services.Principal{Role: services.RoleAdmin}, bw,
			evidence.ExportQuery{Namespace: a.Namespace, Since: since, Until: until, Progress: bar.set})
		bar.done()
		if err != nil {
			return err
		}
		if a.Output != "" || res.Later > 0 {
			fmt.Fprintf(os.Stderr, "exported %d entries of %s against the checkpoint of tree size %d", res.Entries, a.Namespace, res.TreeSize)
			if res.Later > 0 {
				fmt.Fprintf(os.Stderr, "; %d logged after it are in the next export", res.Later)
			}
			fmt.Fprintln(os.Stderr)
		}
	default:
		f := apiFlags{URL: cmp.Or(a.URL, "http://127.0.0.1:8080"), APIKey: a.APIKey}
		c, err := f.client()
		if err != nil {
			return err
		}
		if err := c.AuditExport(ctx, a.Namespace, since, until, bw); err != nil {
			return f.explain(err)
		}
	}
	return bw.Flush()
}

type auditVerifyCmd struct {
	Bundle   string `arg:"" optional:"" help:"The bundle file (- for standard input); leave it out with --database."`
	Key      string `required:"" help:"The verifier key the checkpoint must be signed with (arbiter audit key), from a copy you trust."`
	Database string `name:"database" help:"Verify the live tables of this database (postgres://… or sqlite:PATH) instead of a bundle."`
	JSON     bool   `help:"Print the report as JSON (--database)."`
}

func (a *auditVerifyCmd) Run(ctx context.Context) error {
	switch {
	case a.Database != "" && a.Bundle != "":
		return errors.New("give a bundle or --database, not both")
	case a.Database != "":
		return a.database(ctx)
	case a.Bundle == "":
		return errors.New("give a bundle file to verify, or --database URL")
	}
	in := io.Reader(os.Stdin)
	if a.Bundle != "-" {
		f, err := os.Open(a.Bundle)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	res, err := evidence.VerifyBundle(in, a.Key)
	if err != nil {
		return err
	}
	fmt.Printf("ok: %d entries proved in the tree of size %d of %s\n", res.Entries, res.TreeSize, res.Origin)
	return nil
}

func (a *auditVerifyCmd) database(ctx context.Context) error {
	st, err := services.Open(ctx, a.Database)
	if err != nil {
		return err
	}
	defer st.Close()
	var bar *bar
	rep, err := evidence.VerifyDatabase(ctx, st.Driver(), a.Key, evidence.VerifyOptions{
		Total:    func(n int64) { bar = newBar(n, "verifying", "entries", true) },
		Progress: func(n int64) { bar.set(int(n)) },
	})
	bar.done()
	if err != nil {
		return err
	}
	if a.JSON {
		if err := printJSON(os.Stdout, rep); err != nil {
			return err
		}
	} else {
		for _, p := range rep.Problems {
			fmt.Println(p.String())
		}
	}
	if !rep.OK() {
		return fmt.Errorf("%d changes since the entries were logged (%d leaves checked against the checkpoint of tree size %d)",
			len(rep.Problems), rep.Checked, rep.TreeSize)
	}
	if !a.JSON {
		fmt.Printf("ok: %d entries checked against the checkpoint of tree size %d", rep.Checked, rep.TreeSize)
		if rep.Later > 0 {
			fmt.Printf(", %d logged after it against their leaves", rep.Later)
		}
		fmt.Println()
	}
	return nil
}

// bar is a progress bar on standard error when it is a terminal, and
// nothing otherwise.
type bar struct {
	pb *progressbar.ProgressBar
}

// newBar shows a bar of total steps (-1: unknown) of unit on a terminal;
// show false (output on the terminal too) shows none.
func newBar(total int64, what, unit string, show bool) *bar {
	if !show || !term.IsTerminal(int(os.Stderr.Fd())) {
		return nil
	}
	pb := progressbar.NewOptions64(total, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString(unit),
		progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish())
	_ = pb.RenderBlank() // the clock starts now, not at the first step
	return &bar{pb: pb}
}

func (b *bar) set(n int) {
	if b != nil {
		_ = b.pb.Set(n)
	}
}

func (b *bar) done() {
	if b != nil {
		_ = b.pb.Finish()
	}
}
