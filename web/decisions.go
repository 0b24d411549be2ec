package web

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services"
)

// bulkDecider is what bulk decisions need from the ledger.
type bulkDecider interface {
	DecideMany(ctx context.Context, p services.Principal, in services.BulkInput) (*services.BulkAnswer, error)
}

// decisionsHandler serves POST /v1/decisions: one decision on the actions a
// filter selects, each decided as if alone (services/bulk.go).
type decisionsHandler struct {
	ledger bulkDecider
}

// decideMany answers a dry run with what the decision would apply to, and
// an applied decision with how many it decided and which it skipped. Both
// are 200: an applied request may decide none.
func (h *decisionsHandler) decideMany(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	in, err := services.DecodeBulkInput(body)
	if err != nil {
		return err
	}
	ans, err := h.ledger.DecideMany(c.Request().Context(), principal(c), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ans)
}
