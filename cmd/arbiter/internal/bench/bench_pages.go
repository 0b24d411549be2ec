package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

type pageTiming struct {
	Path    string  `json:"path"`
	Bytes   int     `json:"bytes"`
	Latency latency `json:"latency_ms"`
}

type pagesReport struct {
	URL   string       `json:"url"`
	Pages []pageTiming `json:"pages"`
}

var csrfField = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

// runPages signs in as a dashboard user, as a browser without JavaScript
// would, and times GETs of each page one at a time after a short warm-up.
func (b *Cmd) runPages(ctx context.Context) (*pagesReport, error) {
	if b.Email == "" || !b.PasswordStdin {
		return nil, errors.New("--page needs --email and --password-stdin")
	}
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	password := strings.TrimRight(line, "\r\n")
	base := strings.TrimRight(b.URL, "/")
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if err := signInTo(ctx, client, base, b.Email, password); err != nil {
		return nil, err
	}
	rep := &pagesReport{URL: base}
	for _, path := range b.Page {
		get := func() (time.Duration, int, error) {
			req, err := http.NewRequestWithContext(ctx, "GET", base+path, nil)
			if err != nil {
				return 0, 0, err
			}
			t0 := time.Now()
			res, err := client.Do(req)
			if err != nil {
				return 0, 0, err
			}
			n, err := io.Copy(io.Discard, res.Body)
			res.Body.Close()
			d := time.Since(t0)
			if err == nil && res.StatusCode != http.StatusOK {
				err = fmt.Errorf("GET %s: %s", path, res.Status)
			}
			return d, int(n), err
		}
		for range 3 {
			if _, _, err := get(); err != nil {
				return nil, err
			}
		}
		ds := make([]time.Duration, 0, b.Requests)
		size := 0
		for range b.Requests {
			d, n, err := get()
			if err != nil {
				return nil, err
			}
			ds, size = append(ds, d), n
		}
		rep.Pages = append(rep.Pages, pageTiming{Path: path, Bytes: size, Latency: summarize(ds)})
	}
	return rep, nil
}

func signInTo(ctx context.Context, client *http.Client, base, email, password string) error {
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/signin", nil)
	res, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("reach %s: %w", base, err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := csrfField.FindSubmatch(page)
	if m == nil {
		return fmt.Errorf("GET %s/signin: no sign-in form (%s)", base, res.Status)
	}
	form := url.Values{"email": {email}, "password": {password}, "csrf_token": {string(m[1])}}
	req, _ = http.NewRequestWithContext(ctx, "POST", base+"/signin", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	res, err = client.Do(req)
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		return fmt.Errorf("sign-in as %s failed: %s", email, res.Status)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
