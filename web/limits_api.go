package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services/policies"
)

// limitsHandler serves /v1/limits (SPEC "Limits across actions"): admins
// manage, operators and readers read their namespace's, as for policies.
type limitsHandler struct {
	limits *policies.Limits
}

type limitList struct {
	Limits []*policies.Limit `json:"limits"`
}

type limitVersionList struct {
	Versions []*policies.Limit `json:"versions"`
}

func (h *limitsHandler) create(c echo.Context) error {
	var in policies.LimitInput
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	l, err := h.limits.Create(c.Request().Context(), principal(c), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, l)
}

func (h *limitsHandler) list(c echo.Context) error {
	ls, err := h.limits.List(c.Request().Context(), principal(c), c.QueryParam("namespace"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, limitList{Limits: ls})
}

func (h *limitsHandler) get(c echo.Context) error {
	l, err := h.limits.Get(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, l)
}

func (h *limitsHandler) update(c echo.Context) error {
	var in policies.LimitInput
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	l, err := h.limits.Update(c.Request().Context(), principal(c), c.Param("id"), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, l)
}

func (h *limitsHandler) delete(c echo.Context) error {
	if err := h.limits.Delete(c.Request().Context(), principal(c), c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (h *limitsHandler) versions(c echo.Context) error {
	vs, err := h.limits.Versions(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, limitVersionList{Versions: vs})
}

func (h *limitsHandler) usage(c echo.Context) error {
	u, err := h.limits.Usage(c.Request().Context(), principal(c), c.Param("id"), c.QueryParam("group"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, u)
}
