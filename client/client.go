package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client talks to one Arbiter server with one API key. It is safe for
// concurrent use.
type Client struct {
	base         string
	apiKey       string
	http         *http.Client
	timeout      time.Duration
	userAgent    string
	dashboard    string
	reportBudget time.Duration
	backoff      backoff
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sends requests with h instead of a client of the package's
// own (for proxies, TLS settings or instrumentation).
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithTimeout bounds each request (default 30 s; 0 means no bound besides
// the context). A request that runs out of time counts as Arbiter being
// unavailable.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithUserAgent names the caller in the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// WithDashboardURL is where people open the dashboard, when it is not the
// API's base URL (say, behind a different host name). Links in errors such
// as [HeldError] point there.
func WithDashboardURL(u string) Option {
	return func(c *Client) { c.dashboard = strings.TrimRight(u, "/") }
}

// WithReportBudget bounds how long [Client.Guard] keeps retrying an outcome
// report while Arbiter cannot be reached (default 2 minutes). Past it the
// report is given up, and the action times out and waits for an operator.
func WithReportBudget(d time.Duration) Option { return func(c *Client) { c.reportBudget = d } }

// WithBackoff sets the first and the largest pause between retries of an
// outcome report, of an intent waiting for another attempt, and of the
// worker's polls (defaults 200 ms and 10 s). Each pause is drawn at random
// up to the exponential bound ("full jitter"), so many agents that failed
// together do not retry together.
func WithBackoff(first, largest time.Duration) Option {
	return func(c *Client) { c.backoff = backoff{first: first, largest: largest} }
}

// New returns a client for the server at baseURL (for example
// "http://127.0.0.1:8080") that authenticates with apiKey.
func New(baseURL, apiKey string, opts ...Option) *Client {
	c := &Client{
		base:         strings.TrimRight(baseURL, "/"),
		apiKey:       apiKey,
		http:         http.DefaultClient,
		timeout:      30 * time.Second,
		userAgent:    "arbiter-go-client",
		reportBudget: 2 * time.Minute,
		backoff:      backoff{first: 200 * time.Millisecond, largest: 10 * time.Second},
	}
	for _, o := range opts {
		o(c)
	}
	if c.dashboard == "" {
		c.dashboard = c.base
	}
	return c
}

// ActionURL is the dashboard page of the action with the given id.
func (c *Client) ActionURL(id string) string {
	return c.dashboard + "/actions/" + url.PathEscape(id)
}

// call sends the request of the client method name and decodes a successful
// JSON answer into out. Any other answer is an *Error.
func (c *Client) call(ctx context.Context, name, id string, query url.Values, in, out any) error {
	status, body, err := c.send(ctx, name, id, query, in)
	if err != nil {
		return err
	}
	if status < 200 || status > 299 {
		return answerError(status, body)
	}
	if out == nil || len(body) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("arbiter: %s: decode the answer: %w", name, err)
	}
	return nil
}

// send performs the request of the client method name, as listed in routes,
// and returns the status and the body whatever the status.
func (c *Client) send(ctx context.Context, name, id string, query url.Values, in any) (int, []byte, error) {
	return c.sendTo(ctx, name, id, query, in, nil, c.timeout, nil)
}

// sendWith is send with extra request headers and a timeout of its own (0:
// none but ctx's).
func (c *Client) sendWith(ctx context.Context, name, id string, query url.Values, in any, header http.Header,
	timeout time.Duration) (int, []byte, error) {
	return c.sendTo(ctx, name, id, query, in, header, timeout, nil)
}

// sendTo is sendWith that copies a successful answer's body to sink, when
// not nil, rather than returning it.
func (c *Client) sendTo(ctx context.Context, name, id string, query url.Values, in any, header http.Header,
	timeout time.Duration, sink io.Writer) (int, []byte, error) {
	r, ok := routes[name]
	if !ok {
		panic("client: no route for method " + name)
	}
	path := r.Path
	if strings.Contains(path, "{id}") {
		if id == "" {
			return 0, nil, &Error{Code: "invalid", Message: name + ": the id is empty"}
		}
		path = strings.Replace(path, "{id}", url.PathEscape(id), 1)
	}
	target := c.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, nil, fmt.Errorf("arbiter: %s: encode the request: %w", name, err)
		}
		body = bytes.NewReader(b)
	}
	rctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(rctx, r.Method, target, body)
	if err != nil {
		return 0, nil, fmt.Errorf("arbiter: %s: %w", name, err)
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	req.Header.Set("User-Agent", c.userAgent)
	for k, vs := range header {
		req.Header[k] = vs
	}
	res, err := c.http.Do(req)
	if err != nil {
		return 0, nil, c.transportError(ctx, r.Method, path, err)
	}
	defer res.Body.Close()
	if sink != nil && res.StatusCode >= 200 && res.StatusCode <= 299 {
		if _, err := io.Copy(sink, res.Body); err != nil {
			return 0, nil, c.transportError(ctx, r.Method, path, err)
		}
		return res.StatusCode, nil, nil
	}
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, nil, c.transportError(ctx, r.Method, path, err)
	}
	return res.StatusCode, raw, nil
}

// transportError tells the caller's own cancellation apart from Arbiter
// being unreachable: only the latter is worth retrying.
func (c *Client) transportError(ctx context.Context, method, path string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("arbiter: %s %s: %w", method, path, context.Cause(ctx))
	}
	return &NetworkError{Method: method, Path: path, Err: err}
}
