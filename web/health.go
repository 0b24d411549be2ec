package web

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services"
)

// schemaChecker is what readiness needs from the store.
type schemaChecker interface {
	Ping(ctx context.Context) error
	Schema(ctx context.Context) (services.SchemaStatus, error)
}

type healthHandler struct {
	store schemaChecker
}

type statusBody struct {
	Status string `json:"status"`
}

// healthz says the process is up.
func (h *healthHandler) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, statusBody{Status: "ok"})
}

// readyz says the database answers and its schema is current.
func (h *healthHandler) readyz(c echo.Context) error {
	ctx := c.Request().Context()
	if err := h.store.Ping(ctx); err != nil {
		return err
	}
	st, err := h.store.Schema(ctx)
	if err != nil {
		return err
	}
	if !st.UpToDate() {
		return &services.Error{Code: services.CodeUnavailable, Message: "the database schema is outdated: run `arbiter migrate`"}
	}
	return c.JSON(http.StatusOK, statusBody{Status: "ready"})
}
