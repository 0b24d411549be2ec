package policies

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
)

// BenchmarkTenConditions: one intent against ten conditions that are all
// false, the work Require does per first intent in the bench/run-limit
// policies section.
func BenchmarkTenConditions(b *testing.B) {
	var prgs []*compiled
	for i := range 10 {
		prg, err := compile(fmt.Sprintf("params.n > %d && agent != 'nobody'", 1000+i))
		if err != nil {
			b.Fatal(err)
		}
		prgs = append(prgs, &compiled{prg: prg})
	}
	raw := json.RawMessage(`{"n":1}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		f := Facts{Tool: "bench.write", Effect: "keyed", Agent: "bench", Namespace: "bench"}
		_ = json.Unmarshal(raw, &f.Params)
		act := f.activation()
		for _, c := range prgs {
			if ok, err := evalIn(ctx, c.prg, act); ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	}
}
