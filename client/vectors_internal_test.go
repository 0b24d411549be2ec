package client

import (
	"encoding/json"
	"os"
	"testing"
	"time"
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
