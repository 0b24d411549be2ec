package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"
)

// benchConn is a minimal HTTP/1.1 client on one keep-alive connection: it
// writes a request and reads the answer in the calling goroutine. net/http's
// client hands every request between three goroutines, which on a 2-core
// machine costs the server under test a noticeable share of the CPU.
type benchConn struct {
	addr string
	head []byte // the request line and fixed headers, up to Content-Length
	c    net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
}

func newBenchConn(rawURL, path, key string) (*benchConn, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("--url %q: want http://host:port (put a TLS proxy aside when benchmarking)", rawURL)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	head := fmt.Appendf(nil, "POST %s%s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: ",
		u.Path, path, u.Host, key)
	return &benchConn{addr: addr, head: head}, nil
}

// post sends body and reads the answer's body into resp, returning the
// status. Any failure closes the connection; the next post dials again.
func (b *benchConn) post(body []byte, resp *bytes.Buffer) (int, error) {
	if b.c == nil {
		c, err := net.DialTimeout("tcp", b.addr, 10*time.Second)
		if err != nil {
			return 0, err
		}
		b.c, b.br, b.bw = c, bufio.NewReaderSize(c, 16<<10), bufio.NewWriterSize(c, 16<<10)
	}
	status, err := b.roundTrip(body, resp)
	if err != nil {
		b.close()
	}
	return status, err
}

func (b *benchConn) roundTrip(body []byte, resp *bytes.Buffer) (int, error) {
	b.c.SetDeadline(time.Now().Add(30 * time.Second))
	b.bw.Write(b.head)
	b.bw.WriteString(strconv.Itoa(len(body)))
	b.bw.WriteString("\r\n\r\n")
	b.bw.Write(body)
	if err := b.bw.Flush(); err != nil {
		return 0, err
	}
	return b.readAnswer(resp)
}

// readAnswer reads one answer: its status, and its body into resp.
func (b *benchConn) readAnswer(resp *bytes.Buffer) (int, error) {
	line, err := b.line()
	if err != nil {
		return 0, err
	}
	// "HTTP/1.1 201 Created"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, fmt.Errorf("malformed status line %q", line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, fmt.Errorf("malformed status line %q", line)
	}
	length, chunked, closing := -1, false, false
	for {
		h, err := b.line()
		if err != nil {
			return 0, err
		}
		if len(h) == 0 {
			break
		}
		name, value, _ := bytes.Cut(h, []byte(":"))
		value = bytes.TrimSpace(value)
		switch {
		case asciiEqualFold(name, "content-length"):
			if length, err = strconv.Atoi(string(value)); err != nil {
				return 0, fmt.Errorf("malformed Content-Length %q", value)
			}
		case asciiEqualFold(name, "transfer-encoding"):
			chunked = asciiEqualFold(value, "chunked")
		case asciiEqualFold(name, "connection"):
			closing = asciiEqualFold(value, "close")
		}
	}
	resp.Reset()
	switch {
	case chunked:
		if _, err := resp.ReadFrom(httputil.NewChunkedReader(b.br)); err != nil {
			return 0, err
		}
		for { // trailers, up to the blank line
			t, err := b.line()
			if err != nil {
				return 0, err
			}
			if len(t) == 0 {
				break
			}
		}
	case length >= 0:
		if _, err := io.CopyN(resp, b.br, int64(length)); err != nil {
			return 0, err
		}
	default:
		return 0, errors.New("an answer without Content-Length or chunked encoding")
	}
	if closing {
		b.close()
	}
	return status, nil
}

// line reads one header line without its CRLF.
func (b *benchConn) line() ([]byte, error) {
	l, err := b.br.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	return bytes.TrimRight(l, "\r\n"), nil
}

func (b *benchConn) close() {
	if b.c != nil {
		b.c.Close()
		b.c = nil
	}
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}
