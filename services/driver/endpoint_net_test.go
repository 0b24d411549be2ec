package driver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEndpointNets: a batch's attempts fold into what recording them one
// after another would do to each endpoint.
func TestEndpointNets(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	p := func(ep string, s int, c EndpointChange, why string) *DeliveryRecordAttemptParams {
		return &DeliveryRecordAttemptParams{EndpointID: ep, Now: at(s), Endpoint: c, DisableWhy: why}
	}
	ptr := func(t time.Time) *time.Time { return &t }
	nets := EndpointNets([]*DeliveryRecordAttemptParams{
		p("fail-only", 1, EndpointFailing, ""), p("fail-only", 2, EndpointFailing, ""),
		p("ok-last", 1, EndpointFailing, ""), p("ok-last", 2, EndpointSucceeded, ""),
		p("fail-after-ok", 1, EndpointFailing, ""), p("fail-after-ok", 2, EndpointSucceeded, ""),
		p("fail-after-ok", 3, EndpointFailing, ""), p("fail-after-ok", 4, EndpointFailing, ""),
		p("gone", 1, EndpointSucceeded, ""), p("gone", 2, EndpointDisable, "first"), p("gone", 3, EndpointDisable, "second"),
	})
	require.Equal(t, []*EndpointNet{
		{EndpointID: "fail-only", FailingSince: ptr(at(1))},
		{EndpointID: "ok-last", Reset: true},
		{EndpointID: "fail-after-ok", Reset: true, FailingSince: ptr(at(3))},
		{EndpointID: "gone", Reset: true, DisableWhy: "second", DisableAt: at(3)},
	}, nets)
}
