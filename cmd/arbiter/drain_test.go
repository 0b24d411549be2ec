package main_test

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	_ "github.com/glebarez/go-sqlite"

	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestSIGTERMDrains: a request in flight when SIGTERM arrives is answered in
// full, and the process exits cleanly.
func TestSIGTERMDrains(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dbURL := dbtest.SQLiteURL(t)
	env := []string{"ARBITER_DATABASE_URL=" + dbURL}
	p := serve(t, dir, env)
	key := createKey(t, dir, env, "--namespace", "ops", "--name", "bot", "--role", "agent")
	var b strings.Builder
	b.WriteString(`{"entries":[`)
	for i := range 500 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"key":"k:%d","type":"intent","tool":"t"}`, i)
	}
	b.WriteString("]}")
	type answer struct {
		status int
		m      map[string]any
		err    error
	}
	// The body goes through a pipe, half before SIGTERM and half after, so
	// the request is surely in flight when the signal arrives: its headers
	// and the first half were written to the server's connection.
	body := []byte(b.String())
	pr, pw := io.Pipe()
	req, err := http.NewRequest("POST", p.url+"/v1/entries", pr)
	require.NoError(t, err)
	req.ContentLength = int64(len(body))
	req.Header.Set("Authorization", "Bearer "+key)
	got := make(chan answer, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer res.Body.Close()
		var m map[string]any
		err = json.NewDecoder(res.Body).Decode(&m)
		got <- answer{res.StatusCode, m, err}
	}()
	_, err = pw.Write(body[:len(body)/2])
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond) // let the server take the connection off its accept queue
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	_, err = pw.Write(body[len(body)/2:])
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	var a answer
	select {
	case a = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("the request in flight at SIGTERM was not answered within 30 s")
	}
	require.NoError(t, a.err)
	require.Equal(t, 200, a.status)
	require.Len(t, a.m["results"], 500)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not exit after SIGTERM")
	}
	require.Equal(t, 0, p.cmd.ProcessState.ExitCode(), p.logs.String())
	require.Contains(t, p.logs.String(), "draining in-flight requests")

	// The plaintext key is stored nowhere: only its hash and a short prefix.
	db, err := sql.Open("sqlite", strings.TrimPrefix(dbURL, "sqlite:"))
	require.NoError(t, err)
	defer db.Close()
	var n int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM api_keys WHERE instr(name || prefix || hex(hash), ?) > 0 OR hash = ?`, key[3:], key).Scan(&n))
	require.Zero(t, n)
	require.NotContains(t, p.logs.String(), key)
	files, err := filepath.Glob(strings.TrimPrefix(dbURL, "sqlite:") + "*")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		require.False(t, bytes.Contains(raw, []byte(key[3:])), "%s holds the plaintext key", f)
	}
}

// TestSIGTERMEndsEventStreams: an open triage page (a server-sent event
// stream) does not hold up shutdown.
func TestSIGTERMEndsEventStreams(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{"ARBITER_DATABASE_URL=" + dbtest.SQLiteURL(t)}
	_, _, err := runArbiter(t, dir, env, "a long enough password", "users", "create", "--email", "ops@example.com", "--role", "operator", "--password-stdin")
	require.NoError(t, err)
	p := serve(t, dir, env)
	client, status := signInOverHTTP(t, p.url, "ops@example.com", "a long enough password")
	require.Equal(t, 303, status)
	res, err := client.Get(p.url + "/triage/events")
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, "text/event-stream", res.Header.Get("Content-Type"))

	start := time.Now()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not exit within 10 s of SIGTERM with an event stream open")
	}
	require.Equal(t, 0, p.cmd.ProcessState.ExitCode(), p.logs.String())
	t.Logf("exited %s after SIGTERM", time.Since(start))
}
