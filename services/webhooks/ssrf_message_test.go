package webhooks_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/webhooks"
)

type failingResolver struct{ err error }

func (r failingResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return nil, r.err
}

// A webhook URL whose host does not resolve is refused with a message for
// a person: what is wrong with the name, not the resolver's own words
// ("lookup x on 10.0.0.53:53: no such host"), which showed the address of
// the DNS server the service uses.
func TestWebhookURLThatDoesNotResolveIsWordedForAPerson(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want string
	}{
		{&net.DNSError{Err: "no such host", Name: "hooks.example.com", Server: "10.0.0.53:53", IsNotFound: true},
			`url host "hooks.example.com" is not known to DNS; check the name`},
		{&net.DNSError{Err: "i/o timeout", Name: "hooks.example.com", Server: "10.0.0.53:53", IsTimeout: true},
			`url host "hooks.example.com" could not be looked up in time; try again`},
		{&net.DNSError{Err: "server misbehaving", Name: "hooks.example.com", Server: "10.0.0.53:53", IsTemporary: true},
			`url host "hooks.example.com" could not be looked up; try again`},
		{errors.New("dial udp 10.0.0.53:53: connect: network is unreachable"),
			`url host "hooks.example.com" could not be looked up; try again`},
	} {
		p := webhooks.AddressPolicy{Resolver: failingResolver{c.err}}
		err := p.ValidateWebhookURL(context.Background(), "https://hooks.example.com/in")
		e, ok := services.AsError(err)
		require.True(t, ok, "%v", err)
		require.Equal(t, services.CodeInvalid, e.Code)
		require.Equal(t, c.want, e.Message)
		require.NotContains(t, e.Message, "10.0.0.53")
	}
}
