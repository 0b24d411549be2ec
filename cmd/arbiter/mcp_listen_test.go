package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// `mcp-gateway --listen` serves hosts on loopback only, unless told
// --allow-remote and given a bearer token (--token or ARBITER_MCP_TOKEN);
// a non-loopback address with no auth was accepted without a word.
func TestMCPGatewayListenRefusesRemoteWithoutAuth(t *testing.T) {
	t.Parallel()
	token := strings.Repeat("t", 32)
	for _, c := range []struct {
		addr   string
		remote bool
		token  string
		ok     bool
	}{
		{"127.0.0.1:8090", false, "", true},
		{"[::1]:8090", false, "", true},
		{"localhost:8090", false, "", true},
		{"127.0.0.1:8090", false, token, true},
		{":8090", false, "", false},
		{"0.0.0.0:8090", false, "", false},
		{"192.0.2.10:8090", false, "", false},
		{"gateway.example.com:8090", false, "", false},
		{"0.0.0.0:8090", true, "", false},
		{"0.0.0.0:8090", false, token, false},
		{"0.0.0.0:8090", true, "short", false},
		{"0.0.0.0:8090", true, token, true},
		{"[::]:8090", true, token, true},
		{"no-port", false, "", false},
	} {
		err := checkListen(c.addr, c.remote, c.token)
		if c.ok {
			require.NoError(t, err, "%+v", c)
		} else {
			require.Error(t, err, "%+v", c)
		}
	}
}

// With a token, every request to /mcp carries it as a bearer token.
func TestMCPGatewayListenRequiresTheBearerToken(t *testing.T) {
	t.Parallel()
	token := strings.Repeat("t", 32)
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h := requireToken(inner, token)
	for _, c := range []struct {
		header string
		status int
	}{
		{"", http.StatusUnauthorized},
		{"Bearer wrong", http.StatusUnauthorized},
		{"Basic " + token, http.StatusUnauthorized},
		{"Bearer " + token + "x", http.StatusUnauthorized},
		{"Bearer " + token, http.StatusNoContent},
		{"bearer " + token, http.StatusNoContent},
	} {
		req := httptest.NewRequest("POST", "/mcp", nil)
		if c.header != "" {
			req.Header.Set("Authorization", c.header)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, c.status, rec.Code, c.header)
	}
}
