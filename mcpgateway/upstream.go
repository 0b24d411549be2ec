package mcpgateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Upstream says where the upstream MCP server is: a command line the
// gateway runs and talks to over stdio, or the URL of a streamable HTTP
// endpoint. Exactly one is set.
type Upstream struct {
	Command []string
	URL     string
	// Stderr receives the standard error of an upstream command (default:
	// discarded).
	Stderr io.Writer
	// HTTPClient sends the requests to an upstream URL (default
	// http.DefaultClient).
	HTTPClient *http.Client
}

func (u Upstream) String() string {
	if u.URL != "" {
		return u.URL
	}
	return fmt.Sprintf("%q", u.Command)
}

func (u Upstream) check() error {
	switch {
	case u.URL != "" && len(u.Command) > 0:
		return errors.New("mcpgateway: give the upstream as a command or as a URL, not both")
	case u.URL == "" && len(u.Command) == 0:
		return errors.New("mcpgateway: no upstream: give the command line of an MCP server (after --) or --upstream-url")
	}
	return nil
}

// upstream is the gateway's client session with the upstream server. When
// the session ends (the command exited, the HTTP session expired) the next
// call connects again.
type upstream struct {
	spec   Upstream
	client *mcp.Client
	log    *slog.Logger

	mu   sync.Mutex
	cs   *mcp.ClientSession
	done chan struct{} // closed when cs has ended

	// progress forwards the upstream's progress notifications for a call
	// to whoever made it, by the token the gateway gave the call.
	progress  sync.Map // token string → func(*mcp.ProgressNotificationParams)
	nextToken atomic.Int64
}

// errNotSent means the call never reached the upstream: the gateway could
// not connect (no session, or the upstream URL refused the connection of
// the call's own request). Nothing happened.
var errNotSent = errors.New("the upstream could not be reached; the call was not sent")

func newUpstream(spec Upstream, log *slog.Logger, opts *mcp.ClientOptions) *upstream {
	u := &upstream{spec: spec, log: log}
	o := *opts
	o.ProgressNotificationHandler = u.forwardProgress
	u.client = mcp.NewClient(&mcp.Implementation{Name: "arbiter-mcp-gateway", Version: "1"}, &o)
	return u
}

// session returns the live session, connecting if there is none.
func (u *upstream) session(ctx context.Context) (*mcp.ClientSession, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cs != nil {
		select {
		case <-u.done:
			u.log.WarnContext(ctx, "mcp gateway: the upstream session ended; connecting again", "upstream", u.spec.String())
			u.cs = nil
		default:
			return u.cs, nil
		}
	}
	cs, err := u.client.Connect(ctx, u.transport(), nil)
	if err != nil {
		return nil, fmt.Errorf("connect to the upstream %s: %w", u.spec, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cs.Wait()
		close(done)
	}()
	u.cs, u.done = cs, done
	return cs, nil
}

func (u *upstream) transport() mcp.Transport {
	if u.spec.URL != "" {
		return &mcp.StreamableClientTransport{Endpoint: u.spec.URL, HTTPClient: u.spec.HTTPClient}
	}
	cmd := exec.Command(u.spec.Command[0], u.spec.Command[1:]...)
	cmd.Stderr = u.spec.Stderr
	return &mcp.CommandTransport{Command: cmd}
}

// call calls an upstream tool. progress, if set, receives the upstream's
// progress notifications for the call. An error that wraps errNotSent
// means the upstream never got the call.
func (u *upstream) call(ctx context.Context, name string, args any, progress func(*mcp.ProgressNotificationParams)) (*mcp.CallToolResult, error) {
	res, err := u.callOnce(ctx, name, args, progress)
	if errors.Is(err, mcp.ErrSessionMissing) {
		// The upstream answered 404 to the call: it does not know the
		// session (it restarted) and did not run the call. A new session
		// may send it once more; that is not a retry of anything that ran.
		u.log.WarnContext(ctx, "mcp gateway: the upstream lost the session; connecting again", "upstream", u.spec.String())
		res, err = u.callOnce(ctx, name, args, progress)
		if errors.Is(err, mcp.ErrSessionMissing) {
			return nil, fmt.Errorf("%w: %w", errNotSent, err)
		}
	}
	return res, err
}

func (u *upstream) callOnce(ctx context.Context, name string, args any, progress func(*mcp.ProgressNotificationParams)) (*mcp.CallToolResult, error) {
	cs, err := u.session(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNotSent, err)
	}
	params := &mcp.CallToolParams{Name: name, Arguments: args}
	if progress != nil {
		token := "arbiter-" + strconv.FormatInt(u.nextToken.Add(1), 10)
		u.progress.Store(token, progress)
		defer u.progress.Delete(token)
		params.SetProgressToken(token)
	}
	res, err := cs.CallTool(ctx, params)
	switch {
	case err == nil:
	case errors.Is(err, mcp.ErrSessionMissing):
		u.forget(cs)
	case dialFailed(err):
		err = fmt.Errorf("%w: %w", errNotSent, err)
	}
	return res, err
}

// forget drops cs, a session the upstream no longer knows, so that the
// next call connects again.
func (u *upstream) forget(cs *mcp.ClientSession) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cs == cs {
		u.cs = nil
		go cs.Close()
	}
}

// dialFailed says whether err is a failure to open the connection that
// would have carried the request (refused, no route, no such host): then
// not one byte of the call left the gateway. Every other transport error may
// come after the upstream got the call.
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func (u *upstream) forwardProgress(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
	token, _ := req.Params.ProgressToken.(string)
	if fn, ok := u.progress.Load(token); ok {
		fn.(func(*mcp.ProgressNotificationParams))(req.Params)
	}
}

func (u *upstream) close() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cs == nil {
		return nil
	}
	err := u.cs.Close()
	u.cs = nil
	return err
}
