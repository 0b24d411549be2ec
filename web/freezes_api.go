package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/policies"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// freezesHandler serves /v1/freezes and /v1/breakers (SPEC "Limits across
// actions"): operators of a namespace and admins start and lift freezes,
// admins manage breakers, and readers read their namespace's.
type freezesHandler struct {
	freezes  *policies.Freezes
	breakers *policies.Breakers
}

type freezeList struct {
	Freezes []*record.Freeze `json:"freezes"`
}

type breakerList struct {
	Breakers []*policies.Breaker `json:"breakers"`
}

type breakerVersionList struct {
	Versions []*policies.Breaker `json:"versions"`
}

func (h *freezesHandler) start(c echo.Context) error {
	var in policies.FreezeInput
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	f, err := h.freezes.Start(c.Request().Context(), principal(c), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, f)
}

func (h *freezesHandler) list(c echo.Context) error {
	active, err := boolQuery(c, "active")
	if err != nil {
		return err
	}
	fs, err := h.freezes.List(c.Request().Context(), principal(c), c.QueryParam("namespace"), active)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, freezeList{Freezes: fs})
}

func (h *freezesHandler) get(c echo.Context) error {
	f, err := h.freezes.Get(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, f)
}

func (h *freezesHandler) lift(c echo.Context) error {
	var in policies.LiftInput
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	f, err := h.freezes.Lift(c.Request().Context(), principal(c), c.Param("id"), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, f)
}

func (h *freezesHandler) createBreaker(c echo.Context) error {
	var in policies.BreakerInput
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	b, err := h.breakers.Create(c.Request().Context(), principal(c), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, b)
}

func (h *freezesHandler) listBreakers(c echo.Context) error {
	bs, err := h.breakers.List(c.Request().Context(), principal(c), c.QueryParam("namespace"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, breakerList{Breakers: bs})
}

func (h *freezesHandler) getBreaker(c echo.Context) error {
	b, err := h.breakers.Get(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, b)
}

func (h *freezesHandler) updateBreaker(c echo.Context) error {
	var in policies.BreakerInput
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	b, err := h.breakers.Update(c.Request().Context(), principal(c), c.Param("id"), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, b)
}

func (h *freezesHandler) deleteBreaker(c echo.Context) error {
	if err := h.breakers.Delete(c.Request().Context(), principal(c), c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (h *freezesHandler) breakerVersions(c echo.Context) error {
	vs, err := h.breakers.Versions(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, breakerVersionList{Versions: vs})
}

// boolQuery reads query parameter name as true or false; absent is false.
func boolQuery(c echo.Context, name string) (bool, error) {
	vs, given := c.QueryParams()[name]
	if !given {
		return false, nil
	}
	switch v := vs[0]; v {
	case "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, services.Errorf(services.CodeInvalid, "query parameter %q must be true or false, not %q", name, v)
	}
}
