package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestServeSSOSettings: settings that would leave nobody able to sign in,
// or a mapping that cannot be read, stop the start with the setting named.
func TestServeSSOSettings(t *testing.T) {
	t.Parallel()
	base := func() serveCmd {
		return serveCmd{SweepInterval: 1, LocalPasswords: true, OIDCRoleClaim: "groups"}
	}
	s := base()
	require.NoError(t, s.validate())

	s = base()
	s.LocalPasswords = false
	require.ErrorContains(t, s.validate(), "ARBITER_OIDC_ISSUER")

	s = base()
	s.OIDCIssuer = "https://id.example.com"
	s.OIDCGroups = []string{"ops=operator"}
	require.ErrorContains(t, s.validate(), "ARBITER_OIDC_CLIENT_ID")

	s.OIDCClientID = "arbiter"
	require.NoError(t, s.validate())
	s.OIDCGroups = []string{"ops=root"}
	require.ErrorContains(t, s.validate(), "ARBITER_OIDC_GROUPS")
	s.OIDCGroups = nil
	require.ErrorContains(t, s.validate(), "ARBITER_OIDC_GROUPS")
}
