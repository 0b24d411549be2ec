package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/arbiter-ledger/arbiter/services/accounts"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
)

// browser is a cookie-keeping HTTP client that reads CSRF tokens from forms,
// as a person's browser would without JavaScript.
type browser struct {
	t      *testing.T
	e      *env
	client *http.Client
	csrf   string // the token of the last page that had one
}

func (e *env) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: e.t, e: e, client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

// user creates a dashboard user and returns its password.
func (e *env) user(email string, role services.Role) string {
	e.t.Helper()
	pw := "correct horse battery " + string(role)
	_, err := accounts.New(e.st).CreateUser(context.Background(), email, role, pw)
	require.NoError(e.t, err)
	return pw
}

// page is one response: status, headers and, for HTML, the parsed document.
type page struct {
	status int
	header http.Header
	doc    *goquery.Document
	body   string
}

func (b *browser) do(req *http.Request) page {
	b.t.Helper()
	res, err := b.client.Do(req)
	require.NoError(b.t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(b.t, err)
	p := page{status: res.StatusCode, header: res.Header, body: string(raw)}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		p.doc, err = goquery.NewDocumentFromReader(strings.NewReader(p.body))
		require.NoError(b.t, err)
		if tok, ok := p.doc.Find(`input[name=csrf_token]`).First().Attr("value"); ok {
			b.csrf = tok
		}
	}
	return p
}

func (b *browser) get(path string) page {
	b.t.Helper()
	req, err := http.NewRequest("GET", b.e.srv.URL+path, nil)
	require.NoError(b.t, err)
	return b.do(req)
}

// post submits a form. Unless the values carry their own csrf_token, the
// token of the last page is added, as the form on it would.
func (b *browser) post(path string, v url.Values) page {
	b.t.Helper()
	if v == nil {
		v = url.Values{}
	}
	if _, ok := v["csrf_token"]; !ok && b.csrf != "" {
		v.Set("csrf_token", b.csrf)
	}
	req, err := http.NewRequest("POST", b.e.srv.URL+path, strings.NewReader(v.Encode()))
	require.NoError(b.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

// signIn signs in through the form and fails the test if that does not work.
func (b *browser) signIn(email, password string) {
	b.t.Helper()
	b.get("/signin")
	p := b.post("/signin", url.Values{"email": {email}, "password": {password}})
	require.Equal(b.t, http.StatusSeeOther, p.status, p.body)
	require.Equal(b.t, "/", p.header.Get("Location"))
	b.get("/") // pick up the session's CSRF token
}

// testid finds elements by their data-testid.
func (p page) testid(id string) *goquery.Selection {
	return p.doc.Find(`[data-testid="` + id + `"]`)
}
