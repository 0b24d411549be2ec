package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"code.dny.dev/ssrf"
	"github.com/arbiter-ledger/arbiter/services"
)

// Webhook URLs are checked twice against server-side request forgery: when an
// endpoint is saved (the host must resolve only to public addresses) and at
// every send, on the address actually dialled, so a DNS answer that changes
// after the check (rebinding) does not reach an internal service.

// AddressPolicy says which addresses webhooks may reach.
type AddressPolicy struct {
	// AllowPrivate lets webhooks reach loopback, private, link-local and
	// unspecified addresses (ARBITER_WEBHOOK_ALLOW_PRIVATE=true): for tests
	// and on-premises receivers.
	AllowPrivate bool
	// Resolver looks up host names; nil means the system's.
	Resolver Resolver
}

// Resolver looks up the addresses of a host.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

func (p AddressPolicy) resolver() Resolver {
	if p.Resolver != nil {
		return p.Resolver
	}
	return net.DefaultResolver
}

// blocked reports why ip may not be reached, or "".
func (p AddressPolicy) blocked(ip netip.Addr) string {
	if p.AllowPrivate {
		return ""
	}
	ip = ip.Unmap()
	switch {
	case ip.IsLoopback():
		return "loopback"
	case ip.IsPrivate():
		return "private"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "link-local"
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return "multicast"
	}
	if guardian.SafeAddr(ip) != nil {
		return "reserved"
	}
	return ""
}

// guardian holds the special-purpose ranges of the IANA IPv4 and IPv6
// registries (code.dny.dev/ssrf generates its lists from them), so that
// ranges such as NAT64 (64:ff9b::/96, 64:ff9b:1::/48), 6to4 (2002::/16) or
// IPv4-compatible addresses (::/96), which can reach internal IPv4
// networks, are refused without a hand-kept list; IPv6 must be global
// unicast. Ports are not its business here: receivers listen where they
// like.
var guardian = ssrf.New(ssrf.WithAnyPort(), ssrf.WithAnyNetwork())

// ValidateWebhookURL checks an endpoint URL: http or https, a host, no
// credentials, and every address the host resolves to allowed by p.
func (p AddressPolicy) ValidateWebhookURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		return services.Errorf(services.CodeInvalid, "url must be an absolute http or https URL")
	}
	if u.User != nil {
		return services.Errorf(services.CodeInvalid, "url must not contain credentials; Arbiter signs every message instead")
	}
	if len(raw) > 2048 {
		return services.Errorf(services.CodeInvalid, "url is longer than 2048 bytes")
	}
	if p.AllowPrivate {
		return nil
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		if why := p.blocked(ip); why != "" {
			return services.Errorf(services.CodeInvalid, "url points to a %s address (%s); set ARBITER_WEBHOOK_ALLOW_PRIVATE=true to allow internal receivers", why, ip)
		}
		return nil
	}
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return services.Errorf(services.CodeInvalid, "url points to localhost; set ARBITER_WEBHOOK_ALLOW_PRIVATE=true to allow internal receivers")
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := p.resolver().LookupNetIP(rctx, "ip", host)
	if err != nil {
		return services.Errorf(services.CodeInvalid, "url host %q %s", host, lookupProblem(err))
	}
	for _, ip := range addrs {
		if why := p.blocked(ip); why != "" {
			return services.Errorf(services.CodeInvalid, "url host %q resolves to a %s address (%s); set ARBITER_WEBHOOK_ALLOW_PRIVATE=true to allow internal receivers", host, why, ip)
		}
	}
	return nil
}

// lookupProblem words a failed lookup for the person who typed the URL.
// The resolver's own error names the DNS server the service asks, which is
// the operator's business, not the caller's.
func lookupProblem(err error) string {
	var dns *net.DNSError
	switch {
	case errors.As(err, &dns) && dns.IsNotFound:
		return "is not known to DNS; check the name"
	case errors.As(err, &dns) && dns.IsTimeout, errors.Is(err, context.DeadlineExceeded):
		return "could not be looked up in time; try again"
	}
	return "could not be looked up; try again"
}

// DialContext resolves the host itself and connects only to an allowed
// address, so the address checked is the address dialled.
func (p AddressPolicy) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else if addrs, err = p.resolver().LookupNetIP(ctx, "ip", host); err != nil {
		return nil, fmt.Errorf("webhook: resolve %s: %w", host, err)
	}
	var lastErr error
	for _, ip := range addrs {
		if why := p.blocked(ip); why != "" {
			lastErr = fmt.Errorf("webhook: refusing to connect to %s: it resolves to a %s address (%s)", host, why, ip)
			continue
		}
		conn, err := p.dialer().DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		lastErr = err
	}
	if lastErr == nil {
		lastErr = fmt.Errorf("webhook: %s has no addresses", host)
	}
	return nil, lastErr
}

// dialer refuses blocked addresses at connect time as a second line.
func (p AddressPolicy) dialer() *net.Dialer {
	return &net.Dialer{
		Timeout:   10 * time.Second,
		KeepAlive: 30 * time.Second,
		Control: func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("webhook: unexpected address %q", address)
			}
			if why := p.blocked(ap.Addr()); why != "" {
				return fmt.Errorf("webhook: refusing to connect to %s address %s", why, ap.Addr())
			}
			return nil
		},
	}
}
