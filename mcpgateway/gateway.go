package mcpgateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/arbiter-ledger/arbiter/client"
)

// Options configure a Gateway.
type Options struct {
	// Arbiter is the client the gateway records with; its API key is an
	// agent key, which decides the namespace. Required.
	Arbiter *client.Client
	// Upstream is the MCP server whose tools the gateway guards. Required.
	Upstream Upstream
	// Config says how the tools are guarded (nil: the defaults for every
	// tool).
	Config *Config
	// Name is the ledger's tool prefix when the configuration has no name
	// (the command line's --name). One of the two is required; when both
	// are given they must agree.
	Name string
	// Agent names the gateway in the ledger (default: the API key's name).
	Agent string
	// WorkerPoll is the worker's pause between polls for operators'
	// decisions (default 1 s).
	WorkerPoll time.Duration
	// Logger receives the gateway's log (default slog.Default()).
	Logger *slog.Logger
}

// Gateway is an MCP server that offers one upstream server's tools, prompts
// and resources, with the ledger between the model and the tools.
type Gateway struct {
	opts    Options
	log     *slog.Logger
	arbiter *client.Client
	cfg     *Config
	prefix  string
	up      *upstream
	server  *mcp.Server
	plans   map[string]*plan // by upstream tool name, as resolved at start

	mu          sync.Mutex
	listedTools map[string]bool // the tools the host is offered now
	// the prompts, resources and templates the host is offered now
	listedPrompts, listedResources, listedTemplates []string
}

// New connects to the upstream, lists its tools and applies the
// configuration to them. Every mistake it can find is an error here, before
// the first call: an unreachable upstream, a rule naming a tool or an
// argument the upstream does not have, an Arbiter that refuses the key.
func New(ctx context.Context, opts Options) (*Gateway, error) {
	if opts.Arbiter == nil {
		return nil, errors.New("mcpgateway: no Arbiter client")
	}
	if err := opts.Upstream.check(); err != nil {
		return nil, err
	}
	if opts.Config == nil {
		opts.Config = &Config{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	g := &Gateway{opts: opts, log: opts.Logger, arbiter: opts.Arbiter, cfg: opts.Config}
	switch {
	case g.cfg.Name == "" && opts.Name == "":
		return nil, errors.New(`mcpgateway: no name: give the tool prefix recorded in the ledger, which policies match ("payments" makes refund "payments.refund"), as "name" in the configuration or with --name; it is not taken from the upstream, which could rename itself`)
	case g.cfg.Name != "" && opts.Name != "" && g.cfg.Name != opts.Name:
		return nil, fmt.Errorf("mcpgateway: --name %q and the configuration's name %q differ; give one", opts.Name, g.cfg.Name)
	case g.cfg.Name != "":
		g.prefix = g.cfg.Name
	default:
		g.prefix = opts.Name
	}
	if err := checkPrefix(g.prefix); err != nil {
		return nil, err
	}
	if err := g.checkArbiter(ctx); err != nil {
		return nil, err
	}
	g.up = newUpstream(opts.Upstream, g.log, &mcp.ClientOptions{
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { go g.refreshTools() },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { go g.refreshPrompts() },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { go g.refreshResources() },
	})
	cs, err := g.up.session(ctx)
	if err != nil {
		return nil, fmt.Errorf("mcpgateway: %w", err)
	}
	init := cs.InitializeResult()
	tools, err := listTools(ctx, cs)
	if err != nil {
		_ = g.up.close()
		return nil, fmt.Errorf("mcpgateway: list the upstream's tools: %w", err)
	}
	g.plans, err = resolve(g.cfg, g.prefix, tools)
	if err != nil {
		_ = g.up.close()
		return nil, fmt.Errorf("mcpgateway: the configuration does not fit the upstream's tools:\n%w", err)
	}
	caps := init.Capabilities
	sopts := &mcp.ServerOptions{Instructions: init.Instructions, Logger: g.log,
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}}
	if caps != nil && caps.Completions != nil {
		sopts.CompletionHandler = g.complete
	}
	impl := &mcp.Implementation{Name: "arbiter-mcp-gateway", Version: "1"}
	if init.ServerInfo != nil {
		impl = &mcp.Implementation{Name: init.ServerInfo.Name, Title: init.ServerInfo.Title, Version: init.ServerInfo.Version}
	}
	g.server = mcp.NewServer(impl, sopts)
	g.listedTools = map[string]bool{}
	for name, p := range g.plans {
		g.server.AddTool(p.listed(), g.handler(p))
		g.listedTools[name] = true
	}
	if caps != nil && caps.Prompts != nil {
		g.refreshPrompts()
	}
	if caps != nil && caps.Resources != nil {
		g.refreshResources()
	}
	g.log.InfoContext(ctx, "mcp gateway: ready", "upstream", opts.Upstream.String(), "tools", len(g.plans), "guarded", g.guardedNames())
	return g, nil
}

// checkArbiter asks Arbiter once, so that a wrong key or URL shows at
// start. An Arbiter that cannot be reached now is only logged: calls fail
// closed until it can.
func (g *Gateway) checkArbiter(ctx context.Context) error {
	_, err := g.arbiter.ListActions(ctx, client.ListOptions{Limit: 1})
	switch {
	case err == nil:
		return nil
	case client.IsUnavailable(err):
		g.log.WarnContext(ctx, "mcp gateway: Arbiter cannot be reached now; guarded calls are refused until it can", "err", err)
		return nil
	}
	return fmt.Errorf("mcpgateway: Arbiter refused the gateway's API key (an agent key is needed): %w", err)
}

// Server is the MCP server the gateway offers the host.
func (g *Gateway) Server() *mcp.Server { return g.server }

// Serve serves one host session over t (mcp.StdioTransport for a host
// that launches the gateway) until it ends or ctx is done.
func (g *Gateway) Serve(ctx context.Context, t mcp.Transport) error {
	return g.server.Run(ctx, t)
}

// HTTPHandler serves hosts over streamable HTTP; every session shares the
// gateway's one upstream session.
func (g *Gateway) HTTPHandler() http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server }, nil)
}

// Close ends the upstream session (and stops an upstream command).
func (g *Gateway) Close() error { return g.up.close() }

func (g *Gateway) guardedNames() string {
	var names []string
	for name, p := range g.plans {
		if p.guarded {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

// recordedNote is added to the description of every guarded tool, so the
// model knows why a repeat does not run again and why a call may wait.
const recordedNote = "\n\n(Calls of this tool are recorded in Arbiter's action ledger: " +
	"an identical repeat returns the first call's saved result instead of running again, " +
	"and a call may wait for a person's approval.)"

// listed is the tool as the host sees it: the upstream's, with the note
// for guarded tools.
func (p *plan) listed() *mcp.Tool {
	t := *p.tool
	if p.guarded {
		t.Description += recordedNote
	}
	return &t
}

var validPrefix = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

// checkPrefix refuses a tool prefix the ledger's tool names cannot carry.
func checkPrefix(p string) error {
	if len(p) > 64 || !validPrefix.MatchString(p) {
		return fmt.Errorf("mcpgateway: name %q: a tool prefix is letters, digits, _ and -, in dot-separated parts, at most 64 characters", p)
	}
	return nil
}

func listTools(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, error) {
	var tools []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// refreshTools follows a change of the upstream's tools. A tool whose
// rule no longer fits is left out and logged; the worker keeps the tools it
// had at start.
func (g *Gateway) refreshTools() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := g.up.session(ctx)
	if err != nil {
		g.log.Error("mcp gateway: list the upstream's tools", "err", err)
		return
	}
	tools, err := listTools(ctx, cs)
	if err != nil {
		g.log.Error("mcp gateway: list the upstream's tools", "err", err)
		return
	}
	plans, err := resolve(g.cfg, g.prefix, tools)
	if err != nil {
		g.log.Error("mcp gateway: the upstream's tools changed and the configuration does not fit them all; those tools are left out", "err", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var gone []string
	for name := range g.listedTools {
		if plans[name] == nil {
			gone = append(gone, name)
			delete(g.listedTools, name)
		}
	}
	g.server.RemoveTools(gone...)
	for name, p := range plans {
		g.server.AddTool(p.listed(), g.handler(p))
		g.listedTools[name] = true
	}
}
