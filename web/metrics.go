package web

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/record"
	"github.com/arbiter-ledger/arbiter/services/webhooks"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the Prometheus series Arbiter exports at /metrics. Each server
// has its own registry, so tests and several servers in one process do not
// share counters.
type Metrics struct {
	reg      *prometheus.Registry
	entries  *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	sweeps   *prometheus.CounterVec
	timedOut prometheus.Counter
	groups   prometheus.Histogram
	// counts and queue are the gauges read from the database, each by one
	// query at most every MetricsRefresh, whatever the number of scrapes.
	counts *refreshed[map[string]int64]
	queue  *refreshed[webhooks.QueueStats]

	deliveries *prometheus.CounterVec
	sendTime   prometheus.Histogram
	approvals  *prometheus.HistogramVec
	lookups    *prometheus.CounterVec
	resolved   *prometheus.CounterVec
	trips      prometheus.Counter
	// The evidence log: its signed tree size, refusals to sign with a key
	// not the log's, and what the self-check found.
	logSize     prometheus.Gauge
	logRefused  prometheus.Counter
	logProblems prometheus.Gauge
	logChecks   *prometheus.CounterVec
}

// NewMetrics registers Arbiter's series. countByStatus feeds the
// arbiter_actions gauge and queue (when not nil; serve gives it
// webhooks.QueueOf) the webhook queue gauges, each read at most every
// MetricsRefresh.
func NewMetrics(countByStatus func(ctx context.Context) (map[string]int64, error),
	queue func(ctx context.Context) (webhooks.QueueStats, error)) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		entries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "arbiter_entries_total", Help: "Entries answered, by entry type and outcome.",
		}, []string{"type", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "arbiter_http_request_duration_seconds", Help: "HTTP request latency by route, method and status.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route", "method", "code"}),
		sweeps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "arbiter_sweeper_runs_total", Help: "Sweeper runs, by result (ok or error).",
		}, []string{"result"}),
		timedOut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "arbiter_sweeper_timed_out_total", Help: "Actions the sweeper timed out.",
		}),
		groups: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "arbiter_ledger_group_entries",
			Help:    "Single-entry requests written together by one group commit.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		}),
		counts: newRefreshed(countByStatus),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "arbiter_webhook_deliveries_total", Help: "Webhook delivery attempts, by result (succeeded, retrying, failed).",
		}, []string{"result"}),
		sendTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "arbiter_webhook_send_duration_seconds", Help: "Time a webhook receiver took to answer.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 15},
		}),
		approvals: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "arbiter_approval_decision_seconds",
			Help:    "Time from an intent held for approval to its decision, by result (approved, denied).",
			Buckets: []float64{1, 10, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 24 * 3600, 7 * 24 * 3600},
		}, []string{"result"}),
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "arbiter_lookup_answers_total",
			Help: "Lookup answers recorded for timed-out actions, by answer (happened, not_happened, unknown).",
		}, []string{"answer"}),
		resolved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "arbiter_timeouts_resolved_total",
			Help: "Timed-out actions resolved, by what resolved them: lookup and late_result without a person, operator by one.",
		}, []string{"by"}),
		trips: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "arbiter_breaker_trips_total",
			Help: "Freezes started by breakers that tripped (intents answered frozen are arbiter_entries_total{outcome=\"frozen\"}).",
		}),
		logSize: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "arbiter_log_checkpoint_size", Help: "Tree size of the newest checkpoint this replica signed.",
		}),
		logRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "arbiter_log_sign_refused_total",
			Help: "Passes of the evidence log that signed no checkpoint because this replica's key is not the log's.",
		}),
		logProblems: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "arbiter_log_mismatches", Help: "Changes the last self-check of the evidence log found (0: none).",
		}),
		logChecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "arbiter_log_self_checks_total", Help: "Self-checks of the evidence log, by result (ok, mismatch, error).",
		}, []string{"result"}),
	}
	for _, r := range []string{"ok", "mismatch", "error"} {
		m.logChecks.WithLabelValues(r)
	}
	for _, a := range record.Answers {
		m.lookups.WithLabelValues(string(a))
	}
	for _, by := range services.ResolvedBy {
		m.resolved.WithLabelValues(by)
	}
	for _, r := range []string{"succeeded", "retrying", "failed"} {
		m.deliveries.WithLabelValues(r)
	}
	m.sweeps.WithLabelValues("ok")
	m.sweeps.WithLabelValues("error")
	for _, r := range []string{"approved", "denied"} {
		m.approvals.WithLabelValues(r)
	}
	if queue != nil {
		m.queue = newRefreshed(queue)
	}
	m.reg.MustRegister(m.entries, m.latency, m.sweeps, m.timedOut, m.groups, m, m.deliveries, m.sendTime, m.approvals,
		m.lookups, m.resolved, m.trips, m.logSize, m.logRefused, m.logProblems, m.logChecks,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

var (
	actionsDesc     = prometheus.NewDesc("arbiter_actions", "Actions by status.", []string{"status"}, nil)
	queueDepthDesc  = prometheus.NewDesc("arbiter_webhook_queue_depth", "Webhook deliveries waiting to be sent or retried.", nil, nil)
	oldestQueueDesc = prometheus.NewDesc("arbiter_webhook_oldest_pending_seconds", "Age of the oldest pending webhook delivery.", nil, nil)
)

// ObserveGroup records the size of one group commit.
func (m *Metrics) ObserveGroup(entries int) { m.groups.Observe(float64(entries)) }

// ObserveApproval records how long an approval waited for its decision.
func (m *Metrics) ObserveApproval(result string, waited time.Duration) {
	m.approvals.WithLabelValues(result).Observe(waited.Seconds())
}

// ObserveLookup records one lookup answer.
func (m *Metrics) ObserveLookup(answer record.Answer) {
	m.lookups.WithLabelValues(string(answer)).Inc()
}

// ObserveTimeoutResolved records a timed-out action resolved, and by what.
func (m *Metrics) ObserveTimeoutResolved(by string) { m.resolved.WithLabelValues(by).Inc() }

// ObserveBreakerTrip counts a freeze a breaker started.
func (m *Metrics) ObserveBreakerTrip(*record.Freeze) { m.trips.Inc() }

// ObserveCheckpoint records a checkpoint this replica signed.
func (m *Metrics) ObserveCheckpoint(size int64) { m.logSize.Set(float64(size)) }

// ObserveSignRefused counts a checkpoint not signed: this replica's key is
// not the log's.
func (m *Metrics) ObserveSignRefused() { m.logRefused.Inc() }

// ObserveSelfCheck records a self-check of the evidence log: problems
// found, or an error.
func (m *Metrics) ObserveSelfCheck(problems int, err error) {
	switch {
	case err != nil:
		m.logChecks.WithLabelValues("error").Inc()
		return
	case problems > 0:
		m.logChecks.WithLabelValues("mismatch").Inc()
	default:
		m.logChecks.WithLabelValues("ok").Inc()
	}
	m.logProblems.Set(float64(problems))
}

// ObserveDelivery records one webhook delivery attempt.
func (m *Metrics) ObserveDelivery(result string, latency time.Duration) {
	m.deliveries.WithLabelValues(result).Inc()
	if latency > 0 {
		m.sendTime.Observe(latency.Seconds())
	}
}

// Describe and Collect make Metrics a collector of the gauges read from the
// database: actions by status and the webhook queue. A scrape answers from
// the last reading while it is younger than MetricsRefresh, so /metrics,
// which anyone may ask for, costs the database one query per gauge per
// interval however often it is asked.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- actionsDesc
	ch <- queueDepthDesc
	ch <- oldestQueueDesc
}

func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	if m.queue != nil {
		if q, err := m.queue.get(); err != nil {
			ch <- prometheus.NewInvalidMetric(queueDepthDesc, err)
		} else {
			ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(q.Pending))
			ch <- prometheus.MustNewConstMetric(oldestQueueDesc, prometheus.GaugeValue, q.OldestPendingAge.Seconds())
		}
	}
	if m.counts == nil {
		return
	}
	counts, err := m.counts.get()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(actionsDesc, err)
		return
	}
	for st, n := range counts {
		ch <- prometheus.MustNewConstMetric(actionsDesc, prometheus.GaugeValue, float64(n), st)
	}
}

// ObserveSweep records one sweeper run.
func (m *Metrics) ObserveSweep(n int, err error) {
	if err != nil {
		m.sweeps.WithLabelValues("error").Inc()
		return
	}
	m.sweeps.WithLabelValues("ok").Inc()
	m.timedOut.Add(float64(n))
}

func (m *Metrics) handler() echo.HandlerFunc {
	return echo.WrapHandler(m.Handler())
}

// Handler serves the metrics on a listener of their own (ARBITER_METRICS_ADDR).
// A scrape whose database gauges cannot be read is answered 503 with
// Retry-After, as every other request is during a database outage:
// promhttp answers a failed gathering with 500.
func (m *Metrics) Handler() http.Handler {
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(unavailableOn500{w}, r)
	})
}

// unavailableOn500 turns promhttp's 500 for a failed gathering into 503.
type unavailableOn500 struct{ http.ResponseWriter }

func (u unavailableOn500) WriteHeader(code int) {
	if code == http.StatusInternalServerError {
		u.Header().Set("Retry-After", "5")
		code = http.StatusServiceUnavailable
	}
	u.ResponseWriter.WriteHeader(code)
}

func (u unavailableOn500) Unwrap() http.ResponseWriter { return u.ResponseWriter }

func (m *Metrics) observe(route, method string, status int, d time.Duration) {
	m.latency.WithLabelValues(route, methodLabel(method), strconv.Itoa(status)).Observe(d.Seconds())
}

// Labels come from a fixed vocabulary, never from what a client sent, so a
// client cannot add series: an entry type or a method Arbiter does not
// know is counted as "other".

func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return method
	}
	return "other"
}

// ObserveEntry counts one answered entry by its type and outcome.
func (m *Metrics) ObserveEntry(typ record.EntryType, outcome record.Outcome) {
	t := "other"
	if slices.Contains(record.AgentEntryTypes, typ) {
		t = string(typ)
	}
	o := "other"
	if slices.Contains(record.Outcomes, outcome) {
		o = string(outcome)
	}
	m.entries.WithLabelValues(t, o).Inc()
}
