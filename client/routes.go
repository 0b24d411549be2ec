package client

import "net/http"

// route is one operation of the HTTP API.
type route struct {
	Method string
	Path   string // with {id} for the one path parameter
}

// routes maps each client method that calls the API to the operation it
// calls. Requests are built from this table only, and the drift test checks
// it against the OpenAPI document, so the client cannot silently fall out of
// step with the server.
var routes = map[string]route{
	"Submit":      {http.MethodPost, "/v1/entries"},
	"SubmitBatch": {http.MethodPost, "/v1/entries"},
	"SubmitWait":  {http.MethodPost, "/v1/entries"},

	"ListActions":   {http.MethodGet, "/v1/actions"},
	"ActionByKey":   {http.MethodGet, "/v1/actions"},
	"ActionByKeyIn": {http.MethodGet, "/v1/actions"},
	"Action":        {http.MethodGet, "/v1/actions/{id}"},
	"EntriesPage":   {http.MethodGet, "/v1/actions/{id}/entries"},
	"Decide":        {http.MethodPost, "/v1/actions/{id}/decisions"},
	"DecideMany":    {http.MethodPost, "/v1/decisions"},

	"CreateWebhook":       {http.MethodPost, "/v1/webhooks"},
	"Webhooks":            {http.MethodGet, "/v1/webhooks"},
	"Webhook":             {http.MethodGet, "/v1/webhooks/{id}"},
	"UpdateWebhook":       {http.MethodPatch, "/v1/webhooks/{id}"},
	"DeleteWebhook":       {http.MethodDelete, "/v1/webhooks/{id}"},
	"RotateWebhookSecret": {http.MethodPost, "/v1/webhooks/{id}/rotate-secret"},
	"TestWebhook":         {http.MethodPost, "/v1/webhooks/{id}/test"},
	"WebhookDeliveries":   {http.MethodGet, "/v1/webhooks/{id}/deliveries"},
	"Redeliver":           {http.MethodPost, "/v1/deliveries/{id}/redeliver"},

	"CreatePolicy":   {http.MethodPost, "/v1/policies"},
	"Policies":       {http.MethodGet, "/v1/policies"},
	"Policy":         {http.MethodGet, "/v1/policies/{id}"},
	"UpdatePolicy":   {http.MethodPatch, "/v1/policies/{id}"},
	"DeletePolicy":   {http.MethodDelete, "/v1/policies/{id}"},
	"PolicyVersions": {http.MethodGet, "/v1/policies/{id}/versions"},
	"TestPolicy":     {http.MethodPost, "/v1/policies/test"},

	"CreateLimit":   {http.MethodPost, "/v1/limits"},
	"Limits":        {http.MethodGet, "/v1/limits"},
	"Limit":         {http.MethodGet, "/v1/limits/{id}"},
	"UpdateLimit":   {http.MethodPatch, "/v1/limits/{id}"},
	"DeleteLimit":   {http.MethodDelete, "/v1/limits/{id}"},
	"LimitVersions": {http.MethodGet, "/v1/limits/{id}/versions"},
	"LimitUsage":    {http.MethodGet, "/v1/limits/{id}/usage"},

	"StartFreeze": {http.MethodPost, "/v1/freezes"},
	"Freezes":     {http.MethodGet, "/v1/freezes"},
	"Freeze":      {http.MethodGet, "/v1/freezes/{id}"},
	"LiftFreeze":  {http.MethodPost, "/v1/freezes/{id}/lift"},

	"CreateBreaker":   {http.MethodPost, "/v1/breakers"},
	"Breakers":        {http.MethodGet, "/v1/breakers"},
	"Breaker":         {http.MethodGet, "/v1/breakers/{id}"},
	"UpdateBreaker":   {http.MethodPatch, "/v1/breakers/{id}"},
	"DeleteBreaker":   {http.MethodDelete, "/v1/breakers/{id}"},
	"BreakerVersions": {http.MethodGet, "/v1/breakers/{id}/versions"},

	"AuditKey":         {http.MethodGet, "/v1/audit/key"},
	"AuditCheckpoint":  {http.MethodGet, "/v1/audit/checkpoint"},
	"AuditProof":       {http.MethodGet, "/v1/audit/entries/{id}/proof"},
	"AuditConsistency": {http.MethodGet, "/v1/audit/consistency"},
	"AuditExport":      {http.MethodGet, "/v1/audit/export"},

	"Health":  {http.MethodGet, "/healthz"},
	"Ready":   {http.MethodGet, "/readyz"},
	"Metrics": {http.MethodGet, "/metrics"},
	"OpenAPI": {http.MethodGet, "/v1/openapi.json"},
}
