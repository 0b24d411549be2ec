package sso_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/sso"
)

func TestRuleGrants(t *testing.T) {
	t.Parallel()
	rule, err := sso.ParseRule("groups", []string{"arbiter-admins=admin", "payments-ops=operator:payments", "readers=viewer:*",
		"payments-readers=viewer:payments", "/org/ops=operator"})
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		claims map[string]any
		want   accounts.Grants
	}{
		{"no claim", map[string]any{}, accounts.Grants{Namespaces: map[string]services.Role{}}},
		{"no match", map[string]any{"groups": []any{"engineering"}}, accounts.Grants{Namespaces: map[string]services.Role{}}},
		{"operator in one", map[string]any{"groups": []any{"payments-ops"}}, accounts.Grants{Namespaces: map[string]services.Role{"payments": services.RoleOperator}}},
		{"stronger wins", map[string]any{"groups": []any{"payments-readers", "payments-ops", "readers"}},
			accounts.Grants{Namespaces: map[string]services.Role{"payments": services.RoleOperator, "*": services.RoleViewer}}},
		{"admin", map[string]any{"groups": []any{"readers", "arbiter-admins"}}, accounts.Grants{Admin: true}},
		{"one string", map[string]any{"groups": "/org/ops"}, accounts.Grants{Namespaces: map[string]services.Role{"*": services.RoleOperator}}},
		{"case matters", map[string]any{"groups": []any{"Arbiter-Admins"}}, accounts.Grants{Namespaces: map[string]services.Role{}}},
	} {
		require.Equal(t, tc.want, rule.Grants(tc.claims), tc.name)
	}

	nested, err := sso.ParseRule("realm_access.roles", []string{"ops=operator"})
	require.NoError(t, err)
	require.Equal(t, accounts.Grants{Namespaces: map[string]services.Role{"*": services.RoleOperator}},
		nested.Grants(map[string]any{"realm_access": map[string]any{"roles": []any{"ops"}}}))
}

func TestParseRuleRefuses(t *testing.T) {
	t.Parallel()
	for _, entries := range [][]string{nil, {"ops"}, {"=admin"}, {"ops=root"}, {"ops=admin:payments"}, {"ops=operator:"}} {
		_, err := sso.ParseRule("groups", entries)
		require.Error(t, err, "%q", entries)
	}
	_, err := sso.ParseRule("", []string{"ops=admin"})
	require.Error(t, err)
}
