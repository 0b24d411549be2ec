// Package static embeds the dashboard's stylesheet, its small script and the
// vendored htmx (from the htmx.org and htmx-ext-sse npm packages; see
// vendor/README.md). Nothing is loaded from a CDN.
package static

import "embed"

// FS holds every file served under /static/.
//
//go:embed *.css *.js *.svg vendor/*.js
var FS embed.FS
