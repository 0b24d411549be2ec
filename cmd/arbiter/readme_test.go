package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readmeBlock is one ```sh block of the README: its script, and for each
// command the output lines it must show.
type readmeBlock struct {
	line     int
	commands []readmeCommand
}

type readmeCommand struct {
	line   int
	text   string
	expect []string
}

// parseReadme reads the README's ```sh blocks in order. The convention,
// readable in the README: a block after a line `<!-- readme-test: skip … -->`
// is not run (it starts a server, or talks to a host that is not there); a
// comment line `#> TEXT` after a command says the command's output contains
// TEXT.
func parseReadme(t *testing.T, path string) []readmeBlock {
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(string(raw), "\n")
	var blocks []readmeBlock
	skip := false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "<!-- readme-test: skip") {
			skip = true
			continue
		}
		if !strings.HasPrefix(l, "```") {
			continue
		}
		lang := strings.TrimPrefix(l, "```")
		j := i + 1
		for j < len(lines) && !strings.HasPrefix(lines[j], "```") {
			j++
		}
		if (lang == "sh" || lang == "console") && !skip {
			blocks = append(blocks, readmeBlock{line: i + 1, commands: splitCommands(lines[i+1:j], i+2)})
		}
		if lang != "" {
			skip = false
		}
		i = j
	}
	return blocks
}

// splitCommands joins continued lines into commands and attaches `#>` lines
// to the command before them.
func splitCommands(lines []string, first int) []readmeCommand {
	var cmds []readmeCommand
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		trimmed := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(trimmed, "#>"):
			if n := len(cmds); n > 0 {
				cmds[n-1].expect = append(cmds[n-1].expect, strings.TrimSpace(strings.TrimPrefix(trimmed, "#>")))
			}
		case trimmed == "" || strings.HasPrefix(trimmed, "#"):
		default:
			c := readmeCommand{line: first + i, text: l}
			for strings.HasSuffix(strings.TrimRight(lines[i], " "), "\\") && i+1 < len(lines) {
				i++
				c.text += "\n" + lines[i]
			}
			cmds = append(cmds, c)
		}
	}
	return cmds
}

var (
	readmeServer     = regexp.MustCompile(`127\.0\.0\.1:8080`)
	readmeAssignment = regexp.MustCompile(`^(export )?[A-Za-z_][A-Za-z0-9_]*=`)
)

// script turns a block into bash: every command's output goes to a file of
// its own (a command ending in & keeps running in the background), the
// script stops at the first command that fails, and the outputs are checked
// once the block is done.
func (b readmeBlock) script(binary, addr, outDir string) string {
	var s strings.Builder
	s.WriteString("set -eo pipefail\n")
	for i, c := range b.commands {
		text := strings.ReplaceAll(c.text, "go run ./cmd/arbiter", binary)
		text = readmeServer.ReplaceAllString(text, addr)
		out := filepath.Join(outDir, fmt.Sprintf("cmd-%d-%d", b.line, i))
		trimmed := strings.TrimRight(text, " ")
		if readmeAssignment.MatchString(trimmed) {
			// An assignment stays in this shell.
			fmt.Fprintf(&s, "echo '+ README line %d' >&2\n%s\n", c.line, text)
			continue
		}
		if strings.HasSuffix(trimmed, "&") {
			fmt.Fprintf(&s, "echo '+ README line %d' >&2\n{ %s\n} > %s 2>&1 &\n", c.line, strings.TrimSuffix(trimmed, "&"), out)
			continue
		}
		fmt.Fprintf(&s, "echo '+ README line %d' >&2\n{ %s\n} > %s 2>&1 || { echo \"README line %d failed:\"; cat %s; exit 1; }\n", c.line, text, out, c.line, out)
	}
	return s.String()
}

// TestReadmeSessions runs the README's shell sessions top to bottom against
// a fresh `arbiter serve` built from this tree on a temporary SQLite
// database, as a reader would in a second terminal, and requires every
// command to succeed and every output the README shows to hold.
func TestReadmeSessions(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the README against a server")
	}
	blocks := parseReadme(t, filepath.Join("..", "..", "README.md"))
	require.NotEmpty(t, blocks)
	dir := t.TempDir()
	env := []string{"ARBITER_DATABASE_URL=sqlite:" + filepath.Join(dir, "arbiter.db"), "ARBITER_SWEEP_INTERVAL=200ms"}
	p := serve(t, dir, env, "--addr", "127.0.0.1:0", "--migrate")
	addr := strings.TrimPrefix(p.url, "http://")
	outDir := t.TempDir()
	var all strings.Builder
	for _, b := range blocks {
		all.WriteString(b.script(binary, addr, outDir))
		all.WriteString("wait\n")
	}
	cmd := exec.Command("bash", "-c", all.String())
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the README's commands:\n%s\nserver log:\n%s", out, p.logs.String())
	checked := 0
	for _, b := range blocks {
		for i, c := range b.commands {
			got, err := os.ReadFile(filepath.Join(outDir, fmt.Sprintf("cmd-%d-%d", b.line, i)))
			t.Logf("README line %d: %s", c.line, got)
			if len(c.expect) == 0 {
				continue
			}
			require.NoError(t, err, "README line %d", c.line)
			for _, want := range c.expect {
				require.Contains(t, string(got), want, "README line %d:\n%s", c.line, c.text)
				checked++
			}
		}
	}
	require.Positive(t, checked, "the README shows no output to check")
}
