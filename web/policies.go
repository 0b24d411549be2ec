package web

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/policies"
)

// policyManager is what the policy API needs.
type policyManager interface {
	Create(ctx context.Context, p services.Principal, in policies.Input) (*policies.Policy, error)
	List(ctx context.Context, p services.Principal, ns string) ([]*policies.Policy, error)
	Get(ctx context.Context, p services.Principal, id string) (*policies.Policy, error)
	Update(ctx context.Context, p services.Principal, id string, in policies.Input) (*policies.Policy, error)
	Delete(ctx context.Context, p services.Principal, id string) error
	Versions(ctx context.Context, p services.Principal, id string) ([]*policies.Policy, error)
	Test(ctx context.Context, p services.Principal, in policies.TestInput) (*policies.TestResult, error)
}

// policiesHandler serves /v1/policies: admins manage, operators and readers
// read their namespace's.
type policiesHandler struct {
	policies policyManager
}

type policyList struct {
	Policies []*policies.Policy `json:"policies"`
}

type versionList struct {
	Versions []*policies.Policy `json:"versions"`
}

func (h *policiesHandler) create(c echo.Context) error {
	var in policies.Input
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	p, err := h.policies.Create(c.Request().Context(), principal(c), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, p)
}

func (h *policiesHandler) list(c echo.Context) error {
	ps, err := h.policies.List(c.Request().Context(), principal(c), c.QueryParam("namespace"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, policyList{Policies: ps})
}

func (h *policiesHandler) get(c echo.Context) error {
	p, err := h.policies.Get(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, p)
}

func (h *policiesHandler) update(c echo.Context) error {
	var in policies.Input
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	p, err := h.policies.Update(c.Request().Context(), principal(c), c.Param("id"), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, p)
}

func (h *policiesHandler) delete(c echo.Context) error {
	if err := h.policies.Delete(c.Request().Context(), principal(c), c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (h *policiesHandler) versions(c echo.Context) error {
	vs, err := h.policies.Versions(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, versionList{Versions: vs})
}

func (h *policiesHandler) test(c echo.Context) error {
	var in policies.TestInput
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	res, err := h.policies.Test(c.Request().Context(), principal(c), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

// notPolicyTest answers 405 for the dry run's path with any method but
// POST, as echo does for a path that has no route of the method: "test" is
// never a policy id, so PATCH /v1/policies/test is a wrong method, not a
// change of a policy called "test". A middleware, not routes of its own, so
// that echo's answer to OPTIONS still lists POST only.
func notPolicyTest(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if c.Param("id") == "test" {
			c.Response().Header().Set(echo.HeaderAllow, http.MethodOptions+", "+http.MethodPost)
			return echo.ErrMethodNotAllowed
		}
		return next(c)
	}
}
