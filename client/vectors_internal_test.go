package client

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// vectors is sdk/vectors.json: the behaviour the Go, Python and TypeScript
// SDKs share.
type vectors struct {
	Keys struct {
		MaxBytes int `json:"max_bytes"`
		Cases    []struct {
			Parts []string `json:"parts"`
			Key   string   `json:"key"`
		} `json:"cases"`
	} `json:"keys"`
	Backoff struct {
		FirstMS   int `json:"first_ms"`
		LargestMS int `json:"largest_ms"`
		Bounds    []struct {
			N     int `json:"n"`
			MaxMS int `json:"max_ms"`
		} `json:"bounds"`
	} `json:"backoff"`
}

func readVectors(t *testing.T) vectors {
	t.Helper()
	raw, err := os.ReadFile("../sdk/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestSharedVectorsKeys(t *testing.T) {
	v := readVectors(t)
	if v.Keys.MaxBytes != maxKeyBytes {
		t.Fatalf("max key bytes %d, vectors say %d", maxKeyBytes, v.Keys.MaxBytes)
	}
	if len(v.Keys.Cases) < 10 {
		t.Fatalf("only %d key vectors", len(v.Keys.Cases))
	}
	for _, c := range v.Keys.Cases {
		if got := Key(c.Parts...); got != c.Key {
			t.Errorf("Key(%q) = %q, vectors say %q", c.Parts, got, c.Key)
		}
	}
}

// TestSharedVectorsBackoff: the client's default report backoff has the
// shared bounds, and no pause ever exceeds its bound.
func TestSharedVectorsBackoff(t *testing.T) {
	v := readVectors(t)
	c := New("http://127.0.0.1:1", "ak_x")
	want := backoff{first: time.Duration(v.Backoff.FirstMS) * time.Millisecond, largest: time.Duration(v.Backoff.LargestMS) * time.Millisecond}
	if c.backoff != want {
		t.Fatalf("default backoff %+v, vectors say %+v", c.backoff, want)
	}
	for _, b := range v.Backoff.Bounds {
		bound := time.Duration(b.MaxMS) * time.Millisecond
		var most time.Duration
		for range 2000 {
			p := c.backoff.pause(b.N)
			if p < 0 || p > bound {
				t.Fatalf("pause(%d) = %s, outside [0, %s]", b.N, p, bound)
			}
			most = max(most, p)
		}
		if most < bound/2 {
			t.Errorf("pause(%d) never above %s in 2000 draws: the jitter does not span [0, %s]", b.N, most, bound)
		}
	}
}

// TestSharedVectorsLookupDue: the worker asks a timed-out attempt again
// exactly when the shared vectors say.
func TestSharedVectorsLookupDue(t *testing.T) {
	raw, err := os.ReadFile("../sdk/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Lookups struct {
			MaxLookups int `json:"max_lookups"`
			RetryAfter int `json:"retry_after_s"`
			Due        []struct {
				Case           string `json:"case"`
				Attempt        int    `json:"attempt"`
				Reconciliation *struct {
					LookupAttempt int    `json:"lookup_attempt"`
					Lookups       int    `json:"lookups"`
					LookupUntil   string `json:"lookup_until"`
					LastLookup    *struct {
						Attempt int    `json:"attempt"`
						Answer  string `json:"answer"`
						Said    string `json:"said"`
						At      string `json:"at"`
					} `json:"last_lookup"`
				} `json:"reconciliation"`
				Due bool `json:"due"`
			} `json:"due"`
		} `json:"lookups"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if v.Lookups.MaxLookups != MaxLookups {
		t.Fatalf("max lookups %d, vectors say %d", MaxLookups, v.Lookups.MaxLookups)
	}
	w := NewWorker(New("http://127.0.0.1:1", "ak_x"), WorkerOptions{})
	if w.opts.LookupRetry != time.Duration(v.Lookups.RetryAfter)*time.Second {
		t.Fatalf("lookup retry %s, vectors say %d s", w.opts.LookupRetry, v.Lookups.RetryAfter)
	}
	now := time.Now()
	at := map[string]time.Time{"now": now, "long_ago": now.Add(-time.Hour), "future": now.Add(time.Minute)}
	for _, c := range v.Lookups.Due {
		a := Action{Status: StatusTimedOut, Attempt: max(c.Attempt, 1)}
		if r := c.Reconciliation; r != nil {
			a.Reconciliation = &record.Reconciliation{LookupAttempt: r.LookupAttempt, Lookups: r.Lookups}
			if r.LookupUntil != "" {
				u := at[r.LookupUntil]
				a.Reconciliation.LookupUntil = &u
			}
			if l := r.LastLookup; l != nil {
				a.Reconciliation.LastLookup = &record.LookupAnswer{Attempt: l.Attempt, Answer: record.Answer(l.Answer), Said: l.Said, At: at[l.At]}
			}
		}
		if got := w.lookupDue(a, now); got != c.Due {
			t.Errorf("%s: due %v, vectors say %v", c.Case, got, c.Due)
		}
	}
}

// TestSharedVectorsCompensationDue: the worker runs a requested
// compensation exactly when the shared vectors say.
func TestSharedVectorsCompensationDue(t *testing.T) {
	raw, err := os.ReadFile("../sdk/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Compensations struct {
			Due []struct {
				Case           string                 `json:"case"`
				Reconciliation *record.Reconciliation `json:"reconciliation"`
				Due            bool                   `json:"due"`
			} `json:"due"`
		} `json:"compensations"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Compensations.Due) < 4 {
		t.Fatalf("only %d compensation vectors", len(v.Compensations.Due))
	}
	w := NewWorker(New("http://127.0.0.1:1", "ak_x"), WorkerOptions{})
	w.Handle("t", func(context.Context, Attempt) (any, string, error) { return nil, "", nil },
		func(context.Context, Attempt) (string, error) { return "", nil })
	for _, c := range v.Compensations.Due {
		a := Action{ID: "a", Tool: "t", Status: StatusCompensationRequested, Attempt: 1, Reconciliation: c.Reconciliation}
		if _, got := w.handlerFor(a); got != c.Due {
			t.Errorf("%s: due %v, vectors say %v", c.Case, got, c.Due)
		}
	}
}
