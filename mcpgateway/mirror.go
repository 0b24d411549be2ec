package mcpgateway

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Everything that is not a tool call passes through unchanged: the
// upstream's prompts, resources and resource templates are offered as the
// upstream lists them (again when it says they changed), and getting a
// prompt, reading a resource or completing an argument is asked of the
// upstream.

func (g *Gateway) refreshPrompts() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := g.up.session(ctx)
	if err != nil {
		g.log.Error("mcp gateway: list the upstream's prompts", "err", err)
		return
	}
	var prompts []*mcp.Prompt
	for p, err := range cs.Prompts(ctx, nil) {
		if err != nil {
			g.log.Error("mcp gateway: list the upstream's prompts", "err", err)
			return
		}
		prompts = append(prompts, p)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.server.RemovePrompts(g.listedPrompts...)
	g.listedPrompts = g.listedPrompts[:0]
	for _, p := range prompts {
		g.server.AddPrompt(p, g.getPrompt)
		g.listedPrompts = append(g.listedPrompts, p.Name)
	}
}

func (g *Gateway) getPrompt(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	cs, err := g.up.session(ctx)
	if err != nil {
		return nil, err
	}
	return cs.GetPrompt(ctx, req.Params)
}

func (g *Gateway) refreshResources() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := g.up.session(ctx)
	if err != nil {
		g.log.Error("mcp gateway: list the upstream's resources", "err", err)
		return
	}
	var resources []*mcp.Resource
	for r, err := range cs.Resources(ctx, nil) {
		if err != nil {
			g.log.Error("mcp gateway: list the upstream's resources", "err", err)
			return
		}
		resources = append(resources, r)
	}
	var templates []*mcp.ResourceTemplate
	for t, err := range cs.ResourceTemplates(ctx, nil) {
		if err != nil {
			g.log.Error("mcp gateway: list the upstream's resource templates", "err", err)
			return
		}
		templates = append(templates, t)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.server.RemoveResources(g.listedResources...)
	g.server.RemoveResourceTemplates(g.listedTemplates...)
	g.listedResources, g.listedTemplates = g.listedResources[:0], g.listedTemplates[:0]
	for _, r := range resources {
		g.server.AddResource(r, g.readResource)
		g.listedResources = append(g.listedResources, r.URI)
	}
	for _, t := range templates {
		g.server.AddResourceTemplate(t, g.readResource)
		g.listedTemplates = append(g.listedTemplates, t.URITemplate)
	}
}

func (g *Gateway) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	cs, err := g.up.session(ctx)
	if err != nil {
		return nil, err
	}
	return cs.ReadResource(ctx, req.Params)
}

func (g *Gateway) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	cs, err := g.up.session(ctx)
	if err != nil {
		return nil, err
	}
	return cs.Complete(ctx, req.Params)
}
