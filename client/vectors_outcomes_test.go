package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/client"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

type outcomeCase struct {
	Raised            string `json:"raised"`
	Note              string `json:"note"`
	Status            int    `json:"status"`
	ToolMaps          []int  `json:"tool_maps"`
	Retriable         bool   `json:"retriable"`
	Classifier        string `json:"classifier"`
	Records           string `json:"records"`
	RetriableRecorded bool   `json:"retriable_recorded"`
}

func readOutcomeVectors(t *testing.T) (def string, cases []outcomeCase) {
	t.Helper()
	raw, err := os.ReadFile("../sdk/vectors.json")
	require.NoError(t, err)
	var v struct {
		Outcomes struct {
			Default string        `json:"default"`
			Cases   []outcomeCase `json:"cases"`
		} `json:"outcomes"`
	}
	require.NoError(t, json.Unmarshal(raw, &v))
	require.GreaterOrEqual(t, len(v.Outcomes.Cases), 12)
	return v.Outcomes.Default, v.Outcomes.Cases
}

// timeoutError is a net.Error that timed out, as a client's read deadline
// gives.
type timeoutError struct{}

func (timeoutError) Error() string   { return "read timed out after 30 s" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// refusedError is what dialling a port nobody listens on returns.
func refusedError(t *testing.T) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	_, err = net.Dial("tcp", addr)
	require.Error(t, err)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	return err
}

// goErrors are the Go errors of each kind the vectors name, with the
// prefix the entry's error gets.
func goErrors(t *testing.T, c outcomeCase) (errs []error, prefix string) {
	switch c.Raised {
	case "timeout":
		return []error{
			context.DeadlineExceeded,
			fmt.Errorf("calling the provider: %w", context.DeadlineExceeded),
			timeoutError{},
			&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded},
			&url.Error{Op: "Post", URL: "https://pay.example.com/refunds", Err: timeoutError{}},
		}, "timeout: "
	case "connection_lost":
		return []error{
			io.ErrUnexpectedEOF,
			&url.Error{Op: "Post", URL: "https://pay.example.com/refunds", Err: io.EOF},
			&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)},
			&net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)},
		}, "connection lost: "
	case "connection_refused":
		return []error{refusedError(t), &url.Error{Op: "Post", URL: "https://pay.example.com/refunds", Err: refusedError(t)}},
			""
	case "not_done":
		return []error{
			&client.NotDone{Err: errors.New("card declined"), Retriable: c.Retriable},
			fmt.Errorf("refund: %w", &client.NotDone{Err: errors.New("card declined"), Retriable: c.Retriable}),
		}, ""
	case "http_status":
		return []error{&client.HTTPStatusError{StatusCode: c.Status, Message: "refused"}}, ""
	case "other":
		return []error{errors.New("nil map write in the tool"), fmt.Errorf("wrapped: %w", errors.New("odd"))}, ""
	}
	t.Fatalf("vectors name a kind this test does not know: %q", c.Raised)
	return nil, ""
}

// TestSharedVectorsOutcomes: what a guard records for the error the
// guarded call returned is what sdk/vectors.json says, for every case and
// every Go error of its kind, against a real server on both databases.
func TestSharedVectorsOutcomes(t *testing.T) {
	t.Parallel()
	def, cases := readOutcomeVectors(t)
	assert.Equal(t, string(client.ClassOutcomeUnknown), def)
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		c := e.agent("payments")
		ctx := context.Background()
		n := 0
		for i, vc := range cases {
			errs, prefix := goErrors(t, vc)
			for j, fnErr := range errs {
				name := fmt.Sprintf("case %d (%s %s %d %v) error %d %T", i, vc.Raised, vc.Classifier, vc.Status, vc.Retriable, j, fnErr)
				n++
				spec := refundSpec(fmt.Sprintf("vec-%d", n), 10)
				spec.NotDoneStatuses = vc.ToolMaps
				switch vc.Classifier {
				case "":
				case "raises":
					spec.Classify = func(error) client.Classification { panic("classifier bug") }
				default:
					class := client.Classification(vc.Classifier)
					spec.Classify = func(error) client.Classification { return class }
				}
				_, err := c.Guard(ctx, spec, func(context.Context, client.Attempt) (any, string, error) {
					return nil, "", fnErr
				})
				require.Error(t, err, name)
				assert.ErrorIs(t, err, fnErr, name)
				types, entries := timeline(t, c, spec.Key)
				require.Equal(t, []string{"intent", vc.Records}, types, name)
				var p struct {
					Error     string `json:"error"`
					Retriable *bool  `json:"retriable"`
				}
				require.NoError(t, json.Unmarshal(entries[1].Payload, &p), name)
				assert.Equal(t, prefix+fnErr.Error(), p.Error, name)
				var unknown *client.OutcomeUnknownError
				if vc.Records == "outcome_unknown" {
					require.ErrorAs(t, err, &unknown, name)
					assert.True(t, unknown.Reported, name)
					require.NotNil(t, unknown.Action, name)
					assert.Equal(t, client.StatusTimedOut, unknown.Action.Status, name)
					continue
				}
				assert.False(t, errors.As(err, &unknown), name)
				require.NotNil(t, p.Retriable, name)
				assert.Equal(t, vc.RetriableRecorded || (vc.Raised == "connection_refused" && vc.Retriable), *p.Retriable, name)
			}
		}
	})
}

// TestDefaultClassifyVectors: the exported default rule gives the
// vectors' answer for every case without a classifier of its own.
func TestDefaultClassifyVectors(t *testing.T) {
	t.Parallel()
	_, cases := readOutcomeVectors(t)
	for _, vc := range cases {
		if vc.Classifier != "" {
			continue
		}
		errs, _ := goErrors(t, vc)
		for _, err := range errs {
			want := client.Classification(vc.Records)
			if vc.Records == "failed" && (vc.RetriableRecorded || vc.Retriable) {
				want = client.ClassFailedRetriable
			}
			assert.Equal(t, want, client.DefaultClassify(err, vc.ToolMaps), "%s %T %v", vc.Raised, err, err)
		}
	}
	// Unknown says "may have happened" even around a not-done error.
	assert.Equal(t, client.ClassOutcomeUnknown, client.DefaultClassify(client.Unknown(&client.NotDone{Err: errors.New("x")}), nil))
	assert.Equal(t, client.ClassFailedRetriable, client.DefaultClassify(client.Retriable(errors.New("busy")), nil))
}

// TestGuardTimeoutIsHeldNotFinished: a guarded call that timed out is
// recorded outcome_unknown: the action is timed_out at once, the next call
// for the key gets a *HeldError (not a *FinishedError) and nothing runs
// again, and a person sees the error.
func TestGuardTimeoutIsHeldNotFinished(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		c := e.agent("payments")
		ctx := context.Background()
		spec := refundSpec("timeout", 10)
		_, err := c.Guard(ctx, spec, func(ctx context.Context, a client.Attempt) (any, string, error) {
			call, cancel := context.WithTimeout(ctx, time.Millisecond)
			defer cancel()
			<-call.Done()
			return nil, "", fmt.Errorf("POST /refunds: %w", call.Err())
		})
		require.ErrorIs(t, err, context.DeadlineExceeded)

		a, err := c.ActionByKey(ctx, spec.Key)
		require.NoError(t, err)
		assert.Equal(t, client.StatusTimedOut, a.Status, "timed out at once, not after the 30 s lease")
		types, entries := timeline(t, c, spec.Key)
		require.Equal(t, []string{"intent", "outcome_unknown"}, types)
		assert.Contains(t, string(entries[1].Payload), "timeout: POST /refunds: context deadline exceeded")

		runs := 0
		_, err = c.Guard(ctx, spec, func(context.Context, client.Attempt) (any, string, error) {
			runs++
			return nil, "", nil
		})
		var held *client.HeldError
		require.ErrorAs(t, err, &held)
		var finished *client.FinishedError
		assert.False(t, errors.As(err, &finished))
		assert.Equal(t, a.ID, held.ActionID)
		assert.Zero(t, runs)
		assert.True(t, strings.Contains(err.Error(), "unknown"), err.Error())
	})
}

// TestGuardCompensationOutcomes: a compensation's error follows the same
// rule: one that proves nothing was undone is compensation_failed (and the
// next call compensates again), any other leaves the undo unknown: nothing
// is reported, so that a person decides instead of a blind second undo.
func TestGuardCompensationOutcomes(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		c := e.agent("payments")
		op := e.operator("payments")
		ctx := context.Background()
		spec := refundSpec("comp", 10)
		spec.Timeout = 30 * time.Second
		out, err := c.Guard(ctx, spec, func(context.Context, client.Attempt) (any, string, error) { return nil, "re_1", nil })
		require.NoError(t, err)
		_, err = op.Decide(ctx, out.Action.ID, client.Decision{Decision: client.DecisionCompensate, Reason: "wrong order"})
		require.NoError(t, err)

		spec.Compensate = func(context.Context, client.Attempt) (string, error) {
			return "", &client.NotDone{Err: errors.New("reversal refused"), Retriable: true}
		}
		_, err = c.Guard(ctx, spec, nil)
		require.Error(t, err)
		types, entries := timeline(t, c, spec.Key)
		assert.Equal(t, "compensation_failed", types[len(types)-1])
		assert.JSONEq(t, `{"type":"compensation_failed","error":"reversal refused","retriable":true}`, string(entries[len(entries)-1].Payload))

		spec.Compensate = func(context.Context, client.Attempt) (string, error) {
			return "", fmt.Errorf("POST /reversals: %w", context.DeadlineExceeded)
		}
		_, err = c.Guard(ctx, spec, nil)
		var unknown *client.OutcomeUnknownError
		require.ErrorAs(t, err, &unknown)
		assert.True(t, unknown.Compensation)
		types, entries = timeline(t, c, spec.Key)
		assert.Equal(t, []string{"intent", "note"}, types[len(types)-2:], "no compensation_failed for an undo that may have happened")
		assert.Contains(t, string(entries[len(entries)-1].Payload), "compensation outcome unknown: timeout: POST /reversals: context deadline exceeded")
	})
}

// TestPendingApprovalErrorShowsPolicyErrors: a policy whose condition
// failed at run time held the action; the error says why.
func TestPendingApprovalErrorShowsPolicyErrors(t *testing.T) {
	t.Parallel()
	url := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"key":"refund:1","type":"intent","outcome":"pending_approval","attempt":0,
			"action":{"id":"01J0000000000000000000000A","key":"refund:1","tool":"payments.refund","status":"awaiting_approval",
			"approval":{"required":1,"approvals":[],"expires_at":"2030-01-01T00:00:00Z","policies":[
				{"id":"p1","name":"big refunds","version":2,"error":"no such key: amount"},
				{"id":"p2","name":"all refunds","version":1,"error":null}]}}}`)
	})
	c := client.New(url, "ak_x")
	_, err := c.Guard(context.Background(), refundSpec("1", 10), func(context.Context, client.Attempt) (any, string, error) {
		t.Fatal("ran while awaiting approval")
		return nil, "", nil
	})
	var pending *client.PendingApprovalError
	require.ErrorAs(t, err, &pending)
	assert.Equal(t, []string{`policy "big refunds" could not be evaluated, so the action was held: no such key: amount`}, pending.PolicyErrors)
	assert.Contains(t, err.Error(), "no such key: amount")
	assert.NotContains(t, err.Error(), "all refunds")
}
