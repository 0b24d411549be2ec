package services_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// benchSubmit measures Ledger.Submit with per new keys' first intents in each
// call: the work a request of the entries endpoint hands the ledger, without
// HTTP. Its time depends on the machine and the database; its allocations do
// not, so two commits can be compared on a busy machine by B/op and
// allocs/op (docs/benchmarks.md, "Ingest after the code's reshaping").
func benchSubmit(b *testing.B, d services.Dialect, per int) {
	st := dbtest.Open(b, d)
	ctx := context.Background()
	keys := accounts.NewKeys(st)
	_, secret, err := keys.CreateKey(ctx, accounts.CreateKeyRequest{Namespace: "bench", Name: "bot", Role: services.RoleAgent})
	if err != nil {
		b.Fatal(err)
	}
	p, err := keys.Authenticate(ctx, secret)
	if err != nil {
		b.Fatal(err)
	}
	l := services.NewLedger(st, services.LedgerConfig{})
	n := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		raws := make([][]byte, per)
		for j := range raws {
			n++
			raws[j] = []byte(fmt.Sprintf(`{"key":"refund:order-%d","type":"intent","tool":"payments.refund","effect":"keyed","timeout":300,"params":{"amount":1299,"currency":"EUR","order":"order-%d"}}`, n, n))
		}
		if _, err := l.Submit(ctx, p, raws); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSubmitBatch100Postgres is a batch of 100 new keys per call.
func BenchmarkSubmitBatch100Postgres(b *testing.B) { benchSubmit(b, services.Postgres, 100) }
func BenchmarkSubmitOnePostgres(b *testing.B)      { benchSubmit(b, services.Postgres, 1) }
