package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/client"
)

// TestSharedVectorsAnswers: Guard does with each answer to an intent what
// sdk/vectors.json says (run, return the saved result, compensate, or the
// named error), as the Python and TypeScript SDKs' suites check for theirs.
// Each row is answered by a canned server, so that every row is reached;
// the guard tests against the real server cover the same answers in their
// context.
func TestSharedVectorsAnswers(t *testing.T) {
	raw, err := os.ReadFile("../sdk/vectors.json")
	require.NoError(t, err)
	var v struct {
		Answers struct {
			Cases []struct {
				Outcome             string `json:"outcome"`
				Code                string `json:"code"`
				Status              int    `json:"status"`
				Transport           string `json:"transport"`
				Does                string `json:"does"`
				Error               string `json:"error"`
				WithoutCompensation string `json:"without_compensation"`
			} `json:"cases"`
		} `json:"answers"`
	}
	require.NoError(t, json.Unmarshal(raw, &v))
	require.GreaterOrEqual(t, len(v.Answers.Cases), 13)

	is := map[string]func(error) bool{
		"in_progress":      func(err error) bool { var e *client.InProgressError; return errors.As(err, &e) },
		"held":             func(err error) bool { var e *client.HeldError; return errors.As(err, &e) },
		"pending_approval": func(err error) bool { var e *client.PendingApprovalError; return errors.As(err, &e) },
		"denied":           func(err error) bool { var e *client.DeniedError; return errors.As(err, &e) },
		"key_reused":       func(err error) bool { return client.IsCode(err, "key_reused") },
		"invalid":          func(err error) bool { return client.IsCode(err, "invalid") },
		"api":              func(err error) bool { var e *client.Error; return errors.As(err, &e) && !client.IsUnavailable(err) },
		"unreachable":      func(err error) bool { return errors.Is(err, client.ErrUnreachable) },
		"compensation_requested": func(err error) bool {
			return errors.Is(err, client.ErrCompensationRequested)
		},
	}
	action := `{"id":"01930000-0000-7000-8000-000000000001","namespace":"sdk","key":"k","tool":"t","effect":"keyed",
		"status":%q,"attempt":1,"version":2,"lease_until":null,"reference":null,"agent":null,"params":{},
		"result":{"saved":true},"external_ref":"re_1","created_at":"2026-12-01T10:00:00Z","updated_at":"2026-12-01T10:00:00Z",
		"approval":null,"reconciliation":null}`
	statusOf := map[string]string{"proceed": "in_progress", "replay": "succeeded", "compensate": "compensation_requested",
		"in_progress": "in_progress", "held": "timed_out", "pending_approval": "awaiting_approval", "denied": "denied"}

	for _, c := range v.Answers.Cases {
		name := c.Outcome + c.Code + c.Transport
		t.Run(name, func(t *testing.T) {
			var intents atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var e struct{ Type string }
				_ = json.NewDecoder(r.Body).Decode(&e)
				w.Header().Set("Content-Type", "application/json")
				switch {
				case c.Transport == "status_503":
					w.WriteHeader(http.StatusServiceUnavailable)
					fmt.Fprint(w, `{"error":{"code":"unavailable","message":"the database is unreachable"}}`)
				case c.Transport == "status_401":
					w.WriteHeader(http.StatusUnauthorized)
					fmt.Fprint(w, `{"error":{"code":"unauthorized","message":"unknown API key"}}`)
				case e.Type != "intent":
					// Outcome reports, compensation reports, heartbeats.
					fmt.Fprintf(w, `{"key":"k","type":%q,"outcome":"recorded","attempt":1,"lease_until":null,"action":`+action+`,"error":null}`,
						e.Type, "succeeded")
				case c.Outcome == "rejected":
					intents.Add(1)
					w.WriteHeader(c.Status)
					fmt.Fprintf(w, `{"key":"k","type":"intent","outcome":"rejected","attempt":null,"lease_until":null,"action":null,
						"error":{"code":%q,"message":"refused"}}`, c.Code)
				default:
					intents.Add(1)
					w.WriteHeader(c.Status)
					lease := "null"
					if c.Outcome == "proceed" || c.Outcome == "compensate" {
						lease = `"` + time.Now().Add(time.Minute).UTC().Format(time.RFC3339Nano) + `"`
					}
					fmt.Fprintf(w, `{"key":"k","type":"intent","outcome":%q,"attempt":1,"lease_until":%s,"action":`+action+`,"error":null}`,
						c.Outcome, lease, statusOf[c.Outcome])
				}
			}))
			defer srv.Close()
			url := srv.URL
			if c.Transport == "connection_refused" {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				require.NoError(t, err)
				url = "http://" + l.Addr().String()
				l.Close()
			}
			ac := client.New(url, "ak_test", client.WithBackoff(time.Millisecond, 5*time.Millisecond))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			ran := false
			spec := client.GuardSpec{Key: "k", Tool: "t", Effect: client.EffectKeyed, Wait: 50 * time.Millisecond}
			out, err := ac.Guard(ctx, spec, func(context.Context, client.Attempt) (any, string, error) {
				ran = true
				return map[string]bool{"ran": true}, "re_2", nil
			})
			switch c.Does {
			case "run":
				require.NoError(t, err)
				require.True(t, ran && out.Ran)
			case "return_saved":
				require.NoError(t, err)
				require.False(t, ran || out.Ran)
				require.JSONEq(t, `{"saved":true}`, string(out.Action.Result))
			case "compensate":
				require.False(t, ran)
				require.True(t, is[c.WithoutCompensation](err), "without a compensate function: %v", err)
				undone := false
				spec.Compensate = func(context.Context, client.Attempt) (string, error) { undone = true; return "rev_1", nil }
				_, err = ac.Guard(ctx, spec, func(context.Context, client.Attempt) (any, string, error) {
					t.Fatal("ran instead of compensating")
					return nil, "", nil
				})
				require.NoError(t, err)
				require.True(t, undone)
			default:
				require.Error(t, err)
				require.False(t, ran, "nothing runs on %s", name)
				require.True(t, is[c.Error](err), "%s: want %s, got %T %v", name, c.Error, err, err)
			}
		})
	}
}
