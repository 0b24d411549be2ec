package web

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services"
)

// FormBodyBytes bounds a dashboard form's body: the largest form (a bulk
// decision naming a thousand actions) is far below it.
const FormBodyBytes = 256 << 10

// The excess of a body over the limit that is read and thrown away before
// the 413 is answered. A server that answers and closes with the body
// unread makes the kernel reset the connection, and a client that writes
// its whole body before it reads (Python's urllib) then sees the reset,
// not the answer. Beyond these bounds the connection is closed anyway.
const (
	MaxDrainBytes = 8 << 20
	MaxDrainTime  = 5 * time.Second
)

// limitBody refuses a body over max bytes with 413: a declared length over
// the limit at once, a streamed one when it passes the limit. Before the
// 413 is answered, the rest of the body is read and discarded within
// MaxDrainBytes and MaxDrainTime, and the connection is closed after it.
func limitBody(max int64) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if r.ContentLength > max {
				refuseBody(c, r.Body, r.ContentLength-max <= MaxDrainBytes)
				return services.Errorf(services.CodeBodyTooLarge, "the request body is over %d bytes", max)
			}
			if r.Body == nil || r.Body == http.NoBody {
				return next(c)
			}
			body := &limitedBody{ReadCloser: http.MaxBytesReader(c.Response().Writer, r.Body, max)}
			original := r.Body
			r.Body = body
			err := next(c)
			if body.hit {
				refuseBody(c, original, true)
			}
			return err
		}
	}
}

// limitedBody notes that the body passed its limit, whoever read it.
type limitedBody struct {
	io.ReadCloser
	hit bool
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		b.hit = true
	}
	return n, err
}

// refuseBody makes the answer to come close the connection and, when
// drain, first reads what is left of body within the drain bounds. A
// client that waits for "100 Continue" has sent nothing yet and is
// answered at once.
func refuseBody(c echo.Context, body io.Reader, drain bool) {
	r := c.Request()
	c.Response().Header().Set(echo.HeaderConnection, "close")
	if !drain || body == nil || body == http.NoBody || strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		return
	}
	// A server without deadlines (a test recorder) is bounded by bytes only.
	_ = http.NewResponseController(c.Response().Writer).SetReadDeadline(time.Now().Add(MaxDrainTime))
	_, _ = io.CopyN(io.Discard, body, MaxDrainBytes)
}

// queryValues reads the query string strictly: a query that cannot be read
// (net/url refuses more than 10,000 parameters, and echo's QueryParams
// then silently has none, which would list everything as if unfiltered),
// or a parameter given more than services.MaxFilterValues times (each a
// bound variable of the SQL), is refused.
func queryValues(c echo.Context) (url.Values, error) {
	q, err := url.ParseQuery(c.Request().URL.RawQuery)
	if err != nil {
		return nil, services.Errorf(services.CodeInvalid, "the query string cannot be read: %v", err)
	}
	for name, values := range q {
		if len(values) > services.MaxFilterValues {
			return nil, services.Errorf(services.CodeInvalid, "query parameter %q is given %d times; the limit is %d", name, len(values), services.MaxFilterValues)
		}
	}
	return q, nil
}

// countValues counts the comma-separated values of a parameter's values.
func countValues(values []string) int {
	n := 0
	for _, v := range values {
		n += strings.Count(v, ",") + 1
	}
	return n
}

// tooManyValues refuses a filter of more than services.MaxFilterValues values.
func tooManyValues(name string, n int) error {
	return services.Errorf(services.CodeInvalid, "%s names %d values; the limit is %d", name, n, services.MaxFilterValues)
}

// readForm parses a dashboard form's body once, under limitBody, so a body
// that streams past the limit is 413 too rather than an empty form.
func readForm(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.Method == http.MethodPost {
			var err error
			if strings.HasPrefix(r.Header.Get(echo.HeaderContentType), echo.MIMEMultipartForm) {
				err = r.ParseMultipartForm(FormBodyBytes)
			} else {
				err = r.ParseForm()
			}
			var tooLarge *http.MaxBytesError
			switch {
			case errors.As(err, &tooLarge):
				return services.Errorf(services.CodeBodyTooLarge, "the request body is over %d bytes", tooLarge.Limit)
			case err != nil:
				return services.Errorf(services.CodeInvalid, "the form cannot be read: %v", err)
			}
		}
		return next(c)
	}
}

// ParseTrustedProxies reads ARBITER_TRUSTED_PROXIES: CIDRs or single
// addresses of the proxies and load balancers in front of Arbiter.
func ParseTrustedProxies(list []string) ([]*net.IPNet, error) {
	var out []*net.IPNet
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("trusted proxy %q is neither a CIDR nor an address", s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		p = p.Masked()
		out = append(out, &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())})
	}
	return out, nil
}

// clientAddress decides where a request came from (c.RealIP, for sign-in
// throttling and logs). X-Forwarded-For is believed only from the trusted
// proxies, read from the right: the first address that is not a trusted
// proxy is the client. Without trusted proxies it is the peer itself, so a
// client cannot choose its own address.
func clientAddress(trusted []*net.IPNet) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	// echo trusts loopback, link-local and private networks by default;
	// only what the operator named is trusted here.
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, n := range trusted {
		opts = append(opts, echo.TrustIPRange(n))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}
