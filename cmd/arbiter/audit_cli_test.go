package main_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// exitCode is the exit status of a finished command; 0 when err is nil.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	require.NoError(t, err)
	return 0
}

// checkpointSize polls the server's newest checkpoint until its tree has
// at least n leaves, and returns the note.
func checkpointAtLeast(t *testing.T, url string, n int) string {
	t.Helper()
	var note string
	for deadline := time.Now().Add(40 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		res, err := http.Get(url + "/v1/audit/checkpoint")
		require.NoError(t, err)
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			note = string(raw)
			var size int
			if _, err := fmt.Sscanf(strings.SplitN(note, "\n", 3)[1], "%d", &size); err == nil && size >= n {
				return note
			}
		}
	}
	t.Fatalf("no checkpoint of %d leaves within 40 s; the last: %q", n, note)
	return ""
}

// TestAuditCLI, on both databases: the verifier key from the key file is
// the server's; a bundle exported from the server and one exported
// straight from the database are the same and verify offline; one byte of
// one leaf changed is named by its line; the live tables verify, and
// after an entry is edited and another deleted `audit verify --database`
// exits 1 naming both.
func TestAuditCLI(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			dbURL := dbtest.SQLiteURL(t)
			if db == "postgres" {
				dbURL = dbtest.MigratedPostgresURL(t)
			}
			env := []string{"ARBITER_DATABASE_URL=" + dbURL, "ARBITER_LOG_KEY_FILE=" + filepath.Join(dir, "log.key")}
			p := serve(t, dir, env)
			agent := createKey(t, dir, env, "--namespace", "payments", "--name", "refund-bot", "--role", "agent")
			reader := createKey(t, dir, env, "--namespace", "payments", "--name", "auditor", "--role", "reader")
			cli := func(args ...string) cliResult {
				out, errOut, err := runArbiter(t, dir, env, "", args...)
				return cliResult{out, errOut, err}
			}

			vkey := strings.TrimSpace(cli("audit", "key").ok(t))
			require.Regexp(t, `^arbiter\.local/log\+[0-9a-f]{8}\+[A-Za-z0-9+/=]+$`, vkey)
			res, err := http.Get(p.url + "/v1/audit/key")
			require.NoError(t, err)
			raw, _ := io.ReadAll(res.Body)
			res.Body.Close()
			require.Equal(t, vkey+"\n", string(raw), "the server signs with the key file's key")

			for i := range 3 {
				status, m := post(t, p.url+"/v1/entries", agent, fmt.Sprintf(`{"key":"refund:%d","type":"intent","tool":"payments.refund","effect":"keyed","params":{"amount":%d}}`, i, 100+i))
				require.Equal(t, 201, status, "%v", m)
				status, m = post(t, p.url+"/v1/entries", agent, fmt.Sprintf(`{"key":"refund:%d","type":"succeeded","attempt":1,"result":{"refund":"re_%d"}}`, i, i))
				require.Equal(t, 200, status, "%v", m)
			}
			checkpointAtLeast(t, p.url, 6)

			bundle := filepath.Join(dir, "payments.ndjson")
			r := cli("audit", "export", "--namespace", "payments", "--url", p.url, "--api-key", reader, "-o", bundle)
			require.NoError(t, r.err, r.stderr)
			require.Empty(t, r.stdout, "the bundle goes to its file")
			fromServer, err := os.ReadFile(bundle)
			require.NoError(t, err)
			require.Len(t, strings.Split(strings.TrimSpace(string(fromServer)), "\n"), 7, "the checkpoint, then one line per entry")
			fromDB := cli("audit", "export", "--namespace", "payments", "--database", dbURL).ok(t)
			require.Equal(t, string(fromServer), fromDB, "the server and the database export the same bundle")
			require.Contains(t, cli("audit", "export", "--namespace", "payments", "--url", p.url, "--api-key", agent).fails(t), "forbidden",
				"agent keys write; they do not export")

			require.Equal(t, "ok: 6 entries proved in the tree of size 6 of arbiter.local/log\n",
				cli("audit", "verify", bundle, "--key", vkey).ok(t), "no server and no database needed")
			other := strings.TrimSpace(cli("audit", "key", "--log-key-file", filepath.Join(dir, "other.key")).ok(t))
			r = cli("audit", "verify", bundle, "--key", other)
			require.Equal(t, 1, exitCode(t, r.err))
			require.Contains(t, r.stderr, "signature", "a checkpoint is only believed with its own key")

			// One byte of the third entry's leaf changed.
			lines := strings.Split(strings.TrimSpace(string(fromServer)), "\n")
			var line map[string]any
			require.NoError(t, json.Unmarshal([]byte(lines[3]), &line))
			leaf, err := base64.StdEncoding.DecodeString(line["leaf"].(string))
			require.NoError(t, err)
			at := strings.Index(string(leaf), `"seq":`) + len(`"seq":`)
			leaf[at]++
			line["leaf"] = base64.StdEncoding.EncodeToString(leaf)
			changed, _ := json.Marshal(line)
			lines[3] = string(changed)
			bad := filepath.Join(dir, "changed.ndjson")
			require.NoError(t, os.WriteFile(bad, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
			r = cli("audit", "verify", bad, "--key", vkey)
			require.Equal(t, 1, exitCode(t, r.err), r.stdout)
			require.Regexp(t, `line 4`, r.stderr, "the bad line is named")

			r = cli("audit", "verify", "--database", dbURL, "--key", vkey)
			require.Equal(t, "ok: 6 entries checked against the checkpoint of tree size 6\n", r.ok(t))
			require.Empty(t, r.stderr, "no progress bar when standard error is not a terminal")

			// Someone with database access edits one outcome and deletes
			// another.
			st, err := services.Open(context.Background(), dbURL)
			require.NoError(t, err)
			w := st.GormWriter()
			require.NoError(t, w.Exec(`UPDATE entries SET payload = '{"result":{"refund":"re_9"}}' WHERE seq = 2 AND action_id = (SELECT id FROM actions WHERE key = 'refund:0')`).Error)
			require.NoError(t, w.Exec(`DELETE FROM entries WHERE seq = 2 AND action_id = (SELECT id FROM actions WHERE key = 'refund:1')`).Error)
			require.NoError(t, st.Close())

			r = cli("audit", "verify", "--database", dbURL, "--key", vkey)
			require.Equal(t, 1, exitCode(t, r.err), "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			require.Regexp(t, `(?m)^edited: log index \d, namespace "payments", key "refund:0", seq 2, entry [0-9a-f-]{36}: `, r.stdout)
			require.Regexp(t, `(?m)^deleted: log index \d, entry [0-9a-f-]{36}: `, r.stdout)
			require.Len(t, tableLines(r.stdout), 2, "each change once: %s", r.stdout)
			require.Contains(t, r.stderr, "2 changes since the entries were logged (6 leaves checked against the checkpoint of tree size 6)")

			r = cli("audit", "verify", "--database", dbURL, "--key", vkey, "--json")
			require.Equal(t, 1, exitCode(t, r.err))
			var rep struct {
				TreeSize int64 `json:"tree_size"`
				Problems []struct {
					Kind string `json:"kind"`
					Key  string `json:"key"`
				} `json:"problems"`
			}
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
			require.EqualValues(t, 6, rep.TreeSize)
			kinds := []string{}
			for _, pr := range rep.Problems {
				kinds = append(kinds, pr.Kind)
			}
			require.ElementsMatch(t, []string{"edited", "deleted"}, kinds)
		})
	}
}

// logLockHolder is the application_name of the session holding the
// evidence log's advisory lock (pgdriver's logLock, "arbitlog"), or "".
func logLockHolder(ctx context.Context, st *services.Store) string {
	var name string
	st.Gorm().WithContext(ctx).Raw(`SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 1634886249 AND l.objid = 1953263463`).Scan(&name)
	return name
}

// TestLogSurvivesKillingTheSequencer: two replicas on one PostgreSQL
// under load; the one holding the log's lock is killed -9 in the middle
// of a pass. The other goes on sequencing: every committed entry is in
// the log once, at contiguous indexes, and the tables verify.
func TestLogSurvivesKillingTheSequencer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dbURL := dbtest.MigratedPostgresURL(t)
	sep := "?"
	if strings.Contains(dbURL, "?") {
		sep = "&"
	}
	keyFile := []string{"ARBITER_LOG_KEY_FILE=" + filepath.Join(dir, "log.key")}
	env := append([]string{"ARBITER_DATABASE_URL=" + dbURL}, keyFile...)
	agent := createKey(t, dir, env, "--namespace", "payments", "--name", "refund-bot", "--role", "agent")
	replicas := map[string]*proc{}
	for _, name := range []string{"replica-a", "replica-b"} {
		replicas[name] = serve(t, dir, append([]string{"ARBITER_DATABASE_URL=" + dbURL + sep + "application_name=" + name}, keyFile...))
	}

	// Load: four clients, each on both replicas in turn, batches of intents.
	ctx, stop := context.WithCancel(context.Background())
	var sent atomic.Int64
	var dead sync.Map
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				name := []string{"replica-a", "replica-b"}[(c+i)%2]
				if _, gone := dead.Load(name); gone {
					continue
				}
				var batch []string
				for j := range 20 {
					batch = append(batch, fmt.Sprintf(`{"key":"refund:%d-%d-%d","type":"intent","tool":"payments.refund","effect":"keyed","params":{"amount":1}}`, c, i, j))
				}
				req, _ := http.NewRequest("POST", replicas[name].url+"/v1/entries", strings.NewReader(`{"entries":[`+strings.Join(batch, ",")+`]}`))
				req.Header.Set("Authorization", "Bearer "+agent)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					continue // the killed replica
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode < 300 {
					sent.Add(20)
				}
			}
		}()
	}

	st, err := services.Open(context.Background(), dbURL)
	require.NoError(t, err)
	defer st.Close()
	time.Sleep(2 * time.Second)
	var victim string
	for deadline := time.Now().Add(20 * time.Second); victim == "" && time.Now().Before(deadline); {
		victim = logLockHolder(ctx, st)
	}
	require.NotEmpty(t, victim, "a replica holds the log's lock while it sequences")
	dead.Store(victim, true)
	replicas[victim].kill()
	t.Logf("killed %s in a pass after %d entries acknowledged", victim, sent.Load())
	time.Sleep(3 * time.Second)
	stop()
	wg.Wait()
	require.Greater(t, sent.Load(), int64(1000), "the load ran")

	// The survivor logs what is left within 2 s of its commit.
	var entries, leaves, distinct, maxIndex, size int64
	count := func() {
		w := st.Gorm()
		require.NoError(t, w.Raw(`SELECT count(*) FROM entries`).Scan(&entries).Error)
		require.NoError(t, w.Raw(`SELECT count(*), count(DISTINCT entry_id), coalesce(max(log_index), -1) FROM log_leaves`).Row().Scan(&leaves, &distinct, &maxIndex))
		require.NoError(t, w.Raw(`SELECT size FROM log_state WHERE id = 1`).Scan(&size).Error)
	}
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if count(); leaves == entries {
			break
		}
	}
	require.GreaterOrEqual(t, entries, sent.Load(), "every acknowledged entry is stored")
	require.Equal(t, entries, leaves, "no entry missing from the log")
	require.Equal(t, leaves, distinct, "none twice")
	require.Equal(t, leaves-1, maxIndex, "indexes contiguous from 0")
	require.Equal(t, leaves, size)
	var missing int64
	require.NoError(t, st.Gorm().Raw(`SELECT count(*) FROM entries e WHERE NOT EXISTS (SELECT 1 FROM log_leaves l WHERE l.entry_id = e.id)`).Scan(&missing).Error)
	require.Zero(t, missing)

	var survivor string
	for name := range replicas {
		if name != victim {
			survivor = name
		}
	}
	checkpointAtLeast(t, replicas[survivor].url, int(leaves))
	vkey, _, err := runArbiter(t, dir, env, "", "audit", "key")
	require.NoError(t, err)
	out, errOut, err := runArbiter(t, dir, env, "", "audit", "verify", "--database", dbURL, "--key", strings.TrimSpace(vkey))
	require.NoError(t, err, "%s%s", out, errOut)
	require.Regexp(t, regexp.MustCompile(fmt.Sprintf(`^ok: %d entries checked`, leaves)), out)
}
