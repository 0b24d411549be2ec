package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// composite are the exported methods of *Client that call no single route
// of their own. Every other exported method must be in the routes table.
var composite = []string{"ActionURL", "Guard", "Entries", "AllEntries"}

// TestRoutesMatchOpenAPI keeps the client and the API contract in step:
// every documented operation has a client method, every client method
// calls a documented operation, and each method really sends the request
// its routes entry names.
func TestRoutesMatchOpenAPI(t *testing.T) {
	raw, err := os.ReadFile("../web/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	documented := map[route]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			switch method {
			case "get", "put", "post", "delete", "options", "head", "patch", "trace":
				documented[route{strings.ToUpper(method), normalize(path)}] = true
			}
		}
	}
	implemented := map[route][]string{}
	for name, r := range routes {
		implemented[route{r.Method, normalize(r.Path)}] = append(implemented[route{r.Method, normalize(r.Path)}], name)
	}
	for r := range documented {
		if len(implemented[r]) == 0 {
			t.Errorf("%s %s is in web/openapi.json but no client method calls it: add one and list it in routes", r.Method, r.Path)
		}
	}
	for r, names := range implemented {
		if !documented[r] {
			t.Errorf("%v call %s %s, which web/openapi.json does not document", names, r.Method, r.Path)
		}
	}

	ct := reflect.TypeFor[*Client]()
	for name := range routes {
		if _, ok := ct.MethodByName(name); !ok {
			t.Errorf("routes lists %s, which is not a method of *Client", name)
		}
	}
	for m := range ct.Methods() {
		if _, ok := routes[m.Name]; !ok && !slices.Contains(composite, m.Name) {
			t.Errorf("(*Client).%s is neither in routes nor listed as composite", m.Name)
		}
	}
}

// normalize names every path parameter {id}, whatever the document calls it.
func normalize(path string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, "{") {
			parts[i] = "{id}"
		}
	}
	return strings.Join(parts, "/")
}

// TestMethodsSendTheirRoute calls every method against a server that
// records what it receives, so a method that builds its request by hand, or
// from another method's entry, is caught.
func TestMethodsSendTheirRoute(t *testing.T) {
	var mu sync.Mutex
	var got []route
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, route{r.Method, r.URL.Path})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/entries" {
			// Good enough for both a single entry and a batch of one.
			_, _ = w.Write([]byte(`{"outcome":"recorded","results":[{"outcome":"recorded"}]}`))
			return
		}
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	c := New(srv.URL, "ak_test")
	ctx := context.Background()
	const id = "ID-1"
	calls := map[string]func() error{
		"Submit":      func() error { _, err := c.Submit(ctx, Entry{Key: "k", Type: TypeNote}); return err },
		"SubmitBatch": func() error { _, err := c.SubmitBatch(ctx, []Entry{{Key: "k", Type: TypeNote}}); return err },
		"SubmitWait":  func() error { _, err := c.SubmitWait(ctx, Entry{Key: "k", Type: TypeIntent}, time.Second); return err },
		"ListActions": func() error { _, err := c.ListActions(ctx, ListOptions{Since: time.Now()}); return err },
		"ActionByKey": func() error { _, err := c.ActionByKey(ctx, "k"); return err },
		"ActionByKeyIn": func() error {
			_, err := c.ActionByKeyIn(ctx, "ns", "k")
			return err
		},
		"Action":        func() error { _, err := c.Action(ctx, id); return err },
		"EntriesPage":   func() error { _, err := c.EntriesPage(ctx, id, EntriesOptions{}); return err },
		"Decide":        func() error { _, err := c.Decide(ctx, id, Decision{}); return err },
		"DecideMany":    func() error { _, err := c.DecideMany(ctx, BulkDecision{}); return err },
		"CreateWebhook": func() error { _, err := c.CreateWebhook(ctx, WebhookInput{}); return err },
		"Webhooks":      func() error { _, err := c.Webhooks(ctx); return err },
		"Webhook":       func() error { _, err := c.Webhook(ctx, id); return err },
		"UpdateWebhook": func() error { _, err := c.UpdateWebhook(ctx, id, WebhookInput{}); return err },
		"DeleteWebhook": func() error { return c.DeleteWebhook(ctx, id) },
		"RotateWebhookSecret": func() error {
			_, err := c.RotateWebhookSecret(ctx, id)
			return err
		},
		"TestWebhook": func() error { _, err := c.TestWebhook(ctx, id); return err },
		"WebhookDeliveries": func() error {
			_, err := c.WebhookDeliveries(ctx, id, 5)
			return err
		},
		"Redeliver":    func() error { _, err := c.Redeliver(ctx, id); return err },
		"CreatePolicy": func() error { _, err := c.CreatePolicy(ctx, PolicyInput{}); return err },
		"Policies":     func() error { _, err := c.Policies(ctx, "ns"); return err },
		"Policy":       func() error { _, err := c.Policy(ctx, id); return err },
		"UpdatePolicy": func() error { _, err := c.UpdatePolicy(ctx, id, PolicyInput{}); return err },
		"DeletePolicy": func() error { return c.DeletePolicy(ctx, id) },
		"PolicyVersions": func() error {
			_, err := c.PolicyVersions(ctx, id)
			return err
		},
		"TestPolicy":    func() error { _, err := c.TestPolicy(ctx, PolicyTest{}); return err },
		"CreateLimit":   func() error { _, err := c.CreateLimit(ctx, LimitInput{}); return err },
		"Limits":        func() error { _, err := c.Limits(ctx, "ns"); return err },
		"Limit":         func() error { _, err := c.Limit(ctx, id); return err },
		"UpdateLimit":   func() error { _, err := c.UpdateLimit(ctx, id, LimitInput{}); return err },
		"DeleteLimit":   func() error { return c.DeleteLimit(ctx, id) },
		"LimitVersions": func() error { _, err := c.LimitVersions(ctx, id); return err },
		"LimitUsage":    func() error { _, err := c.LimitUsage(ctx, id, "c_1"); return err },

		"StartFreeze": func() error {
			_, err := c.StartFreeze(ctx, FreezeInput{Namespace: "payments", Reason: "x"})
			return err
		},
		"Freezes":    func() error { _, err := c.Freezes(ctx, FreezeFilter{Active: true}); return err },
		"Freeze":     func() error { _, err := c.Freeze(ctx, id); return err },
		"LiftFreeze": func() error { _, err := c.LiftFreeze(ctx, id, "x"); return err },

		"CreateBreaker":   func() error { _, err := c.CreateBreaker(ctx, BreakerInput{}); return err },
		"Breakers":        func() error { _, err := c.Breakers(ctx, "payments"); return err },
		"Breaker":         func() error { _, err := c.Breaker(ctx, id); return err },
		"UpdateBreaker":   func() error { _, err := c.UpdateBreaker(ctx, id, BreakerInput{}); return err },
		"DeleteBreaker":   func() error { return c.DeleteBreaker(ctx, id) },
		"BreakerVersions": func() error { _, err := c.BreakerVersions(ctx, id); return err },
		"Health":          func() error { return c.Health(ctx) },
		"Ready":           func() error { return c.Ready(ctx) },
		"Metrics":         func() error { _, err := c.Metrics(ctx); return err },
		"OpenAPI":         func() error { _, err := c.OpenAPI(ctx); return err },
		"AuditKey":        func() error { _, err := c.AuditKey(ctx); return err },
		"AuditCheckpoint": func() error { _, err := c.AuditCheckpoint(ctx); return err },
		"AuditProof":      func() error { _, err := c.AuditProof(ctx, id, 3); return err },
		"AuditConsistency": func() error {
			_, err := c.AuditConsistency(ctx, 1, 2)
			return err
		},
		"AuditExport": func() error { return c.AuditExport(ctx, "ns", time.Time{}, time.Time{}, io.Discard) },
	}
	for name := range routes {
		if _, ok := calls[name]; !ok {
			t.Errorf("routes lists %s but this test does not call it: add it to calls", name)
		}
	}
	for name, call := range calls {
		mu.Lock()
		got = nil
		mu.Unlock()
		if err := call(); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		want := routes[name]
		want.Path = strings.Replace(want.Path, "{id}", id, 1)
		mu.Lock()
		if len(got) != 1 || got[0] != want {
			t.Errorf("%s sent %v, want one %s %s", name, got, want.Method, want.Path)
		}
		mu.Unlock()
	}
}
