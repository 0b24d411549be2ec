package client_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// newFakeServer serves h and returns its URL, for answers a real server
// does not give on demand (a proxy's 502).
func newFakeServer(t *testing.T, h http.HandlerFunc) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
