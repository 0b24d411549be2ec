package client

import (
	"context"
	"encoding/json"
)

// Health reports whether the server process is up.
func (c *Client) Health(ctx context.Context) error {
	return c.call(ctx, "Health", "", nil, nil, nil)
}

// Ready reports whether the server can serve: its database answers and the
// schema is current. A server that is not ready answers 503, an error for
// which IsUnavailable is true.
func (c *Client) Ready(ctx context.Context) error {
	return c.call(ctx, "Ready", "", nil, nil, nil)
}

// Metrics returns the server's Prometheus metrics in the text format.
func (c *Client) Metrics(ctx context.Context) ([]byte, error) {
	return c.raw(ctx, "Metrics")
}

// OpenAPI returns the OpenAPI 3.1 document the server implements.
func (c *Client) OpenAPI(ctx context.Context) (json.RawMessage, error) {
	return c.raw(ctx, "OpenAPI")
}

func (c *Client) raw(ctx context.Context, name string) ([]byte, error) {
	status, body, err := c.send(ctx, name, "", nil, nil)
	if err != nil {
		return nil, err
	}
	if status < 200 || status > 299 {
		return nil, answerError(status, body)
	}
	return body, nil
}
