package services_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

func TestSmoke(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		keys := services.NewKeys(st)
		m, secret, err := keys.CreateKey(ctx, services.CreateKeyRequest{Namespace: "payments", Name: "refund-bot", Role: services.RoleAgent})
		require.NoError(t, err)
		p, err := keys.Authenticate(ctx, secret)
		require.NoError(t, err)
		require.Equal(t, m.ID, p.ID)
		l := services.NewLedger(st)
		res, err := l.Submit(ctx, p, [][]byte{
			[]byte(`{"key":"refund:1","type":"intent","tool":"payments.refund","effect":"keyed","params":{"b":1,"a":[1,2]}}`),
			[]byte(`{"key":"refund:1","type":"intent","tool":"payments.refund","effect":"keyed","params":{"a":[1,2],"b":1.0}}`),
			[]byte(`{"key":"refund:1","type":"succeeded","attempt":1,"result":{"id":"re_1"}}`),
			[]byte(`{"key":"refund:1","type":"intent","tool":"payments.refund","params":{"a":[1,2],"b":2}}`),
		})
		require.NoError(t, err)
		require.Equal(t, "proceed", res[0].Outcome)
		require.Equal(t, "in_progress", res[1].Outcome)
		require.Equal(t, "recorded", res[2].Outcome, "%+v", res[2].Error)
		require.Equal(t, "rejected", res[3].Outcome)
		require.Equal(t, "key_reused", res[3].Error.Code)
		es, err := l.Entries(ctx, p, res[0].Action.ID)
		require.NoError(t, err)
		require.Len(t, es, 3)
		a, err := l.Action(ctx, p, res[0].Action.ID)
		require.NoError(t, err)
		require.Equal(t, services.StatusSucceeded, a.Status)
		require.JSONEq(t, `{"id":"re_1"}`, string(a.Result))
		t.Logf("%+v", a)
	})
}
