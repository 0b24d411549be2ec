/** One operation of the HTTP API. */
export interface Route {
  method: "GET" | "POST" | "PATCH" | "DELETE";
  /** With {id} for the one path parameter. */
  path: string;
}

/**
 * Maps each client method that calls the API to the operation it calls.
 * Requests are built from this table only, and a test checks it against
 * the OpenAPI document the server serves, so the client cannot silently
 * fall out of step with the server.
 */
export const ROUTES = {
  submit: { method: "POST", path: "/v1/entries" },
  submitBatch: { method: "POST", path: "/v1/entries" },
  submitWait: { method: "POST", path: "/v1/entries" },

  listActions: { method: "GET", path: "/v1/actions" },
  actionByKey: { method: "GET", path: "/v1/actions" },
  action: { method: "GET", path: "/v1/actions/{id}" },
  entriesPage: { method: "GET", path: "/v1/actions/{id}/entries" },
  decide: { method: "POST", path: "/v1/actions/{id}/decisions" },
  decideMany: { method: "POST", path: "/v1/decisions" },

  createWebhook: { method: "POST", path: "/v1/webhooks" },
  webhooks: { method: "GET", path: "/v1/webhooks" },
  webhook: { method: "GET", path: "/v1/webhooks/{id}" },
  updateWebhook: { method: "PATCH", path: "/v1/webhooks/{id}" },
  deleteWebhook: { method: "DELETE", path: "/v1/webhooks/{id}" },
  rotateWebhookSecret: { method: "POST", path: "/v1/webhooks/{id}/rotate-secret" },
  testWebhook: { method: "POST", path: "/v1/webhooks/{id}/test" },
  webhookDeliveries: { method: "GET", path: "/v1/webhooks/{id}/deliveries" },
  redeliver: { method: "POST", path: "/v1/deliveries/{id}/redeliver" },

  createPolicy: { method: "POST", path: "/v1/policies" },
  policies: { method: "GET", path: "/v1/policies" },
  policy: { method: "GET", path: "/v1/policies/{id}" },
  updatePolicy: { method: "PATCH", path: "/v1/policies/{id}" },
  deletePolicy: { method: "DELETE", path: "/v1/policies/{id}" },
  policyVersions: { method: "GET", path: "/v1/policies/{id}/versions" },
  testPolicy: { method: "POST", path: "/v1/policies/test" },

  createLimit: { method: "POST", path: "/v1/limits" },
  limits: { method: "GET", path: "/v1/limits" },
  limit: { method: "GET", path: "/v1/limits/{id}" },
  updateLimit: { method: "PATCH", path: "/v1/limits/{id}" },
  deleteLimit: { method: "DELETE", path: "/v1/limits/{id}" },
  limitVersions: { method: "GET", path: "/v1/limits/{id}/versions" },
  limitUsage: { method: "GET", path: "/v1/limits/{id}/usage" },

  startFreeze: { method: "POST", path: "/v1/freezes" },
  freezes: { method: "GET", path: "/v1/freezes" },
  freeze: { method: "GET", path: "/v1/freezes/{id}" },
  liftFreeze: { method: "POST", path: "/v1/freezes/{id}/lift" },

  createBreaker: { method: "POST", path: "/v1/breakers" },
  breakers: { method: "GET", path: "/v1/breakers" },
  breaker: { method: "GET", path: "/v1/breakers/{id}" },
  updateBreaker: { method: "PATCH", path: "/v1/breakers/{id}" },
  deleteBreaker: { method: "DELETE", path: "/v1/breakers/{id}" },
  breakerVersions: { method: "GET", path: "/v1/breakers/{id}/versions" },

  auditKey: { method: "GET", path: "/v1/audit/key" },
  auditCheckpoint: { method: "GET", path: "/v1/audit/checkpoint" },
  auditProof: { method: "GET", path: "/v1/audit/entries/{id}/proof" },
  auditConsistency: { method: "GET", path: "/v1/audit/consistency" },
  auditExport: { method: "GET", path: "/v1/audit/export" },

  health: { method: "GET", path: "/healthz" },
  ready: { method: "GET", path: "/readyz" },
  metrics: { method: "GET", path: "/metrics" },
  openapi: { method: "GET", path: "/v1/openapi.json" },
} as const satisfies Record<string, Route>;

export type RouteName = keyof typeof ROUTES;
