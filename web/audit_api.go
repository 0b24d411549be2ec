package web

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/evidence"
)

// auditHandler serves /v1/audit (SPEC "Evidence"): the verifier key and
// the newest checkpoint to anyone, proofs to readers of the namespace,
// operators and admins.
type auditHandler struct {
	log *evidence.Log
}

func (h *auditHandler) key(c echo.Context) error {
	k, err := h.log.VerifierKey(c.Request().Context())
	if err != nil {
		return err
	}
	return c.String(http.StatusOK, k+"\n")
}

func (h *auditHandler) checkpoint(c echo.Context) error {
	cp, err := h.log.Checkpoint(c.Request().Context(), -1)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-cache")
	return c.Blob(http.StatusOK, "text/plain; charset=utf-8", cp.Note)
}

func (h *auditHandler) proof(c echo.Context) error {
	size, err := evidence.ParseSize("size", c.QueryParam("size"))
	if err != nil {
		return err
	}
	p, err := h.log.Proof(c.Request().Context(), principal(c), c.Param("id"), size)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, p)
}

type consistencyProof struct {
	Proof []string `json:"proof"`
}

func (h *auditHandler) consistency(c echo.Context) error {
	if principal(c).CanWrite() {
		return services.Errorf(services.CodeForbidden, "agent keys write entries; proofs are for readers, operators and admins")
	}
	from, err := evidence.ParseSize("from", c.QueryParam("from"))
	if err != nil {
		return err
	}
	to, err := evidence.ParseSize("to", c.QueryParam("to"))
	if err != nil {
		return err
	}
	if from < 0 || to < 0 {
		return services.Errorf(services.CodeInvalid, "from and to (tree sizes) are both required")
	}
	p, err := h.log.Consistency(c.Request().Context(), from, to)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, consistencyProof{Proof: p})
}

// export streams a namespace's bundle (what `arbiter audit export --url`
// writes to its file).
func (h *auditHandler) export(c echo.Context) error {
	q := evidence.ExportQuery{Namespace: c.QueryParam("namespace")}
	for _, b := range []struct {
		name string
		to   *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		t, err := timeParam(c.QueryParams(), b.name) // given empty is 400, as for the action list
		if err != nil {
			return err
		}
		if t != nil {
			*b.to = *t
		}
	}
	if q.Namespace == "" {
		return services.Errorf(services.CodeInvalid, "namespace is required")
	}
	if err := services.CheckFilterText("namespace", q.Namespace); err != nil {
		return err
	}
	// The first line is written only once the checkpoint is read: an
	// error before it is an ordinary error answer.
	w := &lazyHeader{c: c}
	if _, err := h.log.Export(c.Request().Context(), principal(c), w, q); err != nil {
		if w.started {
			return nil // the client sees a cut-off bundle, which does not verify
		}
		return err
	}
	if !w.started {
		w.start()
	}
	return nil
}

// lazyHeader writes the answer's status and type with its first bytes.
type lazyHeader struct {
	c       echo.Context
	started bool
}

func (w *lazyHeader) start() {
	w.started = true
	w.c.Response().Header().Set(echo.HeaderContentType, "application/x-ndjson")
	w.c.Response().WriteHeader(http.StatusOK)
}

func (w *lazyHeader) Write(b []byte) (int, error) {
	if !w.started {
		w.start()
	}
	return w.c.Response().Write(b)
}
