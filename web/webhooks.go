package web

import (
	"context"
	"net/http"
	"strconv"

	"github.com/arbiter-ledger/arbiter/services/webhooks"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services"
)

// webhookManager is what the webhook API needs.
type webhookManager interface {
	CreateEndpoint(ctx context.Context, p services.Principal, in webhooks.EndpointInput) (*webhooks.Endpoint, error)
	Endpoints(ctx context.Context, p services.Principal) ([]*webhooks.Endpoint, error)
	Endpoint(ctx context.Context, p services.Principal, id string) (*webhooks.Endpoint, error)
	UpdateEndpoint(ctx context.Context, p services.Principal, id string, in webhooks.EndpointInput) (*webhooks.Endpoint, error)
	DeleteEndpoint(ctx context.Context, p services.Principal, id string) error
	RotateSecret(ctx context.Context, p services.Principal, id string) (*webhooks.Endpoint, error)
	SendTest(ctx context.Context, p services.Principal, id string) (*webhooks.Delivery, error)
	EndpointDeliveries(ctx context.Context, p services.Principal, endpointID string, limit int) ([]*webhooks.Delivery, error)
	Redeliver(ctx context.Context, p services.Principal, id string) (*webhooks.Delivery, error)
}

// webhooksHandler serves /v1/webhooks and /v1/deliveries for admin keys.
type webhooksHandler struct {
	hooks webhookManager
}

type endpointList struct {
	Endpoints []*webhooks.Endpoint `json:"endpoints"`
}

type deliveryList struct {
	Deliveries []*webhooks.Delivery `json:"deliveries"`
}

func (h *webhooksHandler) create(c echo.Context) error {
	var in webhooks.EndpointInput
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	ep, err := h.hooks.CreateEndpoint(c.Request().Context(), principal(c), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, ep)
}

func (h *webhooksHandler) list(c echo.Context) error {
	eps, err := h.hooks.Endpoints(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, endpointList{Endpoints: eps})
}

func (h *webhooksHandler) get(c echo.Context) error {
	ep, err := h.hooks.Endpoint(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ep)
}

func (h *webhooksHandler) update(c echo.Context) error {
	var in webhooks.EndpointInput
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	ep, err := h.hooks.UpdateEndpoint(c.Request().Context(), principal(c), c.Param("id"), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ep)
}

func (h *webhooksHandler) delete(c echo.Context) error {
	if err := h.hooks.DeleteEndpoint(c.Request().Context(), principal(c), c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (h *webhooksHandler) rotate(c echo.Context) error {
	ep, err := h.hooks.RotateSecret(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ep)
}

func (h *webhooksHandler) test(c echo.Context) error {
	d, err := h.hooks.SendTest(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, d)
}

func (h *webhooksHandler) deliveries(c echo.Context) error {
	limit := 0
	if c.QueryParams().Has("limit") {
		n, err := strconv.Atoi(c.QueryParam("limit"))
		if err != nil || n < 1 || n > 500 {
			return services.Errorf(services.CodeInvalid, "limit must be an integer between 1 and 500")
		}
		limit = n
	}
	ds, err := h.hooks.EndpointDeliveries(c.Request().Context(), principal(c), c.Param("id"), limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, deliveryList{Deliveries: ds})
}

func (h *webhooksHandler) redeliver(c echo.Context) error {
	d, err := h.hooks.Redeliver(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, d)
}

// decodeBody reads a JSON body strictly into v.
func decodeBody(c echo.Context, v any) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	return services.DecodeStrict(body, v)
}
